// The airlock API client against a fake server: what it sends, how it reads answers, NDJSON
// streams, errors, and streamed file transfers.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "airlock/unique_fd.h"
#include "client_fake_server.h"
#include "supervisor/client/client.h"
#include "supervisor/encoding/base64.h"

namespace airlock::client {

using encoding::base64Decode;
using encoding::base64Encode;
namespace {

using testing::FakeServer;
using testing::RecordedRequest;
using testing::Responder;
using testing::TempDir;

Client clientFor(const FakeServer& server, const std::string& token = "") {
  auto ep = parseEndpoint(server.url());
  EXPECT_TRUE(ep.has_value()) << ep.error().message();
  return Client(*ep, token);
}

// ---- AIRLOCK_URL ----

TEST(ClientEndpoint, ParsesUnixSocketUrl) {
  auto ep = parseEndpoint("unix:///run/airlock/airlock.sock");
  ASSERT_TRUE(ep) << ep.error().message();
  EXPECT_EQ(ep->kind, Endpoint::Kind::kUnix);
  EXPECT_EQ(ep->socket_path, "/run/airlock/airlock.sock");
  EXPECT_EQ(ep->describe(), "/run/airlock/airlock.sock");
}

TEST(ClientEndpoint, ParsesHttpUrl) {
  auto ep = parseEndpoint("http://127.0.0.1:8421");
  ASSERT_TRUE(ep) << ep.error().message();
  EXPECT_EQ(ep->kind, Endpoint::Kind::kTcp);
  EXPECT_EQ(ep->host, "127.0.0.1");
  EXPECT_EQ(ep->port, 8421);
  EXPECT_EQ(ep->describe(), "127.0.0.1:8421");

  auto local = parseEndpoint("http://localhost:80/");
  ASSERT_TRUE(local) << local.error().message();
  EXPECT_EQ(local->host, "127.0.0.1");
  auto v6 = parseEndpoint("http://[::1]:9000");
  ASSERT_TRUE(v6) << v6.error().message();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->describe(), "[::1]:9000");
}

TEST(ClientEndpoint, RejectsBadUrlsNamingWhatIsWrong) {
  auto bad = [](const std::string& url) {
    auto ep = parseEndpoint(url);
    EXPECT_FALSE(ep) << url;
    return ep ? std::string() : ep.error().message();
  };
  EXPECT_EQ(bad("ftp://x"), "AIRLOCK_URL 'ftp://x': scheme must be unix:// or http://");
  EXPECT_EQ(bad("/run/airlock.sock"),
            "AIRLOCK_URL '/run/airlock.sock': scheme must be unix:// or http://");
  EXPECT_NE(bad("unix://relative.sock").find("socket path must be absolute"), std::string::npos);
  EXPECT_NE(bad("unix://").find("missing socket path"), std::string::npos);
  EXPECT_NE(bad("http://127.0.0.1").find("missing port"), std::string::npos);
  EXPECT_NE(bad("http://127.0.0.1:0").find("port '0' must be a number in 1-65535"),
            std::string::npos);
  EXPECT_NE(bad("http://127.0.0.1:99999").find("port '99999'"), std::string::npos);
  EXPECT_NE(bad("http://example.com:80").find("must be an IP address or localhost"),
            std::string::npos);
  EXPECT_NE(bad("https://127.0.0.1:1").find("https is not supported"), std::string::npos);
  EXPECT_NE(bad("unix:///" + std::string(200, 'a')).find("longer than"), std::string::npos);
}

TEST(ClientEndpoint, ComesFromTheEnvironmentWithTheDefaultSocket) {
  ::unsetenv("AIRLOCK_URL");
  auto def = endpointFromEnvironment();
  ASSERT_TRUE(def);
  EXPECT_EQ(def->socket_path, "/run/airlock/airlock.sock");
  ::setenv("AIRLOCK_URL", "http://127.0.0.1:7000", 1);
  ::setenv("AIRLOCK_TOKEN", "s3cret", 1);
  auto c = Client::fromEnvironment();
  ::unsetenv("AIRLOCK_URL");
  ::unsetenv("AIRLOCK_TOKEN");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->endpoint().port, 7000);
  ::setenv("AIRLOCK_URL", "ftp://x", 1);
  auto bad = Client::fromEnvironment();
  ::unsetenv("AIRLOCK_URL");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(), "AIRLOCK_URL 'ftp://x': scheme must be unix:// or http://");
}

