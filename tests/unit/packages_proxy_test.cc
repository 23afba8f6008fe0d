// The package proxy end to end in process: a fake upstream (PyPI index, npm registry, files) on
// loopback, the Proxy on an ephemeral loopback listener, and real HTTP requests to it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <stdlib.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "supervisor/packages/disk_cache.h"
#include "supervisor/packages/proxy.h"

namespace airlock::packages {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// An HTTP server on 127.0.0.1:0 answering fixed paths, one connection at a time, recording
// what it was asked.
class FakeUpstream {
 public:
  struct Answer {
    unsigned status = 200;
    std::string content_type = "application/octet-stream";
    std::string body;
    bool stall = false;  // send the header and part of the body, then hang until stop()
  };

  FakeUpstream() : acceptor_(ioc_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { loop(); });
  }
  ~FakeUpstream() { stop(); }

  std::string base() const { return "http://127.0.0.1:" + std::to_string(port_); }
  uint16_t port() const { return port_; }
  void set(const std::string& target, Answer a) {
    std::lock_guard lock(mu_);
    answers_[target] = std::move(a);
  }
  std::vector<std::string> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }
  std::string lastAccept() {
    std::lock_guard lock(mu_);
    return last_accept_;
  }
  // Waits until a stalling answer has begun.
  void waitForStall() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return stalled_; });
  }
  // Stops answering; the port refuses connections from then on.
  void stop() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    asio::io_context wake_ioc;
    tcp::socket wake(wake_ioc);
    boost::system::error_code ec;
    wake.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_), ec);
    thread_.join();
    acceptor_.close();
  }

 private:
  void loop() {
    for (;;) {
      tcp::socket s(ioc_);
      boost::system::error_code ec;
      acceptor_.accept(s, ec);
      if (ec || stopping_) return;
      beast::flat_buffer buffer;
      http::request<http::empty_body> req;
      http::read(s, buffer, req, ec);
      if (ec) continue;
      Answer a{404, "text/plain", "no such path"};
      {
        std::lock_guard lock(mu_);
        requests_.emplace_back(req.target());
        last_accept_ = std::string(req[http::field::accept]);
        if (auto it = answers_.find(std::string(req.target())); it != answers_.end())
          a = it->second;
      }
      http::response<http::string_body> res{static_cast<http::status>(a.status), 11};
      res.set(http::field::content_type, a.content_type);
      res.body() = a.body;
      res.prepare_payload();
      res.keep_alive(false);
      if (!a.stall) {
        http::write(s, res, ec);
        continue;
      }
      res.content_length(a.body.size() + 500);  // within max_file_bytes
      http::response_serializer<http::string_body> sr{res};
      http::write(s, sr, ec);  // the body it has; the promised rest never comes
      std::unique_lock lock(mu_);
      stalled_ = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return stopping_.load(); });
    }
  }

  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::map<std::string, Answer> answers_;
  std::vector<std::string> requests_;
  std::string last_accept_;
  std::condition_variable cv_;
  bool stalled_ = false;
};

struct Reply {
  unsigned status = 0;
  std::string reason, body, content_type;
  bool keep_alive = false;
};

// A client connection to the proxy; several requests may go over it (keep-alive).
class Client {
 public:
  explicit Client(uint16_t port) : socket_(ioc_) {
    socket_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  }
  Reply get(const std::string& target, const std::string& accept = "",
            http::verb verb = http::verb::get) {
    http::request<http::empty_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1:" + std::to_string(socket_.remote_endpoint().port()));
    if (!accept.empty()) req.set(http::field::accept, accept);
    http::write(socket_, req);
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    if (verb == http::verb::head) parser.skip(true);
    http::read(socket_, buffer_, parser);
    const auto& res = parser.get();
    return {res.result_int(), std::string(res.reason()), res.body(),
            std::string(res[http::field::content_type]), res.keep_alive()};
  }
  // Whether the proxy has closed the connection (reads EOF, waiting up to 5 s).
  bool closedByPeer() {
    timeval tv{5, 0};
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char c;
    return ::recv(socket_.native_handle(), &c, 1, 0) == 0;
  }

