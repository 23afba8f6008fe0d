"""Remote access over TLS: `airlock serve` with [server] tcp on a non-loopback address.

The test makes a CA, a server certificate and client certificates with the openssl CLI in a
temporary directory, and starts a real supervisor listening on 127.0.0.2, an address the rule
treats as "not loopback" (only 127.0.0.1 and ::1 may serve plain HTTP) while the port never
leaves the host. Needs root (airlock serve creates namespaces and cgroups); without it every test
skips with the reason, and fails instead when AIRLOCK_TEST_REQUIRE_PRIVILEGED=1.
"""

import hashlib
import http.client
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import unittest

BIN = os.environ.get("AIRLOCK_BIN", "")
TOKEN = "tls-remote-test-token-8d1e"
HOST = "127.0.0.2"
IS_ROOT = os.geteuid() == 0
MUST_RUN = os.environ.get("AIRLOCK_TEST_REQUIRE_PRIVILEGED") == "1"
SKIP = "" if IS_ROOT or MUST_RUN else "needs root: airlock serve creates namespaces and cgroups"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-days", "2", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
            "-out", f"{name}.crt", cwd=d)


def make_cert(d, name, ca, ext):
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        f.write(ext)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt",
            cwd=d)


def free_port(host):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def write_policy(d, tcp, tls=True, client_ca=True):
    sha = hashlib.sha256(TOKEN.encode()).hexdigest()
    lines = ["schema = 1", "[server]", f'socket = "{d}/airlock.sock"',
             f'state_dir = "{d}/state"', f'tcp = "{tcp}"',
             "header_timeout_s = 1"]  # also the TLS handshake's limit
    if tls:
        lines += [f'tls_cert = "{d}/server.crt"', f'tls_key = "{d}/server.key"']
    if client_ca:
        lines += [f'tls_client_ca = "{d}/ca.crt"']
    lines += ["[tenants.remote]", f'token_sha256 = "{sha}"']
    path = os.path.join(d, "policy.toml")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


