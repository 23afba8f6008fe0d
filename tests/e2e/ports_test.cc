// Ports through `airlock serve` (docs/api.md, "Ports"): HTTP and WebSocket reverse-proxied to a
// server the sandbox runs, through its agent, with network "none". One supervisor and one
// sandbox serve every case, to keep the file fast.
#include <arpa/inet.h>
#include <netinet/in.h>

#include "serve_harness.h"

namespace airlock::testing {
namespace {

// A stdlib-only server for the sandbox: GET describes the request it got, POST echoes its body,
// an Upgrade to websocket echoes frames (no websockets package in the sandbox).
constexpr char kServer[] = R"PY(
import base64, hashlib, http.server, sys

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def log_message(self, *a):
        pass
    def do_GET(self):
        if self.headers.get('Upgrade', '').lower() == 'websocket':
            return self.websocket()
        body = ('path=%s host=%s prefix=%s auth=%s' % (
            self.path, self.headers.get('Host'), self.headers.get('X-Forwarded-Prefix', '-'),
            self.headers.get('Authorization', '-'))).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'text/plain')
        self.send_header('X-Sandbox-Server', 'yes')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        data = self.rfile.read(int(self.headers.get('Content-Length', '0')))
        self.send_response(201)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def websocket(self):
        key = self.headers['Sec-WebSocket-Key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'
        self.send_response(101)
        self.send_header('Upgrade', 'websocket')
        self.send_header('Connection', 'Upgrade')
        self.send_header('Sec-WebSocket-Accept',
                         base64.b64encode(hashlib.sha1(key.encode()).digest()).decode())
        self.end_headers()
        self.wfile.flush()
        while True:
            hdr = self.rfile.read(2)
            if len(hdr) < 2:
                return
            op, n = hdr[0] & 0x0f, hdr[1] & 0x7f
            if n == 126:
                n = int.from_bytes(self.rfile.read(2), 'big')
            mask = self.rfile.read(4) if hdr[1] & 0x80 else b'\0\0\0\0'
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            if op == 8:
                self.wfile.write(b'\x88\x00')
                return
            self.wfile.write(bytes([0x80 | op, len(data)]) + data)

http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
)PY";

constexpr char kToken[] = "ports-token-1";  // sha256 below

int freeTcpPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

int connectUnix(const std::string& sock) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval limit{.tv_sec = 30, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int connectTcp(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval limit{.tv_sec = 30, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// "GET path HTTP/1.1" with Host, Connection: close and `fields` (each ending in CRLF).
std::string request(const std::string& method, const std::string& path,
                    const std::string& fields = "") {
  return method + " " + path + " HTTP/1.1\r\nHost: h\r\nConnection: close\r\n" + fields + "\r\n";
}

// Sends `request` and reads until the server closes: the raw response.
std::string exchange(int fd, const std::string& request) {
  (void)!send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string raw;
  char buf[65536];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) raw.append(buf, static_cast<size_t>(n));
  close(fd);
  return raw;
}

// Reads until the header's end; what follows it stays in `rest`.
std::string readHead(int fd, std::string& rest) {
  std::string raw;
  char buf[4096];
  while (raw.find("\r\n\r\n") == std::string::npos) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos) return raw;
  rest = raw.substr(end + 4);
  return raw.substr(0, end + 4);
}

class PortsTest : public ServeTest {};

TEST_F(PortsTest, HttpAndWebSocketThroughTheAgentWithNetworkNone) {
  const int tcp = freeTcpPort();
  Serve serve(dir_, "tcp = \"127.0.0.1:" + std::to_string(tcp) +
                        "\"\n"
                        "[tenants.default]\n"
                        "token_sha256 = "
                        "\"1543f6118c8ce1026129dcbeed5c627ec5fb0d6dc0d741b4d326da3c31c683b2\"\n"
                        "[profiles.default]\n"
                        "[profiles.closed]\nports = false\n"
                        "[audit]\nlog = \"" +
                        dir_.file("audit.jsonl") + "\"\n");
  auto created = http(serve.sock(), "POST", "/v1/sandboxes", R"({"name": "web"})");
  ASSERT_EQ(created.status, 201) << created.body;
  auto put = http(serve.sock(), "PUT", "/v1/sandboxes/web/files?path=/home/user/srv.py", kServer,
                  "application/octet-stream");
  ASSERT_EQ(put.status, 201) << put.body;

  // Nothing listens yet: 502 naming the port (and the sandbox).
  auto refused = http(serve.sock(), "GET", "/v1/sandboxes/web/ports/8000/");
  ASSERT_EQ(refused.status, 502) << refused.body;
  EXPECT_EQ(Json::parse(refused.body)["error"]["code"], "bad_gateway");
  EXPECT_NE(refused.body.find("nothing listens on port 8000"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("'web'"), std::string::npos) << refused.body;

  auto started = http(serve.sock(), "POST", "/v1/sandboxes/web/commands",
                      R"({"argv": ["python3", "/home/user/srv.py", "8000"], "background": true})");
  ASSERT_EQ(started.status, 201) << started.body;
  Response got;
  for (int i = 0; i < 200; ++i) {
    got = http(serve.sock(), "GET", "/v1/sandboxes/web/ports/8000/hello?x=1&y=%2F");
    if (got.status != 502) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  // HTTP: the target path and query, Host rewritten, the prefix told, the body relayed.
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_TRUE(got.complete);
  EXPECT_EQ(got.body,
            "path=/hello?x=1&y=%2F host=localhost:8000 prefix=/v1/sandboxes/web/ports/8000 auth=-");

  // The server's own header fields come through.
  std::string raw =
      exchange(connectUnix(serve.sock()), request("GET", "/v1/sandboxes/web/ports/8000/"));
  EXPECT_TRUE(raw.starts_with("HTTP/1.1 200")) << raw;
  EXPECT_NE(raw.find("X-Sandbox-Server: yes"), std::string::npos) << raw;

  // A POST body streams through, larger than the flow-control window (256 KiB) several times.
  std::string big(1 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 997) big[i] = static_cast<char>('a' + i % 26);
  auto posted =
      http(serve.sock(), "POST", "/v1/sandboxes/web/ports/8000/echo", big, "application/x-test");
  EXPECT_EQ(posted.status, 201);
  EXPECT_TRUE(posted.body == big) << "echoed " << posted.body.size() << " bytes";

  // Over TCP the tenant's token is needed, and it is not passed on to the sandbox.
  const std::string auth = std::string("Authorization: Bearer ") + kToken + "\r\n";
  raw = exchange(connectTcp(tcp), request("GET", "/v1/sandboxes/web/ports/8000/a", auth));
  EXPECT_TRUE(raw.starts_with("HTTP/1.1 200")) << raw;
  EXPECT_NE(raw.find("auth=-"), std::string::npos) << raw;
  raw = exchange(connectTcp(tcp), request("GET", "/v1/sandboxes/web/ports/8000/a"));
  EXPECT_TRUE(raw.starts_with("HTTP/1.1 401")) << raw;

  // A link: its path alone opens the port, over TCP with no token (as a browser would).
  raw = exchange(connectTcp(tcp), request("POST", "/v1/sandboxes/web/ports/8000/link",
                                          auth + "Content-Length: 0\r\n"));
  ASSERT_TRUE(raw.starts_with("HTTP/1.1 200")) << raw;
  auto link = Json::parse(raw.substr(raw.find("\r\n\r\n") + 4));
  EXPECT_EQ(link["port"], 8000);
  const std::string path = link["path"];
  ASSERT_TRUE(path.starts_with("/v1/ports/") && path.ends_with("/")) << path;
  EXPECT_GE(path.size(), std::string("/v1/ports/").size() + 22 + 1);  // >= 128 bits, base64url
  raw = exchange(connectTcp(tcp), request("GET", path + "page"));
  EXPECT_TRUE(raw.starts_with("HTTP/1.1 200")) << raw;
  EXPECT_NE(raw.find("path=/page host=localhost:8000 prefix=- auth=-"), std::string::npos) << raw;
  // The sandbox server's own Authorization passes through a link; airlock's token does not.
  raw = exchange(connectTcp(tcp), request("GET", path + "app", "Authorization: Basic YTpi\r\n"));
  EXPECT_NE(raw.find("path=/app host=localhost:8000 prefix=- auth=Basic YTpi"), std::string::npos)
      << raw;
  raw = exchange(connectTcp(tcp), request("GET", path + "app", auth));
  EXPECT_NE(raw.find("path=/app host=localhost:8000 prefix=- auth=-"), std::string::npos) << raw;
  raw = exchange(connectTcp(tcp), request("GET", "/v1/ports/not-a-token/page"));
  EXPECT_TRUE(raw.starts_with("HTTP/1.1 404")) << raw;

  // WebSocket: the 101, then one masked frame each way.
  int ws = connectUnix(serve.sock());
  ASSERT_GE(ws, 0);
  std::string upgrade =
      "GET /v1/sandboxes/web/ports/8000/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
      "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
      "Sec-WebSocket-Version: 13\r\n\r\n";
  ASSERT_EQ(send(ws, upgrade.data(), upgrade.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(upgrade.size()));
  std::string rest;
  std::string head = readHead(ws, rest);
  ASSERT_TRUE(head.starts_with("HTTP/1.1 101")) << head;
  EXPECT_NE(head.find("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), std::string::npos)
      << head;
  const std::string text = "hello through the agent";
  const unsigned char mask[4] = {0x12, 0x34, 0x56, 0x78};
  std::string frame = {static_cast<char>(0x81), static_cast<char>(0x80 | text.size())};
  frame.append(reinterpret_cast<const char*>(mask), 4);
  for (size_t i = 0; i < text.size(); ++i) frame += static_cast<char>(text[i] ^ mask[i % 4]);
  ASSERT_EQ(send(ws, frame.data(), frame.size(), MSG_NOSIGNAL), static_cast<ssize_t>(frame.size()));
  char buf[256];
  while (rest.size() < 2 + text.size()) {
    ssize_t n = read(ws, buf, sizeof buf);
    if (n <= 0) break;
    rest.append(buf, static_cast<size_t>(n));
  }
  ASSERT_GE(rest.size(), 2 + text.size());
  EXPECT_EQ(static_cast<unsigned char>(rest[0]), 0x81);
  EXPECT_EQ(rest.substr(2, text.size()), text);
  close(ws);

  // A profile with ports off: 403 naming the setting, for the proxy and for links.
  auto closed = http(serve.sock(), "POST", "/v1/sandboxes", R"({"profile": "closed"})");
  ASSERT_EQ(closed.status, 201) << closed.body;
  const std::string cid = Json::parse(closed.body)["id"];
  auto off = http(serve.sock(), "GET", "/v1/sandboxes/" + cid + "/ports/8000/");
  EXPECT_EQ(off.status, 403) << off.body;
  EXPECT_NE(off.body.find("ports = false"), std::string::npos) << off.body;
  auto off_link = http(serve.sock(), "POST", "/v1/sandboxes/" + cid + "/ports/8000/link");
  EXPECT_EQ(off_link.status, 403) << off_link.body;
  EXPECT_EQ(http(serve.sock(), "GET", "/v1/sandboxes/web/ports/0/").status, 400);

  // Network "none" still has nothing but loopback: the proxy opened no interface or route.
  // The interfaces the sandbox's network namespace has (netlink is closed to sandboxed code).
  Json list_links = {
      {"argv", {"awk", "-F:", "NR > 2 { gsub(/ /, \"\", $1); print $1 }", "/proc/net/dev"}},
      {"stream", false}};
  auto nets = http(serve.sock(), "POST", "/v1/sandboxes/web/commands", list_links.dump());
  ASSERT_EQ(nets.status, 200) << nets.body;
  EXPECT_EQ(Json::parse(nets.body)["stdout"], "lo\n") << nets.body;

  // One audit record per proxied connection, naming the port and never a link's token.
  std::string audit = readFile(dir_.file("audit.jsonl"));
  int port_records = 0;
  for (size_t pos = 0, nl; (nl = audit.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    auto rec = Json::parse(audit.substr(pos, nl - pos), nullptr, false);
    if (rec.is_discarded() || rec.value("type", "") != "port") continue;
    ++port_records;
    EXPECT_EQ(rec["port"], 8000) << rec.dump();
    EXPECT_EQ(rec["sandbox"], Json::parse(created.body)["id"]) << rec.dump();
  }
  EXPECT_EQ(port_records, 8);  // the connections that opened: 4 HTTP, 3 by link, 1 WebSocket
  EXPECT_EQ(audit.find(path.substr(10, 32)), std::string::npos) << "a link token was logged";

  // The link ends with its sandbox.
  ASSERT_EQ(http(serve.sock(), "DELETE", "/v1/sandboxes/web").status, 204);
  raw = exchange(connectTcp(tcp), request("GET", path + "page"));
  EXPECT_TRUE(raw.starts_with("HTTP/1.1 404")) << raw;
  EXPECT_EQ(http(serve.sock(), "DELETE", "/v1/sandboxes/" + cid).status, 204);
}

}  // namespace
}  // namespace airlock::testing