 private:
  asio::io_context ioc_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
};

Reply fetch(uint16_t port, const std::string& target, const std::string& accept = "") {
  return Client(port).get(target, accept);
}

std::string sha256Of(const std::string& s) { return sha256Hex(s); }

std::string sha512Base64(const std::string& s) {
  unsigned char d[64];
  unsigned int n = 0;
  EVP_Digest(s.data(), s.size(), d, &n, EVP_sha512(), nullptr);
  std::string out(4 * ((n + 2) / 3) + 1, '\0');
  out.resize(static_cast<size_t>(
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), d, static_cast<int>(n))));
  return out;
}

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

class PackagesProxy : public ::testing::Test {
 protected:
  const std::string wheel1 = "wheel one bytes", wheel2 = "wheel two: the one allowed";
  const std::string sdist2 = "sdist bytes", wheel3 = "wheel three, corrupted upstream";
  const std::string big = std::string(5000, 'b'), evil = "evil wheel";
  const std::string tgz100 = "tarball 1.0.0", tgz130 = "tarball 1.3.0 bytes";
  const std::string scoped = "scoped tarball";

  void SetUp() override {
    char tmpl[] = "/tmp/airlock-packages-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    const std::string sha3_claimed = sha256Of("not what is served");
    upstream_.set("/simple/demo/",
                  {200, "text/html",
                   "<html><body>\n"
                   "<a href=\"../../files/demo-1.0-py3-none-any.whl#sha256=" +
                       sha256Of(wheel1) +
                       "\">demo-1.0-py3-none-any.whl</a>\n"
                       "<a href=\"/files/demo-2.0-py3-none-any.whl#sha256=" +
                       sha256Of(wheel2) +
                       "\" data-requires-python=\"&gt;=3.8\">demo-2.0-py3-none-any.whl</a>\n"
                       "<a href=\"" +
                       upstream_.base() + "/files/demo-2.0.tar.gz#sha256=" + sha256Of(sdist2) +
                       "\">demo-2.0.tar.gz</a>\n"
                       "<a href=\"/files/demo-3.0-py3-none-any.whl#sha256=" +
                       sha3_claimed + "\">demo-3.0-py3-none-any.whl</a>\n</body></html>"});
    upstream_.set("/files/demo-1.0-py3-none-any.whl", {.body = wheel1});
    upstream_.set("/files/demo-2.0-py3-none-any.whl", {.body = wheel2});
    upstream_.set("/files/demo-2.0.tar.gz", {.body = sdist2});
    upstream_.set("/files/demo-3.0-py3-none-any.whl", {.body = wheel3});
    upstream_.set("/simple/bigpkg/", {200, "text/html",
                                      "<a href=\"/files/bigpkg-1.0-py3-none-any.whl#sha256=" +
                                          sha256Of(big) + "\">bigpkg-1.0-py3-none-any.whl</a>"});
    upstream_.set("/files/bigpkg-1.0-py3-none-any.whl", {.body = big});
    upstream_.set("/simple/evilpkg/", {200, "text/html",
                                       "<a href=\"/files/evilpkg-1.0-py3-none-any.whl#sha256=" +
                                           sha256Of(evil) + "\">evilpkg-1.0-py3-none-any.whl</a>"});
    upstream_.set("/files/evilpkg-1.0-py3-none-any.whl", {.body = evil});
    nlohmann::json packument = {
        {"name", "left-pad"},
        {"dist-tags", {{"latest", "1.3.0"}, {"old", "1.0.0"}}},
        {"versions",
         {{"1.0.0",
           {{"version", "1.0.0"},
            {"dist",
             {{"tarball", upstream_.base() + "/tarballs/left-pad-1.0.0.tgz"},
              {"integrity", "sha512-" + sha512Base64(tgz100)}}}}},
          {"1.3.0",
           {{"version", "1.3.0"},
            {"dist",
             {{"tarball", upstream_.base() + "/tarballs/left-pad-1.3.0.tgz"},
              {"integrity", "sha512-" + sha512Base64(tgz130)}}}}}}}};
    upstream_.set("/registry/left-pad",
                  {200, "application/vnd.npm.install-v1+json", packument.dump()});
    upstream_.set("/tarballs/left-pad-1.0.0.tgz", {.body = tgz100});
    upstream_.set("/tarballs/left-pad-1.3.0.tgz", {.body = tgz130});
    nlohmann::json scoped_doc = {{"name", "@scope/pkg"},
                                 {"versions",
                                  {{"0.1.0",
                                    {{"dist",
                                      {{"tarball", "/tarballs/pkg-0.1.0.tgz"},
                                       {"integrity", "sha512-" + sha512Base64(scoped)}}}}}}}};
    // Upstream sees the '/' as "%2F": URLs are normalized (registry.npmjs.org takes either case).
    upstream_.set("/registry/@scope%2Fpkg", {200, "application/json", scoped_doc.dump()});
    upstream_.set("/tarballs/pkg-0.1.0.tgz", {.body = scoped});

    rules_ =
        compile({.allow = {"demo>=1.5", "bigpkg", "evilpkg", "npm:left-pad>=1.1", "npm:@scope/*"},
                 .deny = {"evil*"},
                 .max_file_bytes = 1000});
    startProxy();
    attachment_ = attachListener(rules_, port_);
  }

