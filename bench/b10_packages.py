#!/usr/bin/env python3
"""B10: `pip install` of a 10 MB wheel inside a sandbox, through the package proxy, against the
same install without airlock, side by side in one run (docs/packages.md, docs/performance.md).

  bare      /usr/bin/python3 -m pip install --user bigpkg from a local index (http.server on
            loopback), into a fresh user base: what the sandbox would do without airlock
  airlock   `airlock run --lang shell -c "pip install bigpkg"`: a fresh sandbox with network
            "none", pip through the proxy, the proxy's cache already holding the wheel
  floor     `airlock run --lang shell -c true`: the sandbox's own cost, for the decomposition

Rounds are interleaved (bare, airlock, floor, bare, ...) so a noisy machine hits each alike.
Run as root from the repository after building:  sudo bench/b10_packages.py [--smoke]
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AIRLOCK = os.path.join(REPO, "build", "bin", "airlock")
PYTHON = "/usr/bin/python3"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(argv, env=None):
    start = time.monotonic()
    r = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elapsed = (time.monotonic() - start) * 1000
    if r.returncode != 0:
        sys.exit("b10: %s failed (%d):\n%s%s" % (" ".join(argv[:6]), r.returncode,
                                                 r.stdout.decode(), r.stderr.decode()))
    return elapsed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true", help="2 rounds (CI)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--mb", type=int, default=10, help="size of the wheel, MiB")
    args = ap.parse_args()
    rounds = 2 if args.smoke else args.rounds
    if os.geteuid() != 0:
        sys.exit("b10: run as root (airlock run makes sandboxes)")
    work = tempfile.mkdtemp(prefix="airlock-b10-")
    server = None
    try:
        port = free_port()
        index = os.path.join(work, "index")
        subprocess.run([PYTHON, os.path.join(REPO, "tests", "support", "package_index.py"), index,
                        "http://127.0.0.1:%d" % port, "--big-mb", str(args.mb)], check=True)
        server = subprocess.Popen([PYTHON, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                                   "--directory", index],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        policy = os.path.join(work, "p.toml")
        with open(policy, "w") as f:
            f.write('schema = 1\n[packages]\npypi_index = "http://127.0.0.1:%d/simple/"\n'
                    'cache_dir = "%s/cache"\n[profiles.default]\nlimits.workspace_mb = 512\n'
                    '[profiles.default.packages]\nallow = ["bigpkg"]\n' % (port, work))
        airlock_install = [AIRLOCK, "run", "--local", "--policy", policy, "--lang", "shell", "-c",
                           "pip install -q bigpkg"]
        floor = [AIRLOCK, "run", "--local", "--policy", policy, "--lang", "shell", "-c", "true"]
        timed(airlock_install)  # fills the proxy's cache: the rounds measure cached installs

        times = {"bare": [], "airlock": [], "floor": []}
        for i in range(rounds):
            base = os.path.join(work, "userbase-%d" % i)
            env = dict(os.environ, PYTHONUSERBASE=base, PIP_USER="1", PIP_NO_CACHE_DIR="1",
                       PIP_BREAK_SYSTEM_PACKAGES="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
                       PIP_ROOT_USER_ACTION="ignore",
                       PIP_INDEX_URL="http://127.0.0.1:%d/simple/" % port)
            times["bare"].append(timed([PYTHON, "-m", "pip", "install", "-q", "bigpkg"], env))
            shutil.rmtree(base, ignore_errors=True)
            times["airlock"].append(timed(airlock_install))
            times["floor"].append(timed(floor))

        med = {k: statistics.median(v) for k, v in times.items()}
        print("B10: pip install of a %d MiB wheel, median of %d interleaved rounds (ms)" %
              (args.mb, rounds))
        print("| | bare pip | airlock (cached proxy) | ratio | airlock - sandbox floor |")
        print("|---|---|---|---|---|")
        print("| pip install | %.1f | %.1f | %.2fx | %.1f (floor %.1f) |" %
              (med["bare"], med["airlock"], med["airlock"] / med["bare"],
               med["airlock"] - med["floor"], med["floor"]))
        print("target: airlock <= 1.2x bare")
    finally:
        if server is not None:
            server.kill()
            server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
