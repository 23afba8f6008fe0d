#!/usr/bin/env python3
"""B11: code contexts (docs/contexts.md). Python contexts run on IPython since B11; this measures
what that costs against the driver before it, and the bash contexts.

  driver        the session drivers as host processes, wired as the agent wires them (requests on
                stdin, events on fd 3): start to "ready", and the first run after ready (which
                waits for what the driver loads after saying ready: IPython). The previous,
                hand-written Python driver is read from git history (the commit before IPython,
                PREVIOUS_DRIVER below), so it is measured on the same machine in the same run.
  api           through `airlock serve`: POST /contexts until it answers (the driver is ready),
                the first run in the new context, and `x += 1` (bash: `x=$((x+1))`) round trips
                on one keep-alive connection (target: p50 <= 0.5 ms for Python).

Rounds are interleaved (new driver, old driver, ...) so a noisy machine hits each alike.
Run as root from the repository after building:  sudo bench/b11_contexts.py [--smoke]
"""

import argparse
import fcntl
import json
import os
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import service_bench  # noqa: E402  (its Supervisor, RawHttp, pct and row)

AIRLOCK = os.path.join(REPO, "build", "bin", "airlock")
PYTHON = "/usr/bin/python3"
BASH = "/usr/bin/bash"
# The last commit whose Python session driver was the hand-written REPL.
PREVIOUS_DRIVER = "76bec7f"
DRIVER_PATH = "plugins/language/python/session_driver.py"


class Driver:
    """A session driver as a host process: stdin requests, events on fd 3."""

    def __init__(self, argv):
        r, w = os.pipe()
        r = fcntl.fcntl(r, fcntl.F_DUPFD_CLOEXEC, 20)
        os.dup2(w, 3)
        os.close(w)
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, pass_fds=(3,),
                                     env={"PATH": "/usr/bin:/bin", "HOME": "/tmp",
                                          "LANG": "C.UTF-8", "MPLBACKEND": "Agg",
                                          "PYTHONUNBUFFERED": "1",
                                          "PYTHONDONTWRITEBYTECODE": "1"})
        os.close(3)
        self.events = os.fdopen(r, "rb")
        ready = json.loads(self.events.readline())
        assert ready["type"] == "ready", ready
        self.ready_ms = (time.perf_counter() - self.started) * 1000

    def run(self, code):
        t = time.perf_counter()
        self.proc.stdin.write((json.dumps({"id": "b", "code": code}) + "\n").encode())
        self.proc.stdin.flush()
        while True:
            e = json.loads(self.events.readline())
            if e["type"] == "done":
                assert e["status"] == "ok", e
                return (time.perf_counter() - t) * 1000

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()
        self.events.close()


def driver_rows(rounds):
    new = open(os.path.join(REPO, DRIVER_PATH)).read()
    try:
        old = subprocess.run(["git", "-C", REPO, "show", PREVIOUS_DRIVER + ":" + DRIVER_PATH],
                             check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        old = None  # not a git checkout: the comparison row is left out
    bash = open(os.path.join(REPO, "plugins/language/shell/session_driver.sh")).read()
    kinds = {"python, IPython driver": [PYTHON, "-u", "-c", new],
             "bash driver": [BASH, "--noprofile", "--norc", "-c", bash]}
    if old is not None:
        kinds["python, previous driver (" + PREVIOUS_DRIVER + ")"] = [PYTHON, "-u", "-c", old]
    ready = {k: [] for k in kinds}
    first = {k: [] for k in kinds}
    for _ in range(rounds):
        for kind, argv in kinds.items():
            d = Driver(argv)
            ready[kind].append(d.ready_ms)
            first[kind].append(d.run("x = 1" if "python" in kind else "x=1"))
            d.close()
    print("\nB11 drivers as host processes, %d interleaved rounds (ms)" % rounds)
    service_bench.row("driver", "ready p50", "ready p90", "1st run p50", "ready+1st p50",
                      widths=(40, 12, 12, 12, 14))
    for kind in kinds:
        total = [a + b for a, b in zip(ready[kind], first[kind])]
        service_bench.row(kind, service_bench.pct(ready[kind], 50),
                          service_bench.pct(ready[kind], 90), service_bench.pct(first[kind], 50),
                          service_bench.pct(total, 50), widths=(40, 12, 12, 12, 14))


def api_rows(rounds, calls):
    sup = service_bench.Supervisor(AIRLOCK, pool_size=1, max_sandboxes=4)
    try:
        c = sup.client()
        sb = c.call("POST", "/v1/sandboxes", {"language": "python"})["id"]
        print("\nB11 through the API (airlock serve), %d contexts each, %d round trips (ms)" %
              (rounds, calls))
        service_bench.row("context", "create p50", "create p90", "1st run p50", "ready+1st p50",
                          widths=(40, 12, 12, 12, 14))
        for language, code in (("python", "x = 1"), ("bash", "x=1")):
            create, first = [], []
            for _ in range(rounds):
                t = time.perf_counter()
                ctx = c.call("POST", f"/v1/sandboxes/{sb}/contexts", {"language": language})
                create.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                r = c.call("POST", f"/v1/sandboxes/{sb}/code",
                           {"code": code, "context_id": ctx["context_id"], "stream": False})
                first.append((time.perf_counter() - t) * 1000)
                assert r["status"] == "ok", r
                c.call("DELETE", f"/v1/sandboxes/{sb}/contexts/{ctx['context_id']}", raw=True)
            total = [a + b for a, b in zip(create, first)]
            service_bench.row(language, service_bench.pct(create, 50),
                              service_bench.pct(create, 90), service_bench.pct(first, 50),
                              service_bench.pct(total, 50), widths=(40, 12, 12, 12, 14))

        service_bench.row("round trip", "p50", "p90", "p99", "", widths=(40, 12, 12, 12, 14))
        raw = service_bench.RawHttp(sup.sock)
        for language, init, step in (("python x += 1", "x = 0", "x += 1"),
                                     ("bash x=$((x+1))", "x=0", "x=$((x+1))")):
            lang = "python" if language.startswith("python") else "bash"
            ctx = c.call("POST", f"/v1/sandboxes/{sb}/contexts", {"language": lang})["context_id"]
            c.call("POST", f"/v1/sandboxes/{sb}/code",
                   {"code": init, "context_id": ctx, "stream": False})
            req = raw.request("POST", f"/v1/sandboxes/{sb}/code",
                              {"code": step, "context_id": ctx, "stream": False})
            times = []
            for _ in range(calls):
                t = time.perf_counter()
                r = raw.call(req)
                times.append((time.perf_counter() - t) * 1000)
                assert r["status"] == "ok", r
            service_bench.row(language, service_bench.pct(times, 50), service_bench.pct(times, 90),
                              service_bench.pct(times, 99), "", widths=(40, 12, 12, 12, 14))
        raw.close()
        c.call("DELETE", f"/v1/sandboxes/{sb}", raw=True)
    finally:
        sup.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true", help="few rounds (CI)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=1000)
    args = ap.parse_args()
    rounds, calls = (2, 50) if args.smoke else (args.rounds, args.calls)
    driver_rows(rounds)
    if os.geteuid() != 0:
        sys.exit("b11: the API rows need root (airlock serve makes sandboxes)")
    api_rows(rounds, calls)


if __name__ == "__main__":
    main()
