# airlock Python prestart driver: an interpreter started ahead of its program, for the warm pool.
#
# Run as `python3 -c DRIVER MODULE...` with the same environment as a one-shot run. It imports the
# MODULEs, then blocks on fd 0 for exactly one request: a decimal byte length, "\n", then that
# many bytes of JSON {"code": str | null, "path": str | null, "args": [str]}. It then runs the
# program as `python3 -c CODE ARGS...` or `python3 PATH ARGS...` would, in this process, with the
# rest of fd 0 as the program's stdin, and exits the way that interpreter would.
#
# What the program sees is made the native one: the __main__ namespace as the interpreter created
# it (plus __file__, __cached__ and a SourceFileLoader for a file), sys.argv, sys.orig_argv,
# sys.path[0], code compiled as '<string>' or the file's absolute path. The program's code object
# runs in the top-level frame's exec(); an exception leaving it loses that one frame from its
# traceback and is re-raised with a bare `raise` (which adds no frame), so the interpreter itself
# prints it, handles SystemExit and KeyboardInterrupt, runs atexit and flushes, as for a native
# run. Known differences are listed in docs/plugins.md ("Prestart drivers").
#
# Everything the driver needs lives inside one function, so none of its names reach the program's
# globals; the request is read with os.read, never through sys.stdin, so no byte of the program's
# stdin is consumed or buffered.


