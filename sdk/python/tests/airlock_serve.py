"""A real `airlock serve` for the integration and example tests: a temp socket, state dir and
policy, started from AIRLOCK_BIN and stopped with SIGTERM (which destroys its sandboxes), plus
the host-wide counts the tests compare before and after (like tests/support/test_support.cc)."""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
from dataclasses import dataclass


def require_privileged() -> str:
    """The airlock binary, or SkipTest with the reason (a failure instead when
    AIRLOCK_TEST_REQUIRE_PRIVILEGED=1, as CI sets it)."""
    reason = None
    binary = os.environ.get("AIRLOCK_BIN", "")
    if os.geteuid() != 0:
        reason = "needs root: airlock serve creates namespaces, cgroups and mounts"
    elif not binary or not os.access(binary, os.X_OK):
        reason = f"AIRLOCK_BIN={binary!r} is not an executable airlock binary (ctest sets it)"
    if reason is None:
        return binary
    if os.environ.get("AIRLOCK_TEST_REQUIRE_PRIVILEGED") == "1":
        raise AssertionError(f"AIRLOCK_TEST_REQUIRE_PRIVILEGED=1 but cannot run: {reason}")
    raise unittest.SkipTest(reason)


@dataclass(frozen=True)
class HostResources:
    airlock_mounts: int
    airlock_cgroups: int
    sandbox_processes: int


def snapshot_host_resources() -> HostResources:
    with open("/proc/self/mountinfo") as f:
        mounts = sum(1 for line in f if "airlock" in line)
    cgroups = 0
    for controller in ("memory", "pids", "cpu", "unified"):
        base = os.path.join("/sys/fs/cgroup", controller, "airlock")
        if os.path.isdir(base):
            cgroups += sum(1 for e in os.scandir(base) if e.is_dir(follow_symlinks=False))
    processes = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            uid = entry.stat().st_uid
        except FileNotFoundError:
            continue
        if (1 << 28) <= uid < (1 << 32) - 1:  # sandbox uids (supervisor/sandbox/id_range.h)
            processes += 1
    return HostResources(mounts, cgroups, processes)


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Supervisor:
    """`airlock serve` on a private socket. `top` is TOML of top-level keys, `server` more keys
    of [server], `profiles` TOML tables appended to the policy."""

    def __init__(self, binary: str, profiles: str = "", server: str = "", top: str = "") -> None:
        self.dir = tempfile.mkdtemp(prefix="airlock-sdk-test-")
        self.socket_path = os.path.join(self.dir, "airlock.sock")
        self.url = f"unix://{self.socket_path}"
        self.policy = os.path.join(self.dir, "policy.toml")
        with open(self.policy, "w") as f:
            f.write(f'schema = 1\n{top}\n[server]\nsocket = "{self.socket_path}"\n'
                    f'state_dir = "{os.path.join(self.dir, "state")}"\n{server}\n{profiles}\n')
        self.log_path = os.path.join(self.dir, "serve.log")
        self._log = open(self.log_path, "w+b")
        self.proc = subprocess.Popen([binary, "serve", "--policy", self.policy],
                                     stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self._wait_healthy(timeout=60)
        except BaseException:
            self.stop()
            raise

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"airlock serve exited with {self.proc.returncode}:\n{self.log()}")
            if os.path.exists(self.socket_path):
                conn = http.client.HTTPConnection("localhost", timeout=5)
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.connect(self.socket_path)
                    conn.sock = sock
                    conn.request("GET", "/healthz")
                    if conn.getresponse().status == 200:
                        return
                except OSError:
                    pass
                finally:
                    conn.close()
            if time.monotonic() > deadline:
                raise RuntimeError(f"airlock serve did not become healthy in {timeout} s:\n"
                                   f"{self.log()}")
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM: the supervisor drains and destroys every sandbox, then exits."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def start_sdk_supervisor(binary: str, tenant: str, token: str) -> tuple[Supervisor, str]:
    """The supervisor the SDK's integration suites run against: a Unix socket and loopback TCP,
    one tenant whose bearer token is `token`, Python and shell, a pool of one. Returns it and its
    TCP URL."""
    port = free_tcp_port()
    supervisor = Supervisor(binary, server=f'tcp = "127.0.0.1:{port}"', profiles=f"""
[tenants.{tenant}]
max_sandboxes = 4
token_sha256 = "{hashlib.sha256(token.encode()).hexdigest()}"

[profiles.default]
languages = ["python", "shell"]

[profiles.default.env]
MPLBACKEND = "Agg"

[profiles.default.limits]
memory_mb = 1024
timeout_s = 120
pids = 256

[profiles.default.lifetime]
pool_size = 1
""")
    return supervisor, f"http://127.0.0.1:{port}"
