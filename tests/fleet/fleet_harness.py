"""A simulated fleet on one host: N `airlock serve` nodes, each in its own network namespace with
its own address, state directories and policy, and the real HAProxy in front, configured by
`airlock fleet haproxy` (docs/deploy.md). Used by tests/fleet/test_fleet.py and
bench/b13_fleet.py.

The network is made here and only here: one namespace for the proxy holding a bridge, one a node,
joined by veth pairs (10.213.0.0/24). The proxy's only listener reachable from the host is a Unix
socket in the fleet's temporary directory; nothing touches the host's own network. Nodes speak
TLS (their policy's server.tcp is not loopback) and ask for the proxy's client certificate; the
CA and certificates are made with openssl for the run. Everything is undone by close(): processes
ended by pid, namespaces deleted, files removed.
"""

import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

SUBNET = "10.213.0"
API_PORT = 8443
AGENT_PORT = 8444


def run(*argv, check=True, **kw):
    return subprocess.run(argv, check=check, capture_output=True, text=True, **kw)


def end(proc, timeout):
    """SIGTERM, then SIGKILL if it has not exited within `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=120):
        super().__init__("fleet", timeout=timeout)
        self._path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


class Answer:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def node(self):
        return self.headers.get("x-airlock-node")

    def json(self):
        return json.loads(self.body)

    def events(self):
        return [json.loads(line) for line in self.body.splitlines() if line.strip()]


class Client:
    """HTTP on one Unix socket (the proxy's or a node's), keeping its connection."""

    def __init__(self, path, token):
        self.path = path
        self.token = token
        self.conn = None

    def request(self, method, url, body=None, headers=None, timeout=120):
        h = {"Authorization": "Bearer " + self.token}
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = UnixHTTPConnection(self.path, timeout)
            try:
                self.conn.request(method, url, body=body, headers=h)
                r = self.conn.getresponse()
                data = r.read().decode("utf-8", "replace")
                answer = Answer(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
                if r.getheader("connection", "").lower() == "close":
                    self.close()
                return answer
            except (ConnectionError, http.client.RemoteDisconnected, BrokenPipeError):
                # A kept-alive connection the other end closed meanwhile: once more, anew.
                self.close()
                if attempt:
                    raise

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def __del__(self):
        self.close()


def token_hash(token):
    return hashlib.sha256(token.encode()).hexdigest()


class Node:
    def __init__(self, fleet, index, max_sandboxes):
        self.fleet = fleet
        self.name = f"n{index}"
        self.netns = f"{fleet.prefix}-{self.name}"
        self.address = f"{SUBNET}.{10 + index}"
        self.dir = os.path.join(fleet.dir, self.name)
        self.socket = os.path.join(self.dir, "api.sock")
        self.policy = os.path.join(self.dir, "policy.toml")
        self.max_sandboxes = max_sandboxes
        self.proc = None
        self.log = None

    def write_policy(self):
        f = self.fleet
        tenants = "".join(
            f'[tenants.{name}]\ntoken_sha256 = "{token_hash(tok)}"\nmax_sandboxes = 1000\n'
            f"max_memory_mb = 1000000\n"
            for name, tok in f.tokens.items()
        )
        # Each node its own state: the API socket, journal and workspaces (server.state_dir),
        # runtime state (--state-dir). The default profile is small, so capacity is the node's
        # max_sandboxes rather than the host's memory, which every simulated node shares.
        with open(self.policy, "w") as out:
            out.write(
                f"""schema = 1
[server]
socket = "{self.socket}"
tcp = "{self.address}:{API_PORT}"
tls_cert = "{f.dir}/node.crt"
tls_key = "{f.dir}/node.key"
tls_client_ca = "{f.dir}/ca.crt"
node = "{self.name}"
agent_check = "{self.address}:{AGENT_PORT}"
state_dir = "{self.dir}/state"
max_sandboxes = {self.max_sandboxes}
max_requests_per_client = 1024
reattach_grace_s = 60