  void TearDown() override {
    attachment_.reset();
    proxy_.reset();
    upstream_.stop();
    std::filesystem::remove_all(dir_);
  }

  static std::shared_ptr<const Rules> compile(RuleSet set) {
    set.key = "profiles.t.packages";
    auto rules = compileRules(set);
    EXPECT_TRUE(rules) << rules.error().message();
    return *rules;
  }

  ProxyOptions options(size_t max_connections = 16, int idle_timeout_s = 60) {
    ProxyOptions o;
    o.pypi_index = upstream_.base() + "/simple";  // without the trailing slash on purpose
    o.npm_registry = upstream_.base() + "/registry/";
    o.cache_dir = dir_ + "/cache";
    o.timeout_s = 5;
    o.max_connections_per_sandbox = max_connections;
    o.idle_timeout_s = idle_timeout_s;
    return o;
  }

  void startProxy(size_t max_connections = 16, int idle_timeout_s = 60) {
    auto proxy =
        Proxy::create(options(max_connections, idle_timeout_s), [this](const DownloadEvent& e) {
          std::lock_guard lock(events_mu_);
          events_.push_back(e);
        });
    ASSERT_TRUE(proxy) << proxy.error().message();
    proxy_ = *proxy;
  }

  std::unique_ptr<Proxy::Attachment> attachListener(std::shared_ptr<const Rules> rules,
                                                    uint16_t& port) {
    auto listener = listenInNetns(-1, 0);
    EXPECT_TRUE(listener) << listener.error().message();
    auto bound = boundPort(listener->get());
    EXPECT_TRUE(bound);
    port = *bound;
    auto attached = proxy_->attach(std::move(*listener), {"sb1", "t1", std::move(rules)});
    EXPECT_TRUE(attached) << attached.error().message();
    return std::move(*attached);
  }

  std::vector<DownloadEvent> events() {
    std::lock_guard lock(events_mu_);
    return events_;
  }
  DownloadEvent lastEvent() {
    auto all = events();
    EXPECT_FALSE(all.empty());
    return all.empty() ? DownloadEvent{} : all.back();
  }
  std::string fileUrl(const std::string& project, const std::string& file) {
    return "/pypi/files/" + project + "/" + file;
  }
  size_t blobCount() {
    size_t n = 0;
    for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(dir_ + "/cache/blobs")) ++n;
    return n;
  }

  FakeUpstream upstream_;
  std::string dir_;
  std::shared_ptr<const Rules> rules_;
  std::shared_ptr<Proxy> proxy_;
  std::unique_ptr<Proxy::Attachment> attachment_;
  uint16_t port_ = 0;
  std::mutex events_mu_;
  std::vector<DownloadEvent> events_;
};