// ---- connecting ----

TEST(ClientConnect, MissingSocketSaysTheSupervisorIsNotRunning) {
  TempDir dir;
  Client c(*parseEndpoint("unix://" + dir.file("airlock.sock")), "");
  auto r = c.call("GET", "/healthz");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "cannot connect to " + dir.file("airlock.sock") +
                                     ": ENOENT — is `airlock serve` running?");
}

TEST(ClientConnect, SocketWithoutListenerIsRefused) {
  TempDir dir;
  std::string path = dir.file("stale.sock");
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);  // no listen
  Client c(*parseEndpoint("unix://" + path), "");
  auto r = c.call("GET", "/healthz");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(),
            "cannot connect to " + path + ": ECONNREFUSED — is `airlock serve` running?");
}

TEST(ClientConnect, ClosedTcpPortIsRefused) {
  uint16_t port;
  {
    FakeServer probe(true);  // a port that was free a moment ago
    port = parseEndpoint(probe.url())->port;
  }
  Client c(*parseEndpoint("http://127.0.0.1:" + std::to_string(port)), "");
  auto r = c.call("GET", "/healthz");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "cannot connect to 127.0.0.1:" + std::to_string(port) +
                                     ": ECONNREFUSED — is `airlock serve` running?");
}

// ---- JSON calls ----

TEST(ClientCall, SendsMethodPathBodyAndBearerToken) {
  FakeServer server;
  server.json("POST", "/v1/sandboxes", 201, {{"id", "3f2a9c0d1e4b5a67"}, {"state", "running"}});
  Client c = clientFor(server, "tok-123");
  auto r = c.call("POST", "/v1/sandboxes", Json{{"profile", "default"}, {"name", "web-1"}});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ((*r)["id"], "3f2a9c0d1e4b5a67");
  RecordedRequest req = server.last();
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.target, "/v1/sandboxes");
  EXPECT_EQ(req.header("authorization"), "Bearer tok-123");
  EXPECT_EQ(req.header("content-type"), "application/json");
  EXPECT_EQ(req.header("host"), "localhost");
  EXPECT_EQ(req.json(), (Json{{"profile", "default"}, {"name", "web-1"}}));
}

TEST(ClientCall, OverTcpToo) {
  FakeServer server(true);
  server.json("GET", "/healthz", 200, {{"status", "ok"}});
  Client c = clientFor(server, "t");
  auto r = c.call("GET", "/healthz");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ((*r)["status"], "ok");
  EXPECT_EQ(server.last().header("authorization"), "Bearer t");
  EXPECT_EQ(server.last().header("host"), server.url().substr(7));
}

TEST(ClientCall, NoTokenNoAuthorizationHeader) {
  FakeServer server;
  server.json("GET", "/v1/sandboxes", 200, {{"sandboxes", Json::array()}});
  auto r = clientFor(server).call("GET", "/v1/sandboxes?metadata.user=u1");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(server.last().target, "/v1/sandboxes?metadata.user=u1");
  EXPECT_EQ(server.last().headers.count("authorization"), 0u);
  EXPECT_TRUE(server.last().body.empty());
}

TEST(ClientCall, ErrorBodyBecomesMessageWithStatusAndCode) {
  FakeServer server;
  server.on("GET", "/v1/sandboxes/web-1", [](const RecordedRequest&, Responder& r) {
    r.error(404, "not_found", "sandbox 'web-1' not found");
  });
  auto r = clientFor(server).call("GET", "/v1/sandboxes/web-1");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "sandbox 'web-1' not found (HTTP 404 not_found)");
}