def _airlock_prestart():
    import os
    import sys

    main = sys.modules["__main__"]
    namespace = main.__dict__
    # The namespace the interpreter made for `-c`, before this file added anything to it.
    pristine = [(k, v) for k, v in namespace.items() if k != "_airlock_prestart"]

    def cwd():
        try:
            return os.getcwd()
        except OSError:  # removed meanwhile: nothing to restore
            return None

    def fail(message):
        os.write(2, ("airlock prestart: %s\n" % message).encode("utf-8", "replace"))
        os._exit(2)

    # --- preload ---------------------------------------------------------------------------------

    import _json  # the request's parser: a shared object whose loading would cost 3 ms later
    import _signal
    import _warnings
    import atexit

    # The builtin compile() builds the AST types on its first call: 2.5 ms, now rather than
    # after the program arrives.
    compile("", "<string>", "exec", dont_inherit=True)

    modules = sys.argv[1:]
    del sys.argv[1:]
    saved = {
        "path": sys.path[:],
        "filters": _warnings.filters[:],
        "once": dict(getattr(_warnings, "_onceregistry", {})),
        "environ": dict(os.environ),
        "cwd": cwd(),
        "recursion": sys.getrecursionlimit(),
        "hooks": [(name, getattr(sys, name, None)) for name in
                  ("stdin", "stdout", "stderr", "excepthook", "displayhook", "breakpointhook",
                   "unraisablehook")],
    }
    umask = os.umask(0o022)
    os.umask(umask)
    signals = {}
    for signum in range(1, _signal.NSIG):
        try:
            signals[signum] = _signal.getsignal(signum)
        except (OSError, ValueError):
            pass
    try:
        import _locale

        saved_locale = _locale.setlocale(_locale.LC_ALL)
    except Exception:
        _locale = None

    def flush_stdio():
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass

    # Whatever the imports write (a font cache notice, a deprecation warning) or read belongs to
    # no program: fds 0-2 point at /dev/null meanwhile. The stream objects stay the same, so a
    # module that keeps a reference to sys.stderr writes to the real one later.
    stdio = []
    if modules:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            try:
                stdio.append((fd, os.dup(fd)))
                os.dup2(null, fd)
            except OSError:
                pass
        os.close(null)
    for name in modules:
        try:
            __import__(name)
        except (Exception, SystemExit):
            pass  # as if never tried: the program's own import fails as it would natively
    if stdio:
        flush_stdio()
        for fd, copy in stdio:
            os.dup2(copy, fd)
            os.close(copy)

    # Undo what importing may have changed that the program would see. sys.modules stays: that
    # is the point.
    sys.path[:] = saved["path"]
    _warnings.filters[:] = saved["filters"]
    if hasattr(_warnings, "_onceregistry"):
        _warnings._onceregistry.clear()
        _warnings._onceregistry.update(saved["once"])
    # Invalidates every __warningregistry__ filled meanwhile.
    getattr(_warnings, "_filters_mutated", lambda: None)()
    if dict(os.environ) != saved["environ"]:
        for key in [k for k in os.environ if k not in saved["environ"]]:
            del os.environ[key]
        for key, value in saved["environ"].items():
            if os.environ.get(key) != value:
                os.environ[key] = value
    if saved["cwd"] is not None and cwd() != saved["cwd"]:
        os.chdir(saved["cwd"])
    if sys.getrecursionlimit() != saved["recursion"]:
        sys.setrecursionlimit(saved["recursion"])
    for name, value in saved["hooks"]:
        if value is not None and getattr(sys, name, None) is not value:
            setattr(sys, name, value)
    os.umask(umask)
    for signum, handler in signals.items():
        if handler is not None and _signal.getsignal(signum) is not handler:
            try:
                _signal.signal(signum, handler)
            except (OSError, ValueError, TypeError):
                pass
    if _locale is not None and _locale.setlocale(_locale.LC_ALL) != saved_locale:
        _locale.setlocale(_locale.LC_ALL, saved_locale)

    # --- the request -----------------------------------------------------------------------------

    def read(n):
        while True:
            try:
                return os.read(0, n)
            except BlockingIOError:  # a non-blocking stdin: wait for it, leaving its flags alone
                import select

                select.select([0], [], [])

    header = b""
    while True:
        byte = read(1)
        if not byte:
            if header:
                fail("stdin ended inside the request header")
            os._exit(0)  # the pool let this interpreter go before giving it a program
        if byte == b"\n":
            break
        header += byte
        if not byte.isdigit() or len(header) > 12:
            fail("request header is not a decimal length and a newline")
    if not header:
        fail("request header is not a decimal length and a newline")
    left = int(header)
    chunks = []
    while left:
        chunk = read(min(left, 1 << 20))
        if not chunk:
            fail("stdin ended inside the request (%d bytes missing)" % left)
        chunks.append(chunk)
        left -= len(chunk)

    class JsonContext:
        strict = True
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int
        parse_constant = float

    try:
        text = b"".join(chunks).decode("utf-8")
        request, end = _json.make_scanner(JsonContext())(text, 0)
        if text[end:].strip():
            raise ValueError("extra data after the object")
    except (ValueError, StopIteration) as e:
        fail("request is not JSON: %s" % (e,))
    if not isinstance(request, dict):
        fail("request is not a JSON object")
    code, path = request.get("code"), request.get("path")
    args = request.get("args")
    if args is None:
        args = []
    if (code is None) == (path is None):
        fail("request needs exactly one of 'code' and 'path'")
    if not isinstance(code if code is not None else path, str):
        fail("'code' and 'path' must be strings")
    if path == "":
        fail("'path' is empty")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        fail("'args' must be a list of strings")

    # --- the program's interpreter state ---------------------------------------------------------

    namespace.clear()
    namespace.update(pristine)
    linecache = sys.modules.get("linecache")
    lines = getattr(linecache, "cache", {})
    if code is not None:
        sys.argv[:] = ["-c"] + args
        if hasattr(sys, "orig_argv"):
            sys.orig_argv[:] = sys.orig_argv[:1] + ["-c", code] + args
        # Python 3.13+ registers the -c text for tracebacks; ours must show the program's lines.
        if "<string>" in lines:
            lines["<string>"] = (len(code), None, [line + "\n" for line in code.splitlines()],
                                 "<string>")
        source, filename = code, "<string>"
    else:
        if path.startswith("-"):
            path = "./" + path  # as the plugin passes it to a one-shot interpreter
        sys.argv[:] = [path] + args
        if hasattr(sys, "orig_argv"):
            sys.orig_argv[:] = sys.orig_argv[:1] + [path] + args
        lines.pop("<string>", None)
        # The interpreter makes the path absolute without normalising it (_Py_abspath): in "/",
        # "x.py" becomes "//x.py".
        filename = path if path.startswith("/") else os.getcwd() + "/" + path
        try:
            with open(filename, "rb") as f:
                source = f.read()
        except OSError as e:
            program = sys.orig_argv[0] if hasattr(sys, "orig_argv") else sys.executable
            os.write(2, ("%s: can't open file %r: [Errno %d] %s\n" % (
                program, filename, e.errno, e.strerror)).encode("utf-8", "surrogateescape"))
            os._exit(2)
        if not getattr(sys.flags, "safe_path", False):
            sys.path[0] = os.path.dirname(os.path.realpath(path))
        namespace["__file__"] = filename
        namespace["__cached__"] = None
        loader = sys.modules["_frozen_importlib_external"].SourceFileLoader
        namespace["__loader__"] = loader("__main__", filename)
    if sys.version_info < (3, 11):
        # Before 3.11 a bare raise re-raises the traceback the handler caught, this frame
        # included; the best left is a hook dropping the driver's frames (the program's own
        # sys.excepthook, if it sets one, sees them).
        driver_code = (sys._getframe(0).f_code, sys._getframe(1).f_code)

        def excepthook(kind, value, tb, original=sys.excepthook):
            while tb is not None and tb.tb_frame.f_code in driver_code:
                tb = tb.tb_next
            if isinstance(value, BaseException):
                value.__traceback__ = tb  # what the default hook prints
            return original(kind, value, tb)

        sys.excepthook = excepthook
    try:
        program = compile(source, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:
        e.__traceback__ = None  # printed with no traceback, as the interpreter's own compile is
        raise
    if request.get("fast_exit") is not True:
        return program, namespace

    # --- fast exit -------------------------------------------------------------------------------
    # The program runs here instead, and its end is the interpreter's own up to the point where
    # nothing the program can observe is left (Py_FinalizeEx: non-daemon threads joined, atexit
    # handlers run, stdio flushed); then os._exit skips tearing the modules down, which takes a
    # pandas-loaded interpreter 0.2-0.4 s. Finalizers that would run only at that teardown
    # (__del__ of objects still alive, weakref callbacks) do not run: hence an opt-in.
    # KeyboardInterrupt and a SystemExit whose code is no small int keep the native ending.
    def finish(status):
        threading = sys.modules.get("threading")
        if threading is not None:
            try:
                threading._shutdown()
            except BaseException:
                pass
        atexit._run_exitfuncs()
        flush_stdio()
        os._exit(status)

    error = None
    try:
        exec(program, namespace)
    except SystemExit as e:
        code = e.code
        if code is None:
            finish(0)
        if type(code) is int and -(1 << 31) <= code < (1 << 31):
            finish(code)
        e.__traceback__ = e.__traceback__.tb_next  # native ending: the interpreter prints it
        raise
    except KeyboardInterrupt as e:
        e.__traceback__ = e.__traceback__.tb_next
        raise
    except BaseException as e:
        error = e
    if error is None:
        finish(0)
    # As PyErr_Print does for `python3 -c`: the program's traceback (without this frame) to the
    # program's sys.excepthook, remembered in sys.last_*, then exit status 1. Outside the except
    # clause, so that an exception of the hook is not chained to the program's.
    tb = error.__traceback__.tb_next
    error.__traceback__ = tb
    sys.last_type, sys.last_value, sys.last_traceback = type(error), error, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = error
    hook = getattr(sys, "excepthook", None)
    if hook is None:
        sys.stderr.write("sys.excepthook is missing\n")
        sys.__excepthook__(type(error), error, tb)
        finish(1)
    try:
        hook(type(error), error, tb)
    except SystemExit as x:
        finish(0 if x.code is None else x.code if type(x.code) is int else 1)
    except BaseException as failure:
        sys.stderr.write("Error in sys.excepthook:\n")
        failure.__traceback__ = failure.__traceback__.tb_next  # without this frame
        sys.__excepthook__(type(failure), failure, failure.__traceback__)
        sys.stderr.write("\nOriginal exception was:\n")
        sys.__excepthook__(type(error), error, tb)
    finish(1)


try:
    exec(*_airlock_prestart())
except BaseException as _airlock_prestart_exc:
    # Drops this frame, the only one between the program and the interpreter; the bare raise
    # adds none.
    _airlock_prestart_exc.__traceback__ = _airlock_prestart_exc.__traceback__.tb_next
    raise