TEST_F(PackagesProxy, ServesAFilteredIndexPage) {
  const Reply r = fetch(port_, "/pypi/simple/Demo/");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  const std::string base = "http://127.0.0.1:" + std::to_string(port_) + "/pypi/files/demo/";
  EXPECT_TRUE(contains(r.body, "<a href=\"" + base + "demo-2.0-py3-none-any.whl#sha256=" +
                                   sha256Of(wheel2) + "\" data-requires-python=\"&gt;=3.8\">"))
      << r.body;
  EXPECT_FALSE(contains(r.body, "demo-1.0")) << "refused by demo>=1.5";
  EXPECT_FALSE(contains(r.body, "demo-2.0.tar.gz")) << "sdists = false";
  EXPECT_FALSE(contains(r.body, upstream_.base())) << "no link points upstream";
  EXPECT_EQ(upstream_.requests(), std::vector<std::string>{"/simple/demo/"});
  EXPECT_EQ(upstream_.lastAccept(), "text/html");
}

TEST_F(PackagesProxy, ServesAnAllowedFileThenFromTheCacheWithUpstreamGone) {
  const Reply r = fetch(port_, fileUrl("demo", "demo-2.0-py3-none-any.whl"));
  ASSERT_EQ(r.status, 200u) << r.reason;
  EXPECT_EQ(r.body, wheel2);
  DownloadEvent e = lastEvent();
  EXPECT_EQ(e.sandbox, "sb1");
  EXPECT_EQ(e.tenant, "t1");
  EXPECT_EQ(e.ecosystem, Ecosystem::pypi);
  EXPECT_EQ(e.package, "demo");
  EXPECT_EQ(e.version, "2.0");
  EXPECT_EQ(e.file, "demo-2.0-py3-none-any.whl");
  EXPECT_EQ(e.sha256, sha256Of(wheel2));
  EXPECT_EQ(e.bytes, wheel2.size());
  EXPECT_FALSE(e.cached);
  EXPECT_EQ(e.verdict, "allowed");
  EXPECT_EQ(e.rule, "profiles.t.packages.allow[0] = 'demo>=1.5'");
  // The file was asked for without a page first: the proxy fetched the page to find it.
  EXPECT_EQ(upstream_.requests(),
            (std::vector<std::string>{"/simple/demo/", "/files/demo-2.0-py3-none-any.whl"}));

  upstream_.stop();
  const Reply again = fetch(port_, fileUrl("demo", "demo-2.0-py3-none-any.whl"));
  ASSERT_EQ(again.status, 200u) << again.reason;
  EXPECT_EQ(again.body, wheel2);
  EXPECT_TRUE(lastEvent().cached);
  EXPECT_EQ(attachment_->bytesServed(), 2 * wheel2.size());

  // Another supervisor process on the same cache, upstream still gone: the page comes from the
  // disk copy, the file from the cache.
  attachment_.reset();
  proxy_.reset();
  startProxy();
  attachment_ = attachListener(rules_, port_);
  const Reply offline = fetch(port_, fileUrl("demo", "demo-2.0-py3-none-any.whl"));
  ASSERT_EQ(offline.status, 200u) << offline.reason;
  EXPECT_EQ(offline.body, wheel2);
  EXPECT_TRUE(lastEvent().cached);
  EXPECT_EQ(fetch(port_, "/pypi/simple/demo/").status, 200u);
}