TEST(ClientCall, NonJsonErrorNamesTheStatus) {
  FakeServer server;
  server.on("GET", "/healthz", [](const RecordedRequest&, Responder& r) {
    r.send(502, "upstream gone\n", "text/plain");
  });
  auto r = clientFor(server).call("GET", "/healthz");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "the supervisor answered HTTP 502 Bad Gateway: upstream gone");
}

TEST(ClientCall, NoContentIsNull) {
  FakeServer server;
  server.json("DELETE", "/v1/sandboxes/a", 204, nullptr);
  auto r = clientFor(server).call("DELETE", "/v1/sandboxes/a");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(r->is_null());
  EXPECT_EQ(server.last().method, "DELETE");
}

TEST(ClientCall, BadJsonAnswerIsAnError) {
  FakeServer server;
  server.on("GET", "/healthz",
            [](const RecordedRequest&, Responder& r) { r.send(200, "{not json", "text/plain"); });
  auto r = clientFor(server).call("GET", "/healthz");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("not JSON"), std::string::npos) << r.error().message();
}

TEST(ClientCall, PercentEncodesPathsAndQueries) {
  EXPECT_EQ(percentEncode("/home/user/a b&c=d.csv"), "%2Fhome%2Fuser%2Fa%20b%26c%3Dd.csv");
  EXPECT_EQ(percentEncode("web-1_x.~"), "web-1_x.~");
}

// ---- NDJSON streams ----

TEST(ClientStream, HandsOverEachEventBeforeTheServerSendsTheNext) {
  FakeServer server;
  std::promise<void> first_seen;
  auto first_seen_future = first_seen.get_future();
  std::atomic<bool> client_saw_first_before_last = false;
  server.on("POST", "/v1/sandboxes/sb/commands", [&](const RecordedRequest&, Responder& r) {
    r.beginChunked(200);
    r.chunk("{\"type\":\"start\",\"command_id\":\"c1\",\"pid\":7}\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    // One event split over two flushes, and two events in one flush.
    r.chunk("{\"type\":\"stdout\",");
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    r.chunk("\"data\":\"a\\n\"}\n{\"type\":\"stderr\",\"data_base64\":\"/w==\"}\n");
    client_saw_first_before_last =
        first_seen_future.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
    r.chunk("{\"type\":\"exit\",\"exit_code\":3,\"signal\":0,\"timed_out\":false}\n");
    r.endChunked();
  });
  std::vector<Json> events;
  bool first = true;
  auto r = clientFor(server).stream("POST", "/v1/sandboxes/sb/commands",
                                    Json{{"argv", {"ls"}}, {"stream", true}}, [&](const Json& ev) {
                                      events.push_back(ev);
                                      if (first) first_seen.set_value();
                                      first = false;
                                    });
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(client_saw_first_before_last);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0]["type"], "start");
  EXPECT_EQ(events[1]["data"], "a\n");
  EXPECT_EQ(base64Decode(events[2]["data_base64"].get<std::string>()), std::string("\xff"));
  EXPECT_EQ(events[3]["exit_code"], 3);
  EXPECT_EQ(server.last().json()["argv"], Json::array({"ls"}));
}

TEST(ClientStream, LastLineWithoutNewlineAndBlankLinesAreHandled) {
  FakeServer server;
  server.on("POST", "/x", [](const RecordedRequest&, Responder& r) {
    r.beginChunked(200);
    r.chunk("\n{\"n\":1}\r\n\n");
    r.chunk("{\"n\":2}");
    r.endChunked();
  });
  std::vector<int> ns;
  auto r = clientFor(server).stream("POST", "/x", Json::object(),
                                    [&](const Json& ev) { ns.push_back(ev["n"]); });
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(ns, (std::vector<int>{1, 2}));
}