@unittest.skipIf(SKIP, SKIP)
class TlsRemoteAccess(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        assert BIN and os.path.exists(BIN), f"AIRLOCK_BIN must name the airlock binary ({BIN!r})"
        assert IS_ROOT, "needs real root; AIRLOCK_TEST_REQUIRE_PRIVILEGED=1 forbids skipping"
        cls.dir = tempfile.mkdtemp(prefix="airlock-tls-")
        d = cls.dir
        make_ca(d, "ca")
        make_ca(d, "rogue")  # a CA the server does not trust
        make_cert(d, "server", "ca", f"subjectAltName=IP:{HOST}\nextendedKeyUsage=serverAuth\n")
        make_cert(d, "client", "ca", "extendedKeyUsage=clientAuth\n")
        make_cert(d, "intruder", "rogue", "extendedKeyUsage=clientAuth\n")
        cls.port = free_port(HOST)
        policy = write_policy(d, f"{HOST}:{cls.port}")
        cls.stderr = open(os.path.join(d, "serve.log"), "w+")
        cls.serve = subprocess.Popen([BIN, "serve", "--policy", policy, "--log-level", "debug"],
                                     stdout=subprocess.DEVNULL, stderr=cls.stderr)
        deadline = time.monotonic() + 30
        while True:
            if cls.serve.poll() is not None:
                cls.stderr.seek(0)
                raise AssertionError(f"airlock serve exited early:\n{cls.stderr.read()}")
            try:
                with socket.create_connection((HOST, cls.port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("airlock serve did not listen in 30 s")
                time.sleep(0.05)

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "serve", None) and cls.serve.poll() is None:
            cls.serve.terminate()
            cls.serve.wait(timeout=60)
        if getattr(cls, "stderr", None):
            cls.stderr.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def context(self, cert="client"):
        ctx = ssl.create_default_context(cafile=os.path.join(self.dir, "ca.crt"))
        if cert:
            ctx.load_cert_chain(os.path.join(self.dir, f"{cert}.crt"),
                                os.path.join(self.dir, f"{cert}.key"))
        return ctx

    def request(self, ctx, method, path, token=TOKEN, body=None, headers=None):
        conn = http.client.HTTPSConnection(HOST, self.port, context=ctx, timeout=15)
        try:
            h = dict(headers or {})
            if token:
                h["Authorization"] = f"Bearer {token}"
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            conn.close()

    def test_tls_with_client_certificate_and_token_reaches_the_api(self):
        status, _, body = self.request(self.context(), "GET", "/v1/sandboxes")
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["sandboxes"], [])
        status, _, body = self.request(self.context(), "GET", "/v1/sandboxes", token="wrong")
        self.assertEqual(status, 401, body)
        status, _, body = self.request(self.context(), "GET", "/v1/sandboxes", token=None)
        self.assertEqual(status, 401, body)

    def test_files_and_streams_cross_the_relay_intact(self):
        # Megabytes each way on one keep-alive connection: the relay's back-pressure and order.
        conn = http.client.HTTPSConnection(HOST, self.port, context=self.context(), timeout=60)
        auth = {"Authorization": f"Bearer {TOKEN}"}
        try:
            conn.request("POST", "/v1/sandboxes", body="{}",
                         headers={**auth, "Content-Type": "application/json"})
            r = conn.getresponse()
            sandbox = json.loads(r.read())["id"]
            self.assertEqual(r.status, 201)
            data = os.urandom(8 << 20)
            conn.request("PUT", f"/v1/sandboxes/{sandbox}/files?path=/home/user/big.bin",
                         body=data, headers=auth)
            r = conn.getresponse()
            self.assertEqual(r.status, 201, r.read())
            r.read()
            conn.request("GET", f"/v1/sandboxes/{sandbox}/files?path=/home/user/big.bin",
                         headers=auth)
            r = conn.getresponse()
            self.assertEqual(r.status, 200)
            self.assertTrue(r.read() == data, "the file came back changed")
            conn.request("POST", f"/v1/sandboxes/{sandbox}/code", headers={
                **auth, "Content-Type": "application/json"}, body=json.dumps(
                    {"code": "for i in range(3):\n    print('line', i, flush=True)"}))
            r = conn.getresponse()
            events = [json.loads(line) for line in r.read().splitlines()]
            self.assertEqual("".join(e.get("data", "") for e in events if e["type"] == "stdout"),
                             "line 0\nline 1\nline 2\n")
            conn.request("DELETE", f"/v1/sandboxes/{sandbox}", headers=auth)
            r = conn.getresponse()
            r.read()
            self.assertEqual(r.status, 204)
        finally:
            conn.close()

    def test_mcp_over_tls(self):
        init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "tls-test", "version": "1"}}})
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream"}
        status, got, body = self.request(self.context(), "POST", "/mcp", body=init,
                                         headers=headers)
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["result"]["serverInfo"]["name"], "airlock")
        session = got["Mcp-Session-Id"]
        status, _, body = self.request(self.context(), "DELETE", "/mcp",
                                       headers={"Mcp-Session-Id": session})
        self.assertEqual(status, 204, body)

    def test_only_tls_1_2_and_later(self):
        ctx = self.context()
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        with socket.create_connection((HOST, self.port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname=HOST) as tls:
                self.assertEqual(tls.version(), "TLSv1.2")

    def test_plain_http_to_the_tls_port_gets_no_http_answer(self):
        with socket.create_connection((HOST, self.port), timeout=10) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            try:
                while chunk := s.recv(4096):
                    data += chunk
            except (ConnectionResetError, socket.timeout):
                pass
        self.assertFalse(data.startswith(b"HTTP/"), data[:200])

    def test_handshakes_of_one_client_are_bounded(self):
        # 32 handshakes at once per client address: silent connections beyond that are closed at
        # once instead of waiting for the handshake timeout.
        silent = [socket.create_connection((HOST, self.port), timeout=10) for _ in range(40)]
        try:
            start = time.monotonic()
            closed = 0
            for s in silent[-8:]:
                s.settimeout(0.5)
                try:
                    closed += s.recv(1) == b""
                except socket.timeout:
                    pass
            self.assertEqual(closed, 8)
            self.assertLess(time.monotonic() - start, 0.9)  # before the 1 s handshake timeout
        finally:
            for s in silent:
                s.close()
        time.sleep(1.2)  # the others are cut by the handshake timeout; later tests start clean

    def assertRefused(self, ctx):
        # With TLS 1.3 the client's handshake may end before the server has checked the client
        # certificate; the refusal then arrives as an alert on the first read.
        with self.assertRaises((ssl.SSLError, ConnectionResetError, BrokenPipeError,
                                http.client.RemoteDisconnected)):
            self.request(ctx, "GET", "/v1/sandboxes")

    def test_missing_client_certificate_is_refused(self):
        self.assertRefused(self.context(cert=None))

    def test_client_certificate_of_another_ca_is_refused(self):
        self.assertRefused(self.context(cert="intruder"))

    def test_serve_log_names_the_tls_client(self):
        self.request(self.context(), "GET", "/v1/sandboxes")
        self.stderr.flush()
        with open(os.path.join(self.dir, "serve.log")) as f:
            log = f.read()
        self.assertRegex(log, rf"info serve\.start .*tcp=https://{re.escape(HOST)}:{self.port} "
                              r"client_certificates=true")
        # Each connection is a debug line naming its TLS peer; the kernel picks 127.0.0.1 as the
        # source address towards 127.0.0.2.
        self.assertRegex(log, r"debug api\.connection connection=\d+ peer=\"?tls 127\.0\.0\.\d+")

    def test_a_silent_handshake_is_cut_at_the_header_timeout(self):
        start = time.monotonic()
        with socket.create_connection((HOST, self.port), timeout=10) as s:
            self.assertEqual(s.recv(1), b"")  # closed by the server, not by our timeout
        self.assertLess(time.monotonic() - start, 5)


@unittest.skipIf(SKIP, SKIP)
class RefusedAtStart(unittest.TestCase):
    def run_serve(self, **policy):
        assert IS_ROOT, "needs real root; AIRLOCK_TEST_REQUIRE_PRIVILEGED=1 forbids skipping"
        d = tempfile.mkdtemp(prefix="airlock-tls-refused-")
        try:
            path = write_policy(d, **policy)
            r = subprocess.run([BIN, "serve", "--policy", path], capture_output=True, text=True,
                               timeout=60)
            return r.returncode, r.stderr
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_non_loopback_without_tls_is_refused_naming_the_setting(self):
        code, err = self.run_serve(tcp=f"{HOST}:8443", tls=False, client_ca=False)
        self.assertNotEqual(code, 0)
        self.assertIn("server.tcp", err)
        self.assertIn("needs TLS: set server.tls_cert and server.tls_key", err)

    def test_wildcard_without_tls_is_refused(self):
        code, err = self.run_serve(tcp="0.0.0.0:8443", tls=False, client_ca=False)
        self.assertNotEqual(code, 0)
        self.assertIn("needs TLS", err)

    def test_missing_certificate_file_is_refused_naming_the_setting(self):
        # The policy names files in a directory that run_serve has not filled.
        code, err = self.run_serve(tcp=f"{HOST}:8443", tls=True, client_ca=False)
        self.assertNotEqual(code, 0)
        self.assertIn("server.tls_cert", err)


if __name__ == "__main__":
    unittest.main()