TEST_F(PackagesProxy, RefusesADeniedPackageWithTheRuleInTheReason) {
  const Reply page = fetch(port_, "/pypi/simple/evilpkg/");
  EXPECT_EQ(page.status, 200u) << "a refused package still gets its page, so pip names the rule";
  EXPECT_TRUE(contains(page.body, "evilpkg-1.0-py3-none-any.whl"));
  DownloadEvent e = lastEvent();
  EXPECT_EQ(e.verdict, "denied");
  EXPECT_EQ(e.version, "");
  EXPECT_EQ(e.rule, "profiles.t.packages.deny[0] = 'evil*'");

  const Reply r = fetch(port_, fileUrl("evilpkg", "evilpkg-1.0-py3-none-any.whl"));
  EXPECT_EQ(r.status, 403u);
  const std::string message =
      "airlock: package 'evilpkg' 1.0 refused by profiles.t.packages.deny[0] = 'evil*'";
  EXPECT_EQ(r.reason, message);
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"], message);
  e = lastEvent();
  EXPECT_EQ(e.verdict, "denied");
  EXPECT_EQ(e.file, "evilpkg-1.0-py3-none-any.whl");
  for (const std::string& t : upstream_.requests()) EXPECT_FALSE(t.starts_with("/files/")) << t;
}

TEST_F(PackagesProxy, RefusesVersionsAndSdistsTheRulesExclude) {
  Reply r = fetch(port_, fileUrl("demo", "demo-1.0-py3-none-any.whl"));
  EXPECT_EQ(r.status, 403u);
  EXPECT_EQ(r.reason,
            "airlock: package 'demo' 1.0 refused by profiles.t.packages.allow (no entry matches "
            "'demo' 1.0)");
  r = fetch(port_, fileUrl("demo", "demo-2.0.tar.gz"));
  EXPECT_EQ(r.status, 403u);
  EXPECT_TRUE(contains(r.reason, "is a source distribution")) << r.reason;
  EXPECT_TRUE(contains(r.reason, "profiles.t.packages.sdists = false")) << r.reason;
  EXPECT_EQ(lastEvent().rule, "profiles.t.packages.sdists");
  EXPECT_EQ(upstream_.requests(), std::vector<std::string>{"/simple/demo/"});
}

TEST_F(PackagesProxy, HashMismatchIs502AndCachesNothing) {
  const Reply r = fetch(port_, fileUrl("demo", "demo-3.0-py3-none-any.whl"));
  EXPECT_EQ(r.status, 502u);
  EXPECT_TRUE(contains(r.reason, "'demo-3.0-py3-none-any.whl' failed verification")) << r.reason;
  EXPECT_TRUE(contains(r.reason, sha256Of("not what is served"))) << r.reason;
  EXPECT_TRUE(contains(r.reason, sha256Of(wheel3))) << r.reason;
  EXPECT_EQ(lastEvent().verdict, "failed");
  EXPECT_EQ(blobCount(), 0u);
  EXPECT_TRUE(std::filesystem::is_empty(dir_ + "/cache/tmp"));
}

TEST_F(PackagesProxy, RefusesAFileOverMaxFileBytes) {
  const Reply r = fetch(port_, fileUrl("bigpkg", "bigpkg-1.0-py3-none-any.whl"));
  EXPECT_EQ(r.status, 403u);
  EXPECT_TRUE(contains(r.reason,
                       "is 5000 bytes, more than profiles.t.packages.max_file_bytes = "
                       "1000"))
      << r.reason;
  EXPECT_EQ(lastEvent().verdict, "failed");
  EXPECT_EQ(lastEvent().rule, "profiles.t.packages.max_file_bytes");
  EXPECT_EQ(blobCount(), 0u);
}

TEST_F(PackagesProxy, UpstreamDownIs502NamingIt) {
  upstream_.stop();
  const Reply r = fetch(port_, "/pypi/simple/demo/");
  EXPECT_EQ(r.status, 502u);
  EXPECT_TRUE(contains(r.reason, "upstream '127.0.0.1:" + std::to_string(upstream_.port()) + "'"))
      << r.reason;
}

TEST_F(PackagesProxy, UpstreamNotFoundIs404) {
  const Reply r = fetch(port_, "/pypi/simple/nosuch/");
  EXPECT_EQ(r.status, 404u);
  EXPECT_EQ(r.reason,
            "airlock: package 'nosuch' not found at " + upstream_.base() + "/simple/nosuch/");
}