TEST(ClientStream, ErrorAnswerIsNotAStream) {
  FakeServer server;
  server.on("POST", "/v1/sandboxes/sb/code", [](const RecordedRequest&, Responder& r) {
    r.error(409, "conflict", "context 'python' is busy");
  });
  int events = 0;
  auto r = clientFor(server).stream("POST", "/v1/sandboxes/sb/code", Json::object(),
                                    [&](const Json&) { ++events; });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "context 'python' is busy (HTTP 409 conflict)");
  EXPECT_EQ(events, 0);
}

TEST(ClientStream, BadEventLineIsAnError) {
  FakeServer server;
  server.on("POST", "/x", [](const RecordedRequest&, Responder& r) {
    r.beginChunked(200);
    r.chunk("{\"ok\":1}\nnot json\n");
    r.endChunked();
  });
  int events = 0;
  auto r = clientFor(server).stream("POST", "/x", Json::object(), [&](const Json&) { ++events; });
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("not JSON: not json"), std::string::npos)
      << r.error().message();
  EXPECT_EQ(events, 1);
}

TEST(ClientStream, ConnectionCutMidStreamIsAnError) {
  FakeServer server;
  server.on("POST", "/x", [](const RecordedRequest&, Responder& r) {
    r.beginChunked(200);
    r.chunk("{\"ok\":1}\n");  // and no last chunk: the connection just closes
  });
  int events = 0;
  auto r = clientFor(server).stream("POST", "/x", Json::object(), [&](const Json&) { ++events; });
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("reading the answer from"), std::string::npos)
      << r.error().message();
  EXPECT_EQ(events, 1);
}

// ---- files ----

// Deterministic bytes, so both sides can check a stream without holding it.
char patternByte(uint64_t i) { return static_cast<char>((i * 2654435761u) >> 13); }

std::string writePattern(const TempDir& dir, const std::string& name, uint64_t size) {
  std::string path = dir.file(name);
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  std::string buf(1 << 20, '\0');
  for (uint64_t off = 0; off < size; off += buf.size()) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - off));
    for (size_t k = 0; k < n; ++k) buf[k] = patternByte(off + k);
    EXPECT_EQ(::write(fd.get(), buf.data(), n), static_cast<ssize_t>(n));
  }
  return path;
}

long maxRssKb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

TEST(ClientFiles, UploadStreamsA20MBFileIntactWithContentLength) {
  constexpr uint64_t kSize = 20ull << 20;
  TempDir dir;
  std::string path = writePattern(dir, "big.bin", kSize);
  FakeServer server;
  std::atomic<uint64_t> received = 0, mismatches = 0;
  server.onBody("PUT", "/v1/sandboxes/sb/files", [&](std::string_view piece) {
    for (char ch : piece)
      if (ch != patternByte(received++)) ++mismatches;
  });
  server.json("PUT", "/v1/sandboxes/sb/files", 201,
              {{"path", "/home/user/big.bin"}, {"size", kSize}});
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  uint64_t last_progress = 0;
  long rss_before = maxRssKb();
  auto r =
      clientFor(server).upload("/v1/sandboxes/sb/files?path=%2Fhome%2Fuser%2Fbig.bin", fd.get(),
                               kSize, [&](uint64_t done, std::optional<uint64_t> total) {
                                 EXPECT_EQ(total, kSize);
                                 EXPECT_GE(done, last_progress);
                                 last_progress = done;
                               });
  long rss_growth_kb = maxRssKb() - rss_before;
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ((*r)["size"], kSize);
  EXPECT_EQ(received, kSize);
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(last_progress, kSize);
  RecordedRequest req = server.last();
  EXPECT_EQ(req.method, "PUT");
  EXPECT_EQ(req.header("content-length"), std::to_string(kSize));
  EXPECT_EQ(req.header("transfer-encoding"), "");
  EXPECT_EQ(req.header("content-type"), "application/octet-stream");
  // Streamed: neither side held the file in memory.
  EXPECT_LT(rss_growth_kb, 10 * 1024);
}

