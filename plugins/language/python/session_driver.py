# airlock Python session driver: one long-lived IPython shell per code context.
#
# Requests arrive on stdin, one JSON object per line: {"id": "r1", "code": "...", "env": {...}}.
# Events go to the control pipe (fd 3 at start), one JSON object per line: "ready" once, then per
# request any number of "result", "display" and "error" events and exactly one "done" (with the
# cell's execution_count). The code's own output goes to fds 1 and 2. Embedded into the python
# language plugin and run as `python3 -u -c`; the plugin checks at build time that it fits in one
# argv string.
#
# The cells run in IPython's InteractiveShell (Jupyter's semantics: display(), rich formatters,
# `!cmd`, %magics, In/Out, execution_count), with its display hook and publisher replaced by ones
# that turn results and displays into events, and its traceback printer by one that makes an
# error event. Importing IPython costs ~300 ms: "ready" goes out first, from a bare interpreter
# (only C modules), and the import follows while the supervisor has nothing to send yet.
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
        if hasattr(o, "item"):  # numpy scalars
            try:
                return encode(o.item())
            except Exception:
                pass
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

    # The code's globals: a real __main__ module, so pickle and multiprocessing find the classes
    # and functions the code defines. The driver keeps its own namespace.
    main = type(sys)("__main__")
    main.__dict__["__builtins__"] = __builtins__
    sys.modules["_airlock_driver"] = sys.modules["__main__"]
    sys.modules["__main__"] = main
    sys.argv = [""]

    state = {"running": False, "in_cell": False, "pending": False, "events": None, "rid": None}

    # SIGINT interrupts a run (the supervisor's timeout) and is ignored between runs. Landing in
    # IPython's bookkeeping between two statements of a cell, it is kept for the next statement.
    def on_sigint(signum, frame):
        if state["running"]:
            raise KeyboardInterrupt
        if state["in_cell"]:
            state["pending"] = True

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

    def b64(data):
        return binascii.b2a_base64(data, newline=False).decode("ascii")

    emit({"type": "ready", "language": "python", "version": "%d.%d.%d" % sys.version_info[:3]})

    # --- the shell -------------------------------------------------------------------------------

    import atexit
    import importlib.util
    import shutil
    import tempfile

    # IPython's package __init__ imports its terminal front end (prompt_toolkit): two thirds of
    # its import time, for nothing a context uses. The package goes in as a stub holding what
    # IPython's core takes from it (get_ipython); the first other attribute asked for (a cell's
    # `IPython.__version__`, `from IPython import embed`) runs the real __init__ into it. jedi
    # (completions) is kept out until the shell exists.
    spec = importlib.util.find_spec("IPython")
    if spec is None:
        # An interpreter without IPython (a plugin config naming another python): every run
        # says so, rather than the context dying with no word.
        message = ("IPython is not installed for %s: Python contexts run on it (Debian: "
                   "python3-ipython)" % sys.executable)
        for line in commands:
            if not line.strip():
                continue
            try:
                request = decode(line)
            except ValueError:
                request = None
            rid = request.get("id") if isinstance(request, dict) else None
            rid = rid if isinstance(rid, str) else None
            emit({"type": "error", "id": rid, "name": "ModuleNotFoundError", "value": message,
                  "traceback": ["ModuleNotFoundError: " + message]})
            emit({"type": "done", "id": rid, "status": "error", "duration_ms": 0})
        return
    package = importlib.util.module_from_spec(spec)

    def complete_package(name):
        del package.__dict__["__getattr__"]
        spec.loader.exec_module(package)
        return getattr(package, name)

    package.__getattr__ = complete_package
    sys.modules["IPython"] = package
    jedi = sys.modules.get("jedi", False)
    sys.modules["jedi"] = None
    from IPython.core.getipython import get_ipython

    package.get_ipython = get_ipython

    from IPython.core.displayhook import DisplayHook
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.history import HistoryManager
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    def bundle(format_dict):
        # IPython's formatters give bytes for binary formats (PNG, JPEG, PDF): base64, as Jupyter
        # sends them. JSON-like values (application/json, the chart) stay objects.
        data = {}
        for mime, value in format_dict.items():
            if isinstance(value, (bytes, bytearray)):
                value = b64(value)
            data[mime] = value
        return data

    def record(event):
        if state["events"] is not None:
            event["id"] = state["rid"]
            state["events"].append(event)

    class EventDisplayHook(DisplayHook):
        # A cell's last value: a "result" event; nothing printed. Out, _, __ as in IPython.
        def write_output_prompt(self):
            pass

        def write_format_data(self, format_dict, md_dict=None):
            record({"type": "result", "data": bundle(format_dict)})

        def log_output(self, format_dict):
            pass  # IPython keeps every output's repr for its history: not needed here

        def finish_displayhook(self):
            pass

    class EventDisplayPublisher(DisplayPublisher):
        # display(...): a "display" event.
        def publish(self, data, metadata=None, source=None, *, transient=None, update=False,
                    **kwargs):
            record({"type": "display", "data": bundle(data)})

        def clear_output(self, wait=False):
            pass

    driver_globals = globals()

    def without_driver_frames(tb):
        # The SIGINT handler's frame (it raises the KeyboardInterrupt) is the driver's, not the
        # code's: tracebacks leave it out.
        frames = []
        while tb is not None:
            frames.append(tb)
            tb = tb.tb_next
        kept = [f for f in frames if f.tb_frame.f_globals is not driver_globals]
        if len(kept) == len(frames):
            return frames[0] if frames else None
        tb = None
        for f in reversed(kept):
            tb = type(f)(tb, f.tb_frame, f.tb_lasti, f.tb_lineno)
        return tb

    class MemoryHistory(HistoryManager):
        # IPython's input history (In, _i, _ii, _iii, _iN) without its database: the sqlite
        # file is off, so its write queue would only grow; and the _i* traits have no observers,
        # so they are set without traitlets' validation and notification (a sixth of a cell).
        def store_inputs(self, line_num, source, source_raw=None):
            if source_raw is None:
                source_raw = source
            source = source.rstrip("\n")
            source_raw = source_raw.rstrip("\n")
            if self._exit_re.match(source_raw.strip()):
                return
            self.input_hist_parsed.append(source)
            self.input_hist_raw.append(source_raw)
            values = self._trait_values
            previous = self._i00, self._i, self._ii  # read through the traits: their defaults
            values["_i"], values["_ii"], values["_iii"] = previous
            values["_i00"] = source_raw
            names = {"_i": previous[0], "_ii": previous[1], "_iii": previous[2],
                     "_i%s" % line_num: source_raw}
            self.shell.user_ns.update(names)
            self.shell.user_ns_hidden.update(names)

    import re

    transformed = {}  # raw cell -> IPython's transformation of it, where that cannot change
    first_word = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)?")

    class Shell(InteractiveShell):
        displayhook_class = EventDisplayHook
        display_pub_class = EventDisplayPublisher
        # Plain attributes instead of traits: nothing here observes them, and traitlets' checks
        # and notifications on each set were a fifth of a cell.
        execution_count = 1
        last_execution_succeeded = True
        last_execution_result = None

        # An agent re-running the same small cell (`x += 1`) pays IPython's input transformation
        # (tokenizing, prefiltering: a third of a cell's cost) once. Its static part is a pure
        # function of the text; the dynamic part (the prefilter, for one-line cells) depends on
        # the namespace only through automagic and autocall, so a one-line cell whose first
        # word could be a magic, or that starts with an escape (! % ? , ; /), is never cached.
        def transform_cell(self, raw_cell):
            cell = transformed.get(raw_cell)
            if cell is not None:
                return cell
            cell = InteractiveShell.transform_cell(self, raw_cell)
            if self.autocall == 0 and len(raw_cell) < 4096:
                word = first_word.match(raw_cell).group(1)
                lead = raw_cell.lstrip()[:1]
                if "\n" in cell.rstrip("\n") or (
                        lead not in "!%?,;/" and
                        (word is None or word not in self.magics_manager.magics["line"])):
                    if len(transformed) >= 1000:
                        transformed.clear()
                    transformed[raw_cell] = cell
            return cell

        def should_run_async(self, raw_cell, *, transformed_cell=None,
                             preprocessing_exc_tuple=None):
            # IPython compiles every cell once more to see whether it awaits at top level; one
            # that says neither `await` nor `async` cannot.
            cell = raw_cell if transformed_cell is None else transformed_cell
            if "await" not in cell and "async" not in cell:
                return False
            return InteractiveShell.should_run_async(
                self, raw_cell, transformed_cell=transformed_cell,
                preprocessing_exc_tuple=preprocessing_exc_tuple)

        def init_history(self):
            self.history_manager = MemoryHistory(shell=self, parent=self)
            self.configurables.append(self.history_manager)

        def _get_exc_info(self, exc_tuple=None):
            etype, value, tb = InteractiveShell._get_exc_info(self, exc_tuple)
            tb = without_driver_frames(tb)
            if isinstance(value, BaseException):
                value.__traceback__ = tb
            return etype, value, tb

        def _showtraceback(self, etype, evalue, stb):
            try:
                value = str(evalue)
            except Exception:
                value = "<exception str() failed>"
            lines = "\n".join(stb).rstrip("\n").split("\n")
            record({"type": "error", "name": getattr(etype, "__name__", str(etype)),
                    "value": value, "traceback": lines})

        # SIGINT may interrupt only the code: landing in IPython's own bookkeeping it could leave
        # the shell half-updated.
        async def run_code(self, code_obj, result=None, *, async_=False):
            if state["pending"]:  # interrupted before this statement: it does not run
                state["pending"] = False
                try:
                    raise KeyboardInterrupt
                except KeyboardInterrupt as e:
                    if result is not None:
                        result.error_in_exec = e
                    self.showtraceback()
                return True  # the cell's remaining statements do not run either
            state["running"] = True
            try:
                return await InteractiveShell.run_code(self, code_obj, result, async_=async_)
            finally:
                state["running"] = False

    # IPython's profile directory (startup files, its sqlite history, security files) goes to a
    # private temporary directory rather than ~/.ipython; history stays in memory.
    try:
        ipython_dir = tempfile.mkdtemp(prefix="airlock-ipython-")
        atexit.register(shutil.rmtree, ipython_dir, True)
    except OSError:
        ipython_dir = None  # no writable temporary directory: IPython's own default
    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "NoColor"
    config.InteractiveShell.autoindent = False
    config.Completer.use_jedi = False
    shell = Shell.instance(config=config, ipython_dir=ipython_dir, user_module=main)
    if jedi is False:
        del sys.modules["jedi"]
    else:
        sys.modules["jedi"] = jedi

    def run_system(cmd):
        # `!cmd`: the command's output goes straight to the run's stdout and stderr (no pty).
        flush_output()
        return shell.system_raw(cmd)

    shell.system = run_system

    def exit_run(code=None):
        raise SystemExit(code)

    # exit() and quit() end the run, not the context (IPython's would ask the shell to stop).
    import warnings

    # IPython warns after a SystemExit that its shell stays; so does a context: no news.
    warnings.filterwarnings("ignore", message="To exit: use 'exit'")
    for name in ("exit", "quit"):
        shell.builtin_trap.auto_builtins[name] = exit_run
        shell.user_ns[name] = exit_run
    # IPython swaps its builtins (get_ipython, exit) and sys.displayhook in and out around every
    # cell, so that other code between cells sees the originals. Nothing runs between cells
    # here: they stay in for the context's life.
    shell.builtin_trap.__enter__()
    shell.display_trap.__enter__()

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

    # --- matplotlib figures ----------------------------------------------------------------------

    def chart_of(fig):
        # The figure's data in E2B's chart shape, best effort: "unknown" rather than an error.
        try:
            import _airlock_charts
        except ImportError:
            charts = type(sys)("_airlock_charts")
            exec(CHARTS, charts.__dict__)
            sys.modules["_airlock_charts"] = charts
            _airlock_charts = charts
        try:
            return _airlock_charts.chart(fig)
        except Exception as e:
            return {"type": "unknown", "title": None, "elements": [], "error": repr(e)}

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
                fig.savefig(buf, format="png", bbox_inches="tight")  # also lays out tick labels
                out.append(
                    {
                        "image/png": b64(buf.getvalue()),
                        "text/plain": repr(fig),
                        "application/vnd.airlock.chart+json": chart_of(fig),
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

    # --- runs ------------------------------------------------------------------------------------

    def set_env(env):
        # The run's own environment variables; what they replaced comes back after the run.
        saved = {}
        for key, value in env.items():
            saved[key] = os.environ.get(key)
            os.environ[key] = value
        return saved

    def restore_env(saved):
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    def run(rid, code, env):
        events = []
        state["events"], state["rid"] = events, rid
        status = "ok"
        count = shell.execution_count
        pick_up_user_site()
        saved = set_env(env)
        state["in_cell"], state["pending"] = True, False
        try:
            result = shell.run_cell(code, store_history=True)
            count = result.execution_count if result.execution_count is not None else count
            failure = result.error_in_exec or result.error_before_exec
            if isinstance(failure, KeyboardInterrupt):
                status = "interrupted"
            elif failure is not None:
                status = "error"
        except KeyboardInterrupt:  # landed in IPython just before or after the code
            status = "interrupted"
            if not any(e["type"] == "error" for e in events):
                record({"type": "error", "name": "KeyboardInterrupt", "value": "",
                        "traceback": ["KeyboardInterrupt"]})
        finally:
            state["in_cell"] = state["pending"] = False
            restore_env(saved)
        for data in figures():
            events.append({"type": "display", "id": rid, "data": data})
        state["events"] = None
        return status, events, count

    def bad_request(rid, message):
        emit({"type": "error", "id": rid, "name": "RequestError", "value": message,
              "traceback": ["RequestError: " + message]})
        emit({"type": "done", "id": rid, "status": "error", "duration_ms": 0})

    def string_map(value):
        return isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) and "\0" not in k + v and "=" not in k and k
            for k, v in value.items())

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
        env = request.get("env") or {}
        if not string_map(env):
            bad_request(rid, "request '%s': 'env' must map variable names (non-empty, no '=' "
                             "or NUL) to strings" % rid)
            continue
        started = time.monotonic()
        try:
            status, events, count = run(rid, code, env)
        except KeyboardInterrupt:  # SIGINT landed in the driver just after the code ended
            status, count = "interrupted", shell.execution_count - 1
            events = [{"type": "error", "id": rid, "name": "KeyboardInterrupt", "value": "",
                       "traceback": ["KeyboardInterrupt"]}]
        flush_output()
        for event in events:
            emit(event)
        duration = round((time.monotonic() - started) * 1000, 3)
        emit({"type": "done", "id": rid, "status": status, "duration_ms": duration,
              "execution_count": count})