[profiles.default]
languages = ["python", "shell"]
[profiles.default.limits]
memory_mb = 256
workspace_mb = 64
tmp_mb = 32

{tenants}"""
            )

    def start(self):
        os.makedirs(os.path.join(self.dir, "state"), exist_ok=True)
        self.log = open(os.path.join(self.dir, "serve.log"), "ab")
        # nsenter, not `ip netns exec`: that one remounts /sys, hiding the cgroup and bpf
        # filesystems beneath it from the supervisor.
        self.proc = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{self.netns}", self.fleet.airlock, "serve",
             "--policy", self.policy, "--state-dir", os.path.join(self.dir, "run")],
            stdout=self.log, stderr=self.log, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"node {self.name} exited {self.proc.returncode}: "
                                   + self.log_text()[-2000:])
            if os.path.exists(self.socket):
                try:
                    probe = Client(self.socket, self.fleet.tokens["alpha"])
                    a = probe.request("GET", "/healthz")
                    probe.close()
                    if a.status == 200:
                        return
                except OSError:
                    pass
            time.sleep(0.05)
        raise RuntimeError(f"node {self.name} did not answer within 60 s")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None
        self.log.close()

    def stop(self):
        if self.proc is None:
            return
        end(self.proc, 120)  # the supervisor drains and destroys its sandboxes first
        self.proc = None
        self.log.close()

    def log_text(self):
        with open(os.path.join(self.dir, "serve.log"), "rb") as f:
            return f.read().decode("utf-8", "replace")


class Fleet:
    def __init__(self, airlock, capacities, tokens, check_interval_ms=250, agent_interval_ms=500):
        self.airlock = airlock
        self.tokens = tokens
        self.prefix = f"alf{os.getpid() % 100000}"
        self.dir = tempfile.mkdtemp(prefix="airlock-fleet-")
        os.chmod(self.dir, 0o755)
        self.proxy_ns = f"{self.prefix}-px"
        self.proxy_socket = os.path.join(self.dir, "fleet.sock")
        self.nodes = [Node(self, i + 1, c) for i, c in enumerate(capacities)]
        self.check_interval_ms = check_interval_ms
        self.agent_interval_ms = agent_interval_ms
        self.haproxy = None
        self.namespaces = []
        try:
            self._certificates()
            self._network()
            for n in self.nodes:
                os.makedirs(n.dir)
                n.write_policy()
            for n in self.nodes:
                n.start()
            self._proxy()
        except BaseException:
            self.close()
            raise

    def _certificates(self):
        d = self.dir

        def ec_key(name):
            run("openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-out", f"{d}/{name}.key")

        ec_key("ca")
        run("openssl", "req", "-x509", "-new", "-key", f"{d}/ca.key", "-subj", "/CN=airlock fleet CA",
            "-days", "2", "-out", f"{d}/ca.crt")
        for name, cn, ext in (("node", "airlock-node", "subjectAltName=DNS:airlock-node"),
                              ("proxy", "airlock-proxy", "extendedKeyUsage=clientAuth")):
            ec_key(name)
            run("openssl", "req", "-new", "-key", f"{d}/{name}.key", "-subj", f"/CN={cn}",
                "-out", f"{d}/{name}.csr")
            with open(f"{d}/{name}.ext", "w") as f:
                f.write(ext + "\n")
            run("openssl", "x509", "-req", "-in", f"{d}/{name}.csr", "-CA", f"{d}/ca.crt",
                "-CAkey", f"{d}/ca.key", "-CAcreateserial", "-days", "2", "-extfile",
                f"{d}/{name}.ext", "-out", f"{d}/{name}.crt")
        with open(f"{d}/proxy.pem", "w") as out:
            for part in ("proxy.crt", "proxy.key"):
                with open(f"{d}/{part}") as f:
                    out.write(f.read())
        for name in ("node.key", "proxy.key", "proxy.pem", "ca.key"):
            os.chmod(f"{d}/{name}", 0o600)

    def _network(self):
        run("ip", "netns", "add", self.proxy_ns)
        self.namespaces.append(self.proxy_ns)
        px = ["ip", "-n", self.proxy_ns]
        run(*px, "link", "set", "lo", "up")
        run(*px, "link", "add", "br0", "type", "bridge")
        run(*px, "addr", "add", f"{SUBNET}.1/24", "dev", "br0")
        run(*px, "link", "set", "br0", "up")
        for n in self.nodes:
            run("ip", "netns", "add", n.netns)
            self.namespaces.append(n.netns)
            # Both ends made inside the proxy's namespace, one then moved: the host's own
            # namespace never holds either.
            run(*px, "link", "add", f"v{n.name}", "type", "veth", "peer", "name", "eth0",
                "netns", n.netns)
            run(*px, "link", "set", f"v{n.name}", "master", "br0", "up")
            nx = ["ip", "-n", n.netns]
            run(*nx, "link", "set", "lo", "up")
            run(*nx, "addr", "add", f"{n.address}/24", "dev", "eth0")
            run(*nx, "link", "set", "eth0", "up")

    def _proxy(self):
        with open(f"{self.dir}/nodes.txt", "w") as f:
            f.write("# the simulated fleet\n")
            for n in self.nodes:
                f.write(f"{n.name} {n.address}:{API_PORT}\n")
        run(self.airlock, "fleet", "haproxy", "--nodes", f"{self.dir}/nodes.txt",
            "--out", f"{self.dir}/haproxy.cfg", "--listen", f"unix@{self.proxy_socket} mode 600",
            "--ca", f"{self.dir}/ca.crt", "--client-cert", f"{self.dir}/proxy.pem",
            "--verify-host", "airlock-node", "--admin-socket", f"{self.dir}/haproxy-admin.sock",
            "--check-interval-ms", str(self.check_interval_ms),
            "--agent-interval-ms", str(self.agent_interval_ms))
        self.haproxy_log = open(f"{self.dir}/haproxy.log", "ab")
        # -db: stay in the foreground, so the pid is HAProxy's own.
        self.haproxy = subprocess.Popen(
            ["ip", "netns", "exec", self.proxy_ns, "haproxy", "-db", "-f",
             f"{self.dir}/haproxy.cfg"], stdout=self.haproxy_log, stderr=self.haproxy_log,
            start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.haproxy.poll() is not None:
                raise RuntimeError("haproxy exited: " + open(f"{self.dir}/haproxy.log").read())
            if os.path.exists(self.proxy_socket) and self.all_up():
                return
            time.sleep(0.05)
        raise RuntimeError("the proxy did not see every node up within 30 s: " + self.servers())

    def admin(self, command):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(f"{self.dir}/haproxy-admin.sock")
        s.sendall(command.encode() + b"\n")
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        s.close()
        return out.decode()

    def servers(self):
        """HAProxy's view: {(backend, server): (status, weight)}."""
        rows = {}
        lines = self.admin("show stat").splitlines()
        if not lines:
            return rows
        header = lines[0].lstrip("# ").split(",")
        for line in lines[1:]:
            cols = dict(zip(header, line.split(",")))
            if cols.get("svname") in ("FRONTEND", "BACKEND", None):
                continue
            rows[(cols["pxname"], cols["svname"])] = (cols["status"], cols["weight"])
        return rows

    def all_up(self):
        try:
            s = self.servers()
        except OSError:
            return False
        return all(s.get((f"node_{n.name}", n.name), ("",))[0] == "UP" for n in self.nodes)

    def client(self, tenant="alpha"):
        return Client(self.proxy_socket, self.tokens[tenant])

    def close(self):
        if self.haproxy is not None:
            end(self.haproxy, 10)
            self.haproxy = None
            self.haproxy_log.close()
        for n in self.nodes:
            n.stop()
        for ns in self.namespaces:
            run("ip", "netns", "del", ns, check=False)
        self.namespaces = []
        shutil.rmtree(self.dir, ignore_errors=True)