TEST(ClientFiles, UploadRejectedBeforeTheBodyReportsTheServersError) {
  constexpr uint64_t kSize = 8ull << 20;
  TempDir dir;
  std::string path = writePattern(dir, "big.bin", kSize);
  FakeServer server;
  server.onHead("PUT", "/v1/sandboxes/sb/files", [](const RecordedRequest&, Responder& r) {
    r.error(413, "payload_too_large", "file would pass the workspace quota (workspace_mb 1)");
  });
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  auto r = clientFor(server).upload("/v1/sandboxes/sb/files?path=%2Fx", fd.get(), kSize);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(),
            "file would pass the workspace quota (workspace_mb 1) (HTTP 413 payload_too_large)");
}

TEST(ClientFiles, UploadOfAFileThatShrankFails) {
  TempDir dir;
  std::string path = writePattern(dir, "small.bin", 1000);
  FakeServer server;
  server.json("PUT", "/f", 201, {{"size", 1000}});
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  auto r = clientFor(server).upload("/f", fd.get(), 5000);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("shrank to 1000 bytes"), std::string::npos)
      << r.error().message();
}

TEST(ClientFiles, DownloadWritesTheStreamToAFileIntact) {
  constexpr uint64_t kSize = (12ull << 20) + 12345;
  FakeServer server;
  server.on("GET", "/v1/sandboxes/sb/files", [&](const RecordedRequest&, Responder& r) {
    r.beginFixed(200, kSize, "application/octet-stream");
    std::string buf(300 * 1024, '\0');
    for (uint64_t off = 0; off < kSize; off += buf.size()) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), kSize - off));
      for (size_t k = 0; k < n; ++k) buf[k] = patternByte(off + k);
      r.raw({buf.data(), n});
    }
  });
  TempDir dir;
  std::string out = dir.file("out.bin");
  UniqueFd fd(::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  std::optional<uint64_t> seen_total;
  auto r = clientFor(server).download(
      "/v1/sandboxes/sb/files?path=%2Fout.bin", fd.get(),
      [&](uint64_t, std::optional<uint64_t> total) { seen_total = total; });
  fd.reset();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, kSize);
  EXPECT_EQ(seen_total, kSize);
  std::string got = testing::readFile(out);
  ASSERT_EQ(got.size(), kSize);
  uint64_t mismatches = 0;
  for (uint64_t i = 0; i < kSize; ++i)
    if (got[i] != patternByte(i)) ++mismatches;
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(server.last().target, "/v1/sandboxes/sb/files?path=%2Fout.bin");
}

TEST(ClientFiles, DownloadErrorWritesNothing) {
  FakeServer server;
  server.on("GET", "/v1/sandboxes/sb/files", [](const RecordedRequest&, Responder& r) {
    r.error(404, "not_found", "'/nope' not found in sandbox 'sb'");
  });
  TempDir dir;
  std::string out = dir.file("out.bin");
  UniqueFd fd(::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  auto r = clientFor(server).download("/v1/sandboxes/sb/files?path=%2Fnope", fd.get());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "'/nope' not found in sandbox 'sb' (HTTP 404 not_found)");
  EXPECT_EQ(testing::readFile(out), "");
}

TEST(ClientBase64, RoundTripsAndRejectsGarbage) {
  for (std::string s : {"", "f", "fo", "foo", "foob", "fooba", "foobar", "\xff\x00\x10"})
    EXPECT_EQ(base64Decode(base64Encode(s)), s);
  EXPECT_EQ(base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64Encode("fo"), "Zm8=");
  EXPECT_FALSE(base64Decode("Zm9"));
  EXPECT_FALSE(base64Decode("Zm=v"));
  EXPECT_FALSE(base64Decode("Z!9v"));
}

}  // namespace
}  // namespace airlock::client