TEST_F(PackagesProxy, AFileNotInTheIndexIs404) {
  const Reply r = fetch(port_, fileUrl("demo", "demo-9.9-py3-none-any.whl"));
  EXPECT_EQ(r.status, 404u);
  EXPECT_TRUE(contains(r.reason, "'demo-9.9-py3-none-any.whl' is not a file of package 'demo'"))
      << r.reason;
  for (const std::string& t : upstream_.requests()) EXPECT_FALSE(t.starts_with("/files/")) << t;
}

TEST_F(PackagesProxy, NeverFetchesWhatTheSandboxNames) {
  for (const char* target :
       {"/pypi/files/x/..%2f..%2fetc%2fpasswd", "/pypi/files/demo/http:%2f%2fevil.example%2fa.whl",
        "http://evil.example/pypi/simple/demo/", "/pypi/simple/..%2f..%2fadmin/",
        "/pypi/files/demo/%2e%2e", "/npm/-/files/..%2f..%2fx/1.0.0.tgz",
        "/npm/http:%2f%2fevil.example", "/pypi/files/demo/a%00.whl", "/pypi/files/demo/a%zz"}) {
    const Reply r = fetch(port_, target);
    EXPECT_TRUE(r.status == 400 || r.status == 404) << target << ": " << r.status;
  }
  EXPECT_TRUE(upstream_.requests().empty());
  EXPECT_EQ(fetch(port_, "/other").status, 404u);
  EXPECT_TRUE(contains(fetch(port_, "/").reason, "/pypi/simple/<project>/"));
}

TEST_F(PackagesProxy, ServesNpmPackumentsAndTarballs) {
  const std::string accept = "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8";
  const Reply r = fetch(port_, "/npm/left-pad", accept);
  ASSERT_EQ(r.status, 200u) << r.reason;
  EXPECT_EQ(upstream_.lastAccept(), accept);
  EXPECT_EQ(r.content_type, "application/vnd.npm.install-v1+json");
  const auto doc = nlohmann::json::parse(r.body);
  ASSERT_EQ(doc["versions"].size(), 1u);
  const std::string tarball =
      "http://127.0.0.1:" + std::to_string(port_) + "/npm/-/files/left-pad/1.3.0.tgz";
  EXPECT_EQ(doc["versions"]["1.3.0"]["dist"]["tarball"], tarball);
  EXPECT_EQ(doc["dist-tags"], nlohmann::json({{"latest", "1.3.0"}}));

  Reply t = fetch(port_, "/npm/-/files/left-pad/1.3.0.tgz");
  ASSERT_EQ(t.status, 200u) << t.reason;
  EXPECT_EQ(t.body, tgz130);
  DownloadEvent e = lastEvent();
  EXPECT_EQ(e.ecosystem, Ecosystem::npm);
  EXPECT_EQ(e.package, "left-pad");
  EXPECT_EQ(e.version, "1.3.0");
  EXPECT_EQ(e.file, "left-pad-1.3.0.tgz");
  EXPECT_EQ(e.verdict, "allowed");
  EXPECT_EQ(e.sha256, sha256Of(tgz130));

  t = fetch(port_, "/npm/-/files/left-pad/1.0.0.tgz");
  EXPECT_EQ(t.status, 403u);
  EXPECT_EQ(t.reason,
            "airlock: package 'left-pad' 1.0.0 refused by profiles.t.packages.allow (no entry "
            "matches 'left-pad' 1.0.0)");
  EXPECT_EQ(fetch(port_, "/npm/-/files/left-pad/9.9.9.tgz").status, 404u);

  // Scoped, both spellings; a relative tarball URL resolves against the registry.
  for (const char* path : {"/npm/@scope%2fpkg", "/npm/@scope/pkg"}) {
    const Reply s = fetch(port_, path);
    ASSERT_EQ(s.status, 200u) << path << ": " << s.reason;
    EXPECT_EQ(nlohmann::json::parse(s.body)["versions"]["0.1.0"]["dist"]["tarball"],
              "http://127.0.0.1:" + std::to_string(port_) + "/npm/-/files/@scope%2fpkg/0.1.0.tgz");
  }
  const Reply st = fetch(port_, "/npm/-/files/@scope%2fpkg/0.1.0.tgz");
  ASSERT_EQ(st.status, 200u) << st.reason;
  EXPECT_EQ(st.body, scoped);
}

