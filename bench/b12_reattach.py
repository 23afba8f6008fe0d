#!/usr/bin/env python3
"""B12: taking sessions over after `kill -9` of `airlock serve` (docs/api.md, "When the
supervisor dies"). Sandboxes hold live Python contexts, each with a variable; the supervisor is
killed and a new one started on the same state directory. Measured, side by side in the same
run:

  contexts      S sandboxes x C contexts each (100 in all by default): the new supervisor's
                start to /healthz (it adopts every sandbox first), its own per-sandbox time to
                take the executions over (the "ms" of its sandbox.adopt log lines), and the time
                until every context answered its variable back.
  empty         the same S sandboxes with no context: the adoption floor (reattach handshake,
                cgroup, audit and journal work) that taking contexts over adds to.

Each sandbox's adoption is also split in two (its sandbox.adopt log line): reaching its agent
again (reattach_ms: the backend's hand-over of a new channel, the Reattach handshake) and taking
its executions over (ms). --isolation runs it on gVisor or microVMs, whose hand-over is their own
(runsc exec; QEMU's monitor).

Run as root from the repository after building:  sudo bench/b12_reattach.py [--smoke]
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import service_bench  # noqa: E402  (its Client, pct and row)

AIRLOCK = os.path.join(REPO, "build", "bin", "airlock")


class Serve:
    """`airlock serve` on a state directory of its own, logging JSON lines."""

    def __init__(self, sandboxes, isolation):
        self.dir = tempfile.mkdtemp(prefix="airlock-b12-")
        self.sock = os.path.join(self.dir, "airlock.sock")
        self.policy = os.path.join(self.dir, "policy.toml")
        with open(self.policy, "w") as f:
            f.write(f"""schema = 1
[server]
socket = "{self.sock}"
state_dir = "{self.dir}/state"
max_sandboxes = {sandboxes + 2}
log_format = "json"
[tenants.default]
max_sandboxes = {sandboxes + 2}
max_memory_mb = {(sandboxes + 2) * 2048}
[profiles.default]
isolation = "{isolation}"
[profiles.default.limits]
memory_mb = 2048
""")
        self.log_path = os.path.join(self.dir, "serve.log")
        self.proc = None
        self.log_offset = 0

    def start(self):
        t0 = time.perf_counter()
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen([AIRLOCK, "serve", "--policy", self.policy],
                                     stdout=log, stderr=log)
        log.close()
        deadline = time.time() + 120
        while True:
            try:
                service_bench.Client(self.sock).call("GET", "/healthz")
                return (time.perf_counter() - t0) * 1000
            except (OSError, RuntimeError):
                if self.proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError("airlock serve did not start:\n" + open(self.log_path).read())
                time.sleep(0.005)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.log_offset = os.path.getsize(self.log_path)

    def adopt_ms(self, field="ms"):
        """A field of the sandbox.adopt lines logged since the kill."""
        out = []
        with open(self.log_path) as f:
            f.seek(self.log_offset)
            for line in f:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if e.get("event") == "sandbox.adopt":
                    out.append(float(e.get(field, 0)))
        return out

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()  # drains and destroys every sandbox
            self.proc.wait(timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)


def measure(sandboxes, contexts, isolation):
    serve = Serve(sandboxes, isolation)
    try:
        serve.start()
        c = service_bench.Client(serve.sock)
        names = []
        for i in range(sandboxes):
            sb = c.call("POST", "/v1/sandboxes", {"name": f"b12-{i}", "language": "python"})
            for j in range(contexts):
                ctx = c.call("POST", f"/v1/sandboxes/{sb['id']}/contexts", {"language": "python"})
                r = c.call("POST", f"/v1/sandboxes/{sb['id']}/code",
                           {"code": f"v = {i * 1000 + j}", "context_id": ctx["context_id"],
                            "stream": False})
                assert r["status"] == "ok", r
                names.append((sb["id"], ctx["context_id"], i * 1000 + j))
        serve.kill9()
        healthz_ms = serve.start()
        t0 = time.perf_counter()
        c = service_bench.Client(serve.sock)
        for sb, ctx, want in names:
            r = c.call("POST", f"/v1/sandboxes/{sb}/code",
                       {"code": "v", "context_id": ctx, "stream": False})
            got = r["results"][0]["text/plain"] if r.get("results") else r
            assert r["status"] == "ok" and got == str(want) and not r["context_restarted"], r
        answered_ms = (time.perf_counter() - t0) * 1000
        return healthz_ms, serve.adopt_ms(), serve.adopt_ms("reattach_ms"), answered_ms
    finally:
        serve.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="2 sandboxes x 2 contexts (CI)")
    ap.add_argument("--sandboxes", type=int, default=10)
    ap.add_argument("--contexts", type=int, default=10, help="per sandbox (at most 32)")
    ap.add_argument("--isolation", default="namespaces", choices=["namespaces", "gvisor", "microvm"])
    args = ap.parse_args()
    if args.smoke:
        args.sandboxes, args.contexts = 2, 2
    if os.geteuid() != 0:
        sys.exit("b12_reattach.py: needs root (airlock serve)")
    total = args.sandboxes * args.contexts
    print(f"B12 re-attach after kill -9 ({args.isolation}): {args.sandboxes} sandboxes, {total} "
          f"live contexts (machine: {os.uname().nodename}, {os.cpu_count()} CPUs)")
    healthz, adopt, reattach, answered = measure(args.sandboxes, args.contexts, args.isolation)
    e_healthz, e_adopt, e_reattach, _ = measure(args.sandboxes, 0, args.isolation)
    print()
    service_bench.row("", "contexts", "empty", "ratio")
    service_bench.row("start to /healthz, ms", healthz, e_healthz, healthz / max(e_healthz, 1e-9))
    per_sb = sum(adopt) / max(len(adopt), 1)
    e_per_sb = sum(e_adopt) / max(len(e_adopt), 1)
    service_bench.row("take-over per sandbox, ms (mean)", per_sb, e_per_sb, "")
    service_bench.row("take-over per sandbox, ms (max)", max(adopt or [0.0]),
                      max(e_adopt or [0.0]), "")
    service_bench.row("take-over per context, ms", sum(adopt) / max(total, 1), "", "")
    mean = lambda v: sum(v) / max(len(v), 1)  # noqa: E731
    service_bench.row("reaching the agent per sandbox, ms (mean)", mean(reattach), mean(e_reattach),
                      "")
    service_bench.row("reaching the agent per sandbox, ms (max)", max(reattach or [0.0]),
                      max(e_reattach or [0.0]), "")
    service_bench.row(f"all {total} contexts answered, ms", answered, "", "")
    service_bench.row("  per context, ms", answered / max(total, 1), "", "")


if __name__ == "__main__":
    main()
