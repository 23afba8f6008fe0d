#!/usr/bin/env python3
"""A small HTTP and HTTPS server for the airlock.transfer.http tests (stdlib only).

    transfer_http_server.py --addr A --http-port P [--https-port Q --cert C --key K]
                            [--wrong-name-port R --wrong-name-cert C2 --wrong-name-key K2]
                            [--static DIR]

Routes, the same on every port:
  GET  /file/<n>.<ext>      n deterministic bytes (byte i is (i * 7 + 3) % 251), Content-Length
  GET  /cut/<n>             announces n bytes (Content-Length), sends half of them, closes
  GET  /redirect?to=<url>   302 to <url>
  GET  /trickle             a 200 header without a length, then one byte a second, forever
  GET  /endless             a chunked 200 that never ends
  GET  /status/<code>       that status
  PUT  /upload/<name>       reads Content-Length bytes, keeps their sha256 and size; 201
  GET  /uploaded/<name>     {"sha256": ..., "size": ..., "method": ...} or 404
  GET  /requests            {"<method> <path>": count, ...}: what this server was asked
  GET  /static/<name>       the file <name> of --static DIR (the end-to-end tests' archives)
"""

import argparse
import hashlib
import http.server
import json
import ssl
import sys
import threading
import time
import urllib.parse

STATIC = None
UPLOADS = {}
REQUESTS = {}
LOCK = threading.Lock()


PERIOD = bytes((i * 7 + 3) % 251 for i in range(251))


def file_bytes(n):
    return (PERIOD * (n // 251 + 1))[:n]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: the tests read their own results
        pass

    def count(self):
        path = urllib.parse.urlsplit(self.path).path
        with LOCK:
            key = f"{self.command} {path}"
            REQUESTS[key] = REQUESTS.get(key, 0) + 1

    def send_body(self, status, body, content_type="application/octet-stream"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.count()
        url = urllib.parse.urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        if parts[0] == "static" and len(parts) == 2 and STATIC and "/" not in parts[1] \
                and parts[1] not in ("", ".", ".."):
            try:
                with open(STATIC + "/" + parts[1], "rb") as f:
                    self.send_body(200, f.read())
            except OSError:
                self.send_body(404, b"no such file\n")
        elif parts[0] == "file" and len(parts) == 2:
            n = int(parts[1].split(".")[0])
            self.send_body(200, file_bytes(n))
        elif parts[0] == "cut" and len(parts) == 2:
            n = int(parts[1])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(file_bytes(n)[: n // 2])
            self.wfile.flush()
            self.close_connection = True
        elif parts[0] == "redirect":
            to = urllib.parse.parse_qs(url.query).get("to", ["/"])[0]
            self.send_response(302)
            self.send_header("Location", to)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif parts[0] == "trickle":
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                while True:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(1)
            except OSError:
                pass
        elif parts[0] == "endless":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"z" * 65536
            try:
                while True:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except OSError:
                pass
        elif parts[0] == "status" and len(parts) == 2:
            self.send_body(int(parts[1]), b"status body\n", "text/plain")
        elif parts[0] == "uploaded" and len(parts) == 2:
            with LOCK:
                entry = UPLOADS.get(parts[1])
            if entry is None:
                self.send_body(404, b"no such upload\n", "text/plain")
            else:
                self.send_body(200, json.dumps(entry).encode(), "application/json")
        elif parts[0] == "requests":
            with LOCK:
                body = json.dumps(REQUESTS).encode()
            self.send_body(200, body, "application/json")
        else:
            self.send_body(404, b"not found\n", "text/plain")

    def do_PUT(self):
        self.count()
        parts = urllib.parse.urlsplit(self.path).path.strip("/").split("/")
        if parts[0] != "upload" or len(parts) != 2:
            self.send_body(404, b"not found\n", "text/plain")
            return
        length = int(self.headers.get("Content-Length", "-1"))
        if length < 0:
            self.send_body(411, b"length required\n", "text/plain")
            return
        digest = hashlib.sha256()
        left = length
        while left > 0:
            data = self.rfile.read(min(left, 65536))
            if not data:
                return  # the client went away: nothing is stored
            digest.update(data)
            left -= len(data)
        with LOCK:
            UPLOADS[parts[1]] = {
                "sha256": digest.hexdigest(),
                "size": length,
                "method": self.command,
                "authorization": self.headers.get("Authorization", ""),
                "user_agent": self.headers.get("User-Agent", ""),
            }
        self.send_body(201, b"stored\n", "text/plain")

    do_POST = do_PUT


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # clients that fail TLS on purpose, or go away mid-body


def serve(addr, port, cert=None, key=None):
    server = Server((addr, port), Handler)
    if cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        # The handshake happens in the handler's thread, so a client stuck in it blocks no one.
        server.socket = ctx.wrap_socket(server.socket, server_side=True,
                                        do_handshake_on_connect=False)
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--addr", required=True)
    p.add_argument("--http-port", type=int, required=True)
    p.add_argument("--https-port", type=int)
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--static")
    p.add_argument("--wrong-name-port", type=int)
    p.add_argument("--wrong-name-cert")
    p.add_argument("--wrong-name-key")
    a = p.parse_args()
    global STATIC
    STATIC = a.static
    serve(a.addr, a.http_port)
    if a.https_port:
        serve(a.addr, a.https_port, a.cert, a.key)
    if a.wrong_name_port:
        serve(a.addr, a.wrong_name_port, a.wrong_name_cert, a.wrong_name_key)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
