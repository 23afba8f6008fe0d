# airlock Python session driver: one long-lived interpreter per code context.
#
# Requests arrive on stdin, one JSON object per line: {"id": "r1", "code": "..."}. Events go to
# the control pipe (fd 3 at start), one JSON object per line: "ready" once, then per request any
# number of "result", "display" and "error" events and exactly one "done". The code's own output
# goes to fds 1 and 2. Embedded into the python language plugin and run as `python3 -u -c`; the
# plugin checks at build time that it fits in one argv string. Only C modules at start and on
# the path of a run (_json, _signal, binascii, then _ast; not json, ast, signal, base64, which pull
# in re and enum and would double the start time); traceback and linecache load on the first
# error.
import os
import sys


def _airlock_session():
    import _json
    import _signal
    import binascii
    import time

    quote = _json.encode_basestring

    def encode(o):
        # Events hold str, int, float, bool, None, dicts and lists, and _repr_json_ output.
        if isinstance(o, str):
            return quote(o)
        if o is None or o is True or o is False:
            return "null" if o is None else "true" if o else "false"
        if isinstance(o, int):
            return int.__repr__(o)
        if isinstance(o, float):
            return float.__repr__(o) if o - o == 0 else "null"  # NaN and infinities: null
        if isinstance(o, dict):
            return "{" + ",".join(quote(str(k)) + ":" + encode(v) for k, v in o.items()) + "}"
        if isinstance(o, (list, tuple)):
            return "[" + ",".join(encode(v) for v in o) + "]"
        return quote(str(o))

    class JsonContext:
        strict = True
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int
        parse_constant = float  # NaN, Infinity, -Infinity

    scan = _json.make_scanner(JsonContext())

    def decode(line):
        text = line.decode("utf-8").strip()
        try:
            value, end = scan(text, 0)
        except StopIteration as e:
            raise ValueError("expecting a value at character %d" % e.value) from None
        if end != len(text):
            raise ValueError("extra data at character %d" % end)
        return value

    # The command stream and the control pipe move to private close-on-exec fds, so neither the
    # code nor its subprocesses can read requests or write events; fd 0 becomes /dev/null so
    # input() and `cat` see EOF instead of the next request.
    try:
        control = os.dup(3)
    except OSError:
        sys.stderr.write("airlock session driver: fd 3 (the control pipe) is not open\n")
        sys.exit(2)
    os.close(3)
    commands = open(os.dup(0), "rb", buffering=65536)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)

    # Figures render off-screen; set before anything can import matplotlib.
    os.environ["MPLBACKEND"] = "Agg"

    driver_globals = globals()
    # The code's globals: a real __main__ module, so pickle and multiprocessing find the classes
    # and functions the code defines. The driver keeps its own namespace.
    main = type(sys)("__main__")
    main.__dict__["__builtins__"] = __builtins__
    sys.modules["_airlock_driver"] = sys.modules["__main__"]
    sys.modules["__main__"] = main
    user_globals = main.__dict__
    sys.argv = [""]

    state = {"running": False, "loop": None}

    # SIGINT interrupts a run (the supervisor's timeout) and is ignored between runs.
    def on_sigint(signum, frame):
        if state["running"]:
            raise KeyboardInterrupt

    _signal.signal(_signal.SIGINT, on_sigint)

    def emit(event):
        data = (encode(event) + "\n").encode("utf-8", "replace")  # lone surrogates: "?"
        while data:
            data = data[os.write(control, data):]

    def flush_output():
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass

    def strip_driver(exc, seen):
        # Removes the driver's frames (its run loop above the code, its SIGINT handler below it)
        # from each traceback in the chain; when the code ran, also what lies between the driver
        # and the code's first frame (asyncio running a top-level await).
        while exc is not None and id(exc) not in seen:
            seen.add(id(exc))
            frames = []
            tb = exc.__traceback__
            while tb is not None:
                frames.append(tb)
                tb = tb.tb_next
            kept = frames
            if frames and frames[0].tb_frame.f_globals is driver_globals:
                in_cells = [i for i, f in enumerate(frames)
                            if f.tb_frame.f_code.co_filename.startswith("<cell-")]
                if in_cells:
                    kept = frames[in_cells[0]:]
            kept = [f for f in kept if f.tb_frame.f_globals is not driver_globals]
            if len(kept) != len(frames):
                tb = None
                for f in reversed(kept):
                    tb = type(f)(tb, f.tb_frame, f.tb_lasti, f.tb_lineno)
                exc.__traceback__ = tb
            if exc.__cause__ is not None:
                strip_driver(exc.__cause__, seen)
            exc = exc.__context__

    cells = {}  # filename -> source, for tracebacks

    def error_event(rid, exc):
        import linecache
        import traceback

        # Registered so tracebacks show the cells' lines (mtime None: never invalidated).
        for filename in [f for f in linecache.cache if f.startswith("<cell-")]:
            if filename not in cells:
                del linecache.cache[filename]
        for filename, code in cells.items():
            linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)

        strip_driver(exc, set())
        try:
            text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        except Exception:
            text = type(exc).__name__ + "\n"
        try:
            value = str(exc)
        except Exception:
            value = "<exception str() failed>"
        return {
            "type": "error",
            "id": rid,
            "name": type(exc).__name__,
            "value": value,
            "traceback": text.rstrip("\n").split("\n"),
        }

    def b64(data):
        return binascii.b2a_base64(data, newline=False).decode("ascii")

    def mime_bundle(value):
        data = {"text/plain": repr(value)}
        reprs = (
            ("text/html", "_repr_html_"),
            ("text/markdown", "_repr_markdown_"),
            ("text/latex", "_repr_latex_"),
            ("image/svg+xml", "_repr_svg_"),
            ("image/png", "_repr_png_"),
            ("image/jpeg", "_repr_jpeg_"),
            ("application/json", "_repr_json_"),
        )
        for mime, method in reprs:
            # Looked up on the type: a class object or a module has no bound _repr_*_ to call.
            if getattr(type(value), method, None) is None:
                continue
            try:
                out = getattr(value, method)()
            except Exception:
                continue
            if isinstance(out, tuple):  # (data, metadata)
                out = out[0] if out else None
            if out is None:
                continue
            if isinstance(out, (bytes, bytearray)):
                out = b64(out)
            elif mime == "application/json":
                pass
            elif not isinstance(out, str):
                continue
            data[mime] = out
        return data

    def figures():
        # Only when the code imported pyplot: never import matplotlib on the driver's account.
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return []
        import io

        out = []
        try:
            for num in plt.get_fignums():
                fig = plt.figure(num)
                buf = io.BytesIO()
                fig.savefig(buf, format="png", bbox_inches="tight")
                out.append(
                    {
                        "image/png": b64(buf.getvalue()),
                        "text/plain": repr(fig),
                    }
                )
        except Exception as e:
            sys.stderr.write("airlock: cannot render a matplotlib figure: %r\n" % (e,))
        finally:
            try:
                plt.close("all")
            except Exception:
                pass
        return out

    def compile_cell(code, filename):
        import _ast

        cells[filename] = code
        if len(cells) > 1000:  # bounded: a context may run millions of cells
            del cells[next(iter(cells))]
        flags = _ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        tree = compile(code, filename, "exec", _ast.PyCF_ONLY_AST | flags, dont_inherit=True)
        last = None
        if tree.body and isinstance(tree.body[-1], _ast.Expr):
            last = _ast.Expression(tree.body.pop().value)
        body = compile(tree, filename, "exec", flags, dont_inherit=True)
        expr = compile(last, filename, "eval", flags, dont_inherit=True) if last else None
        return body, expr

    def evaluate(code_object):
        if code_object.co_flags & 0x80:  # inspect.CO_COROUTINE, without importing inspect
            # Top-level await: one event loop per context, kept between runs.
            import asyncio

            if state["loop"] is None:
                state["loop"] = asyncio.new_event_loop()
            return state["loop"].run_until_complete(eval(code_object, user_globals))
        return eval(code_object, user_globals)

    import site  # imported at start already (no -S), so free

    def pick_up_user_site():
        # `pip install` in a sandbox with packages installs with --user (PIP_USER). site puts the
        # user site directory on sys.path only when it exists at start, and the first install
        # creates it: without this, a package an earlier cell installed would not import.
        path = site.getusersitepackages() if site.ENABLE_USER_SITE else None
        if path and path not in sys.path and os.path.isdir(path):
            import importlib

            site.addsitedir(path)
            importlib.invalidate_caches()

    def run(rid, code, filename):
        events = []
        status = "ok"
        pick_up_user_site()
        try:
            body, expr = compile_cell(code, filename)
            state["running"] = True
            try:
                evaluate(body)
                value = evaluate(expr) if expr is not None else None
            finally:
                state["running"] = False
            if value is not None:
                events.append({"type": "result", "id": rid, "data": mime_bundle(value)})
        except KeyboardInterrupt as e:
            status = "interrupted"
            events.append(error_event(rid, e))
        except BaseException as e:  # SystemExit too: exit() must not end the context
            status = "error"
            events.append(error_event(rid, e))
        for data in figures():
            events.append({"type": "display", "id": rid, "data": data})
        return status, events

    def bad_request(rid, message):
        emit({"type": "error", "id": rid, "name": "RequestError", "value": message,
              "traceback": ["RequestError: " + message]})
        emit({"type": "done", "id": rid, "status": "error", "duration_ms": 0})

    emit({"type": "ready", "language": "python", "version": "%d.%d.%d" % sys.version_info[:3]})
    # Every run needs the AST types, whose first import costs as much as the rest of the start:
    # paid after ready, while the supervisor has not sent anything yet.
    import _ast  # noqa: F401

    runs = 0
    while True:
        line = commands.readline()
        if not line:
            return  # the supervisor closed the command stream
        if not line.strip():
            continue
        try:
            request = decode(line)
        except ValueError as e:
            bad_request(None, "request is not JSON: %s" % (e,))
            continue
        rid = request.get("id") if isinstance(request, dict) else None
        if not isinstance(rid, str):
            rid = None
        if not isinstance(request, dict):
            bad_request(None, "request is not a JSON object")
            continue
        if rid is None:
            bad_request(None, "request has no string 'id'")
            continue
        code = request.get("code")
        if not isinstance(code, str):
            bad_request(rid, "request '%s' has no string 'code'" % rid)
            continue
        runs += 1
        started = time.monotonic()
        try:
            status, events = run(rid, code, "<cell-%d>" % runs)
        except KeyboardInterrupt as e:  # SIGINT landed in the driver just after the code ended
            status, events = "interrupted", [error_event(rid, e)]
        flush_output()
        for event in events:
            emit(event)
        duration = round((time.monotonic() - started) * 1000, 3)
        emit({"type": "done", "id": rid, "status": status, "duration_ms": duration})


try:
    _airlock_session()
except BrokenPipeError:
    pass  # the control pipe is gone: the supervisor ended the context