TEST_F(PackagesProxy, NpmTarballFailingIntegrityIs502) {
  nlohmann::json doc = {{"versions",
                         {{"1.3.0",
                           {{"dist",
                             {{"tarball", upstream_.base() + "/tarballs/left-pad-1.3.0.tgz"},
                              {"integrity", "sha512-" + sha512Base64("something else")}}}}}}}};
  upstream_.set("/registry/left-pad", {200, "application/json", doc.dump()});
  const Reply t = fetch(port_, "/npm/-/files/left-pad/1.3.0.tgz");
  EXPECT_EQ(t.status, 502u);
  EXPECT_TRUE(contains(t.reason, "failed verification")) << t.reason;
  EXPECT_EQ(blobCount(), 0u);
}

TEST_F(PackagesProxy, KeepsConnectionsAlive) {
  Client c(port_);
  const Reply a = c.get("/pypi/simple/demo/");
  EXPECT_EQ(a.status, 200u);
  EXPECT_TRUE(a.keep_alive);
  const Reply b = c.get(fileUrl("demo", "demo-2.0-py3-none-any.whl"));
  EXPECT_EQ(b.status, 200u);
  EXPECT_EQ(b.body, wheel2);
  const Reply h = c.get(fileUrl("demo", "demo-2.0-py3-none-any.whl"), "", http::verb::head);
  EXPECT_EQ(h.status, 200u);
  EXPECT_EQ(c.get("/nothing/here").status, 404u);  // an error keeps the connection too
  EXPECT_EQ(c.get("/pypi/simple/demo/").status, 200u);
  EXPECT_EQ(c.get("/pypi/simple/demo/", "", http::verb::post).status, 405u);
}

TEST_F(PackagesProxy, PinsAndTheSandboxBudgetApply) {
  uint16_t port = 0;
  auto pinned = attachListener(compile({.allow = {"demo>=1.5"},
                                        .max_sandbox_bytes = wheel2.size() + 1,
                                        .pins = {{"Demo", {std::string(64, 'a')}}}}),
                               port);
  Reply r = fetch(port, fileUrl("demo", "demo-2.0-py3-none-any.whl"));
  EXPECT_EQ(r.status, 403u);
  EXPECT_TRUE(contains(r.reason, "which profiles.t.packages.pins['Demo'] does not list"))
      << r.reason;

  uint16_t port2 = 0;
  auto budget = attachListener(
      compile({.allow = {"demo>=1.5"}, .max_sandbox_bytes = wheel2.size() + 1}), port2);
  EXPECT_EQ(fetch(port2, fileUrl("demo", "demo-2.0-py3-none-any.whl")).status, 200u);
  r = fetch(port2, fileUrl("demo", "demo-2.0-py3-none-any.whl"));
  EXPECT_EQ(r.status, 403u);
  EXPECT_TRUE(contains(r.reason, "profiles.t.packages.max_sandbox_bytes")) << r.reason;
  EXPECT_EQ(budget->bytesServed(), wheel2.size());
  // Budgets are per sandbox: the fixture's attachment still has all of its own.
  EXPECT_EQ(fetch(port_, fileUrl("demo", "demo-2.0-py3-none-any.whl")).status, 200u);
}

TEST_F(PackagesProxy, LimitsConnectionsPerSandbox) {
  attachment_.reset();
  proxy_.reset();
  startProxy(2);
  attachment_ = attachListener(rules_, port_);
  Client a(port_), b(port_);
  EXPECT_EQ(a.get("/x").status, 404u);  // both accepted and being served
  EXPECT_EQ(b.get("/x").status, 404u);
  Client c(port_);
  const Reply r = c.get("/pypi/simple/demo/");
  EXPECT_EQ(r.status, 503u);
  EXPECT_TRUE(contains(r.reason, "too many connections")) << r.reason;
}