CHARTS = r'''
# Chart data from a matplotlib figure, in E2B's chart shape. Compiled on the first figure only.
import re

import numpy as np
from matplotlib.collections import PathCollection
from matplotlib.container import BarContainer
from matplotlib.lines import Line2D
from matplotlib.patches import PathPatch, Wedge


def number(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return int(f) if f.is_integer() and abs(f) < 2 ** 53 else f


def coordinate(v):
    # Dates and categories stay text; numbers become JSON numbers.
    if isinstance(v, (np.datetime64,)) or hasattr(v, "isoformat"):
        return str(np.datetime64(v)) if isinstance(v, np.datetime64) else v.isoformat()
    return number(v)


def visible_label(artist):
    label = artist.get_label()
    return None if not label or label.startswith("_") else label


def unit_of(label):
    # "Time (s)" or "Time [s]": the unit E2B reports beside the label.
    m = re.search(r"[(\[]([^()\[\]]+)[)\]]\s*$", label or "")
    return m.group(1) if m else None


def axis_fields(ax):
    fields = {}
    for axis, name in ((ax.xaxis, "x"), (ax.yaxis, "y")):
        label = axis.get_label().get_text()
        fields[name + "_label"] = label or None
        fields[name + "_unit"] = unit_of(label)
        fields[name + "_ticks"] = [number(t) for t in axis.get_ticklocs()]
        fields[name + "_tick_labels"] = [t.get_text() for t in axis.get_ticklabels()]
        fields[name + "_scale"] = axis.get_scale()
    return fields


def tick_label_at(axis, position):
    for loc, text in zip(axis.get_ticklocs(), axis.get_ticklabels()):
        if abs(loc - position) < 1e-9:
            return text.get_text()
    return str(number(position))


def rectangle(xs, ys):
    # A closed axis-aligned rectangle drawn as 5 points (a boxplot's box): (l, r, lo, hi).
    if len(xs) != 5 or xs[0] != xs[4] or ys[0] != ys[4]:
        return None
    if len(set(xs[:4])) != 2 or len(set(ys[:4])) != 2:
        return None
    return min(xs), max(xs), min(ys), max(ys)


def box_plot(ax):
    boxes = []
    for line in ax.get_lines():
        r = rectangle(list(line.get_xdata()), list(line.get_ydata()))
        if r:
            boxes.append(r)
    for patch in ax.patches:  # patch_artist=True
        if isinstance(patch, PathPatch):
            v = patch.get_path().vertices
            r = rectangle(list(v[:5, 0]), list(v[:5, 1])) if len(v) >= 5 else None
            if r:
                boxes.append(r)
    if not boxes:
        return None
    elements = []
    for left, right, q1, q3 in boxes:
        center = (left + right) / 2
        median, low, high, outliers = None, q1, q3, []
        for line in ax.get_lines():
            xs, ys = list(line.get_xdata()), list(line.get_ydata())
            if not xs:
                continue
            if line.get_linestyle() in ("None", "none", "") and line.get_marker() not in (None, "None", ""):
                if all(abs(x - center) < (right - left) for x in xs):
                    outliers = [number(y) for y in ys]
                continue
            if len(xs) == 2 and ys[0] == ys[1] and left <= min(xs) and max(xs) <= right and q1 <= ys[0] <= q3 and xs[0] != xs[1] and min(xs) == left and max(xs) == right:
                median = ys[0]
            elif len(xs) == 2 and xs[0] == xs[1] == center and ys[0] != ys[1]:
                low, high = min(low, *ys), max(high, *ys)
        elements.append({
            "label": tick_label_at(ax.xaxis, center),
            "min": number(low), "first_quartile": number(q1),
            "median": number(median if median is not None else (q1 + q3) / 2),
            "third_quartile": number(q3), "max": number(high), "outliers": outliers,
        })
    return elements


def axes_chart(ax):
    title = ax.get_title() or None
    wedges = [p for p in ax.patches if isinstance(p, Wedge)]
    if wedges and len(wedges) == len(ax.patches):
        return {"type": "pie", "title": title, "elements": [
            {"label": w.get_label(), "angle": number(w.theta2 - w.theta1), "radius": number(w.r)}
            for w in wedges]}
    chart = {"title": title}
    chart.update(axis_fields(ax))
    boxes = box_plot(ax)
    if boxes:
        chart.update(type="box_and_whisker", elements=boxes)
        return chart
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    if bars:
        elements = []
        for container in bars:
            group = visible_label(container) or ""
            horizontal = getattr(container, "orientation", "vertical") == "horizontal"
            for rect in container.patches:
                if horizontal:
                    position, value = rect.get_y() + rect.get_height() / 2, rect.get_width()
                    label = tick_label_at(ax.yaxis, position)
                else:
                    position, value = rect.get_x() + rect.get_width() / 2, rect.get_height()
                    label = tick_label_at(ax.xaxis, position)
                elements.append({"label": label, "group": group, "value": number(value)})
        chart.update(type="bar", elements=elements)
        return chart
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    lines = [l for l in ax.get_lines() if l.get_linestyle() not in ("None", "none", "")]
    if lines:
        chart.update(type="line", elements=[
            {"label": l.get_label(), "points": [[coordinate(x), coordinate(y)]
                                                for x, y in zip(l.get_xdata(), l.get_ydata())]}
            for l in lines])
        return chart
    if scatters:
        chart.update(type="scatter", elements=[
            {"label": c.get_label(), "points": [[number(x), number(y)]
                                                for x, y in c.get_offsets()]}
            for c in scatters])
        return chart
    chart.update(type="unknown", elements=[])
    return chart


def chart(fig):
    axes = [ax for ax in fig.get_axes() if ax.get_visible()]
    suptitle = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else None
    if len(axes) == 1:
        c = axes_chart(axes[0])
        if c["title"] is None and suptitle:
            c["title"] = suptitle
        return c
    if not axes:
        return {"type": "unknown", "title": suptitle, "elements": []}
    return {"type": "superchart", "title": suptitle, "elements": [axes_chart(ax) for ax in axes]}
'''

try:
    _airlock_session()
except BrokenPipeError:
    pass  # the control pipe is gone: the supervisor ended the context