TEST_F(PackagesProxy, ClosesIdleConnections) {
  attachment_.reset();
  proxy_.reset();
  startProxy(16, 1);
  attachment_ = attachListener(rules_, port_);
  Client c(port_);
  EXPECT_EQ(c.get("/x").status, 404u);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.closedByPeer());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900));
}

TEST_F(PackagesProxy, DestroyingTheAttachmentClosesItsListenerAndConnections) {
  Client idle(port_);
  EXPECT_EQ(idle.get("/pypi/simple/demo/").status, 200u);
  const auto start = std::chrono::steady_clock::now();
  attachment_.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_TRUE(idle.closedByPeer());
  EXPECT_THROW(Client{port_}, boost::system::system_error);
}

TEST_F(PackagesProxy, DestroyingTheAttachmentEndsADownloadInFlight) {
  upstream_.set("/files/demo-2.0-py3-none-any.whl", {.body = "part", .stall = true});
  std::thread client([&] {
    // The proxy closes the connection without an answer: reading it fails.
    try {
      const Reply r = fetch(port_, fileUrl("demo", "demo-2.0-py3-none-any.whl"));
      ADD_FAILURE() << "answered " << r.status << " " << r.reason;
    } catch (const boost::system::system_error&) {
    }
  });
  upstream_.waitForStall();
  const auto start = std::chrono::steady_clock::now();
  attachment_.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  client.join();
  EXPECT_EQ(blobCount(), 0u);
  EXPECT_TRUE(std::filesystem::is_empty(dir_ + "/cache/tmp"));
}

TEST_F(PackagesProxy, TheProxyMayGoBeforeItsAttachments) {
  Client idle(port_);
  EXPECT_EQ(idle.get("/pypi/simple/demo/").status, 200u);
  proxy_.reset();  // stops the attachment too
  EXPECT_TRUE(idle.closedByPeer());
  EXPECT_THROW(Client{port_}, boost::system::system_error);
  attachment_.reset();  // nothing left to do, and no hang
}

TEST(PackagesListen, ListensOnLoopbackOnAnEphemeralPort) {
  auto fd = listenInNetns(-1, 0);
  ASSERT_TRUE(fd) << fd.error().message();
  auto port = boundPort(fd->get());
  ASSERT_TRUE(port);
  EXPECT_NE(*port, 0);
  EXPECT_FALSE(listenInNetns(-1, *port));  // taken
}

TEST(PackagesListen, ListensInAGivenNamespace) {
  // Our own namespace, named by fd: the setns() path without creating a namespace.
  UniqueFd ns(::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(ns);
  auto fd = listenInNetns(ns.get(), 0);
  if (!fd && fd.error().errnum() == EPERM) GTEST_SKIP() << "setns needs CAP_SYS_ADMIN";
  ASSERT_TRUE(fd) << fd.error().message();
  auto port = boundPort(fd->get());
  ASSERT_TRUE(port);
  EXPECT_NO_THROW(Client{*port});
  UniqueFd not_a_namespace(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  auto bad = listenInNetns(not_a_namespace.get(), 0);
  ASSERT_FALSE(bad);
  EXPECT_TRUE(contains(bad.error().message(), "setns(CLONE_NEWNET)")) << bad.error().message();
}

TEST(PackagesProxyCreate, RefusesBadOptions) {
  ProxyOptions o;
  o.cache_dir = "relative/dir";
  auto p = Proxy::create(o, nullptr);
  ASSERT_FALSE(p);
  EXPECT_TRUE(contains(p.error().message(), "cache_dir must be absolute"));
  char tmpl[] = "/tmp/airlock-packages-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  o.cache_dir = std::string(tmpl) + "/cache";
  o.ca_file = "/nonexistent/ca.pem";
  p = Proxy::create(o, nullptr);
  std::filesystem::remove_all(tmpl);
  ASSERT_FALSE(p);
  EXPECT_TRUE(contains(p.error().message(), "CA file")) << p.error().message();
}

}  // namespace
}  // namespace airlock::packages
