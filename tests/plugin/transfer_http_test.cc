// airlock.transfer.http through the real loader (Registry, TransferPlugin, OpenTransfer), against
// a real server: each test makes a network namespace joined to the host by a veth pair, a CA and
// server certificates (the openssl CLI), and runs tests/support/transfer_http_server.py inside
// the namespace on a plain HTTP port, an HTTPS port and an HTTPS port whose certificate names
// another address. Everything is removed in TearDown, whatever failed.
//
// The server's address is private (10.213.x.2), so the host's protected ranges refuse it unless
// transfer.http.allow_private names it: the refusal is one of the cases, the exemption the
// positive control every other case relies on.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "supervisor/plugin/registry.h"
#include "supervisor/plugin/transfer_plugin.h"
#include "test_support.h"

extern char** environ;

namespace airlock::plugin {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using ::testing::HasSubstr;

constexpr int kHttpPort = 8080;
constexpr int kHttpsPort = 8443;
constexpr int kWrongNamePort = 8444;
const std::string kEllipsis = "\xE2\x80\xA6";

// What the server's /file/<n> sends.
std::string fileBytes(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 7 + 3) % 251);
  return s;
}

std::string sha256Hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  std::string hex;
  char buf[3];
  for (unsigned i = 0; i < len; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", md[i]);
    hex += buf;
  }
  return hex;
}

// The program's path, from PATH (runCommand takes no shell and no PATH lookup).
std::string which(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = std::string(path != nullptr ? path : "") + ":/usr/sbin:/sbin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = dirs.find(':', start);
    const std::string dir = dirs.substr(start, end - start);
    if (!dir.empty() && ::access((dir + "/" + name).c_str(), X_OK) == 0) return dir + "/" + name;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "";
}

// Reads `fd` to EOF, or until `limit` passes. Keeps at most `keep` bytes; counts them all.
struct Drained {
  std::string data;
  uint64_t bytes = 0;
  bool eof = false;
};
Drained drain(int fd, std::chrono::milliseconds limit, size_t keep = SIZE_MAX) {
  Drained d;
  const auto deadline = Clock::now() + limit;
  std::vector<char> buf(64 * 1024);
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return d;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n == 0) {
      d.eof = true;
      return d;
    }
    if (n < 0) return d;
    d.bytes += static_cast<uint64_t>(n);
    if (d.data.size() < keep)
      d.data.append(buf.data(), std::min<size_t>(static_cast<size_t>(n), keep - d.data.size()));
  }
}

// Writes all of `data` (MSG_NOSIGNAL: a closed reader is an error, not a signal).
bool sendAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return true;
}

class TransferHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT();
    ip_ = which("ip");
    openssl_ = which("openssl");
    python_ = which("python3");
    ASSERT_FALSE(ip_.empty()) << "the tests need iproute2's `ip`";
    ASSERT_FALSE(openssl_.empty()) << "the tests need the openssl CLI";
    ASSERT_FALSE(python_.empty()) << "the tests need python3";

    // Names and a /30 of our own, so test processes running at once never meet.
    const int pid = static_cast<int>(::getpid());
    ns_ = "airlock-t-" + std::to_string(pid);
    veth_host_ = "alh" + std::to_string(pid % 10000000);
    veth_ns_ = "aln" + std::to_string(pid % 10000000);
    const int base = (pid % 16384) * 4;
    const std::string net = "10.213." + std::to_string(base >> 8) + ".";
    host_addr_ = net + std::to_string((base & 255) + 1);
    server_ = net + std::to_string((base & 255) + 2);

    run({ip_, "netns", "add", ns_});
    netns_made_ = true;
    run({ip_, "link", "add", veth_host_, "type", "veth", "peer", "name", veth_ns_});
    run({ip_, "link", "set", veth_ns_, "netns", ns_});
    run({ip_, "addr", "add", host_addr_ + "/30", "dev", veth_host_});
    run({ip_, "link", "set", veth_host_, "up"});
    run({ip_, "-n", ns_, "addr", "add", server_ + "/30", "dev", veth_ns_});
    run({ip_, "-n", ns_, "link", "set", veth_ns_, "up"});
    run({ip_, "-n", ns_, "link", "set", "lo", "up"});
    if (HasFatalFailure()) return;

    makeCertificates();
    if (HasFatalFailure()) return;
    startServer();
    if (HasFatalFailure()) return;

    registry_ = Registry::loadDirectory(AIRLOCK_PLUGIN_BUILD_DIR, LoadOptions{::geteuid()});
    auto plugin = registry_.transfer("http");
    ASSERT_TRUE(plugin.has_value()) << plugin.error().message();
    plugin_ = *plugin;
    EXPECT_EQ(plugin_->fullName(), "airlock.transfer.http");
    EXPECT_EQ(plugin_->prefixes(), (std::vector<std::string>{"https://", "http://"}));
  }

  void TearDown() override {
    plugin_.reset();
    if (server_pid_ > 0) {
      ::kill(server_pid_, SIGKILL);
      ::waitpid(server_pid_, nullptr, 0);
      if (HasFailure()) std::cerr << "server log:\n" << testing::readFile(dir_.file("server.log"));
    }
    if (netns_made_) {
      // Deleting the namespace destroys the veth inside it, and with it the host's end.
      testing::runCommand({ip_, "netns", "del", ns_}, "", 10);
      testing::runCommand({ip_, "link", "del", veth_host_}, "", 10);
    }
  }

  void run(const std::vector<std::string>& argv) {
    const auto r = testing::runCommand(argv, "", 20);
    std::string line;
    for (const auto& a : argv) line += a + " ";
    ASSERT_EQ(r.exit_code, 0) << line << "\n" << r.out << r.err;
  }

  void makeCertificates() {
    const std::string d = dir_.path();
    dir_.write("server.ext", "subjectAltName=IP:" + server_ +
                                 "\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n");
    dir_.write("wrong.ext", "subjectAltName=IP:10.99.99.99\nextendedKeyUsage=serverAuth\n");
    run({openssl_,
         "req",
         "-x509",
         "-newkey",
         "ec",
         "-pkeyopt",
         "ec_paramgen_curve:P-256",
         "-nodes",
         "-keyout",
         d + "/ca.key",
         "-out",
         d + "/ca.pem",
         "-days",
         "2",
         "-subj",
         "/CN=airlock test CA",
         "-addext",
         "basicConstraints=critical,CA:TRUE",
         "-addext",
         "keyUsage=critical,keyCertSign,cRLSign"});
    for (const std::string name : {"server", "wrong"}) {
      run({openssl_, "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
           "-nodes", "-keyout", d + "/" + name + ".key", "-out", d + "/" + name + ".csr", "-subj",
           "/CN=" + name});
      run({openssl_, "x509", "-req", "-in", d + "/" + name + ".csr", "-CA", d + "/ca.pem", "-CAkey",
           d + "/ca.key", "-set_serial", name == "server" ? "2" : "3", "-days", "2", "-extfile",
           d + "/" + name + ".ext", "-out", d + "/" + name + ".pem"});
    }
    ca_file_ = d + "/ca.pem";
  }

  void startServer() {
    const std::string d = dir_.path();
    const std::string script = AIRLOCK_TRANSFER_HTTP_SERVER;
    std::vector<std::string> argv = {ip_,
                                     "netns",
                                     "exec",
                                     ns_,
                                     python_,
                                     script,
                                     "--addr",
                                     server_,
                                     "--http-port",
                                     std::to_string(kHttpPort),
                                     "--https-port",
                                     std::to_string(kHttpsPort),
                                     "--cert",
                                     d + "/server.pem",
                                     "--key",
                                     d + "/server.key",
                                     "--wrong-name-port",
                                     std::to_string(kWrongNamePort),
                                     "--wrong-name-cert",
                                     d + "/wrong.pem",
                                     "--wrong-name-key",
                                     d + "/wrong.key"};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    const std::string log = d + "/server.log";
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    const int rc = posix_spawn(&server_pid_, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ASSERT_EQ(rc, 0) << "posix_spawn: " << std::strerror(rc);

    // Ready when every port accepts a connection.
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    for (int port : {kHttpPort, kHttpsPort, kWrongNamePort}) {
      while (!canConnect(port)) {
        int status = 0;
        ASSERT_EQ(::waitpid(server_pid_, &status, WNOHANG), 0)
            << "the server exited: " << testing::readFile(log);
        ASSERT_LT(Clock::now(), deadline)
            << "the server is not listening on port " << port << ": " << testing::readFile(log);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }

  bool canConnect(int port) const {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, server_.c_str(), &sa.sin_addr);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    ::close(fd);
    return ok;
  }

  // A plain GET to the server's HTTP port, apart from the plugin: what did it receive?
  std::pair<int, std::string> serverGet(const std::string& path) const {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(kHttpPort);
    ::inet_pton(AF_INET, server_.c_str(), &sa.sin_addr);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      ::close(fd);
      return {0, "connect failed"};
    }
    sendAll(fd, "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    const Drained d = drain(fd, std::chrono::seconds(5));
    ::close(fd);
    const size_t sp = d.data.find(' ');
    const size_t body = d.data.find("\r\n\r\n");
    if (sp == std::string::npos || body == std::string::npos) return {0, d.data};
    return {std::atoi(d.data.c_str() + sp + 1), d.data.substr(body + 4)};
  }

  json requestsSeen() const {
    auto [status, body] = serverGet("/requests");
    EXPECT_EQ(status, 200) << body;
    return json::parse(body, nullptr, false);
  }

  std::string http(const std::string& path) const {
    return "http://" + server_ + ":" + std::to_string(kHttpPort) + path;
  }
  std::string https(const std::string& path, int port = kHttpsPort) const {
    return "https://" + server_ + ":" + std::to_string(port) + path;
  }

  // What the supervisor sends: the protected ranges, the server's URLs allowed and its address
  // exempted, the test CA trusted, short timeouts.
  json rules() const {
    json blocked = json::array();
    const std::pair<const char*, const char*> ranges[] = {
        {"0.0.0.0/8", "this network"},
        {"10.0.0.0/8", "private network"},
        {"100.64.0.0/10", "carrier-grade NAT"},
        {"127.0.0.0/8", "loopback"},
        {"169.254.0.0/16", "link-local"},
        {"169.254.169.254/32", "cloud metadata service"},
        {"172.16.0.0/12", "private network"},
        {"192.168.0.0/16", "private network"},
        {"::/128", "unspecified"},
        {"::1/128", "loopback"},
        {"fc00::/7", "unique local"},
        {"fd00:ec2::254/128", "cloud metadata service"},
        {"fe80::/10", "link-local"}};
    for (const auto& [cidr, why] : ranges) blocked.push_back({{"cidr", cidr}, {"why", why}});
    return {{"allow",
             {"http://" + server_ + ":" + std::to_string(kHttpPort),
              "https://" + server_ + ":" + std::to_string(kHttpsPort),
              "https://" + server_ + ":" + std::to_string(kWrongNamePort)}},
            {"blocked", blocked},
            {"allow_private", {"10.213.0.0/16"}},
            {"ca_file", ca_file_},
            {"spool_dir", dir_.path()},
            {"connect_timeout_ms", 3000},
            {"idle_timeout_ms", 3000},
            {"timeout_ms", 20000}};
  }

  Result<std::unique_ptr<OpenTransfer>> open(bool in, const std::string& location,
                                             const json& rules, uint64_t max_bytes = 0) const {
    TransferRequest r;
    r.in = in;
    r.location = location;
    r.rules_json = rules.dump();
    r.max_bytes = max_bytes;
    r.tenant = "test";
    r.sandbox_id = "sb-1";
    return plugin_->open(r);
  }

  // The error of an open that must fail.
  std::string openError(bool in, const std::string& location, const json& rules,
                        uint64_t max_bytes = 0) const {
    auto t = open(in, location, rules, max_bytes);
    if (t.has_value()) return "open succeeded";
    return t.error().op();  // the plugin's message, without the errno the host appends
  }

  // Downloads `location` whole and finishes; returns the bytes.
  std::string fetch(const std::string& location, const json& rules) const {
    auto t = open(true, location, rules);
    if (!t.has_value()) {
      ADD_FAILURE() << t.error().message();
      return "";
    }
    const Drained d = drain((*t)->fd(), std::chrono::seconds(10));
    EXPECT_TRUE(d.eof);
    auto done = (*t)->finish(true);
    EXPECT_TRUE(done.has_value()) << done.error().message();
    return d.data;
  }

  testing::TempDir dir_;
  std::string ip_, openssl_, python_;
  std::string ns_, veth_host_, veth_ns_, host_addr_, server_, ca_file_;
  bool netns_made_ = false;
  pid_t server_pid_ = -1;
  Registry registry_;
  std::shared_ptr<TransferPlugin> plugin_;
};

TEST_F(TransferHttpTest, FetchesOverHttpsWithTheCaFile) {
  const size_t n = 3 * 1024 * 1024 + 17;
  auto t = open(true, https("/file/" + std::to_string(n) + ".tar"), rules());
  ASSERT_TRUE(t.has_value()) << t.error().message();
  EXPECT_EQ((*t)->size(), n);  // from Content-Length
  EXPECT_EQ((*t)->display(), https("/file/" + std::to_string(n) + ".tar"));
  const Drained d = drain((*t)->fd(), std::chrono::seconds(10));
  ASSERT_TRUE(d.eof);
  auto done = (*t)->finish(true);
  ASSERT_TRUE(done.has_value()) << done.error().message();
  const std::string expected = fileBytes(n);
  EXPECT_EQ(d.data.size(), n);
  EXPECT_EQ(sha256Hex(d.data), sha256Hex(expected));
  EXPECT_TRUE(d.data == expected);
}

TEST_F(TransferHttpTest, FetchesOverPlainHttp) {
  EXPECT_TRUE(fetch(http("/file/100000.tar.gz"), rules()) == fileBytes(100000));
}

TEST_F(TransferHttpTest, HttpsWithoutTheCaFileFailsVerification) {
  json r = rules();
  r.erase("ca_file");
  const std::string error = openError(true, https("/file/10.tar"), r);
  EXPECT_THAT(error, HasSubstr("'" + https("/file/10.tar") + "': "));
  EXPECT_THAT(error, HasSubstr("TLS certificate verification failed"));
  EXPECT_THAT(error, HasSubstr("trusted: the system's CAs"));
  EXPECT_EQ(requestsSeen().count("GET /file/10.tar"), 0u);  // no request went out
}

TEST_F(TransferHttpTest, HttpsChecksTheCertificateNamesTheHost) {
  const std::string error = openError(true, https("/file/10.tar", kWrongNamePort), rules());
  EXPECT_THAT(error, HasSubstr("'" + https("/file/10.tar", kWrongNamePort) + "': "));
  EXPECT_THAT(error, HasSubstr("TLS certificate verification failed for '" + server_ + "'"));
  EXPECT_THAT(error, HasSubstr("mismatch"));
}

TEST_F(TransferHttpTest, UrlNotInAllowIsRefused) {
  json r = rules();
  r["allow"] = {"https://" + server_ + ":" + std::to_string(kHttpsPort) + "/file"};
  EXPECT_EQ(openError(true, http("/file/10.tar"), r),
            "'" + http("/file/10.tar") + "': not allowed by transfer.http.allow");
  EXPECT_EQ(openError(true, https("/filesystem.tar"), r),
            "'" + https("/filesystem.tar") + "': not allowed by transfer.http.allow");
  EXPECT_EQ(
      openError(true, https("/file/../status/200?sig=secret"), r),
      "'" + https("/file/../status/200?" + kEllipsis) + "': not allowed by transfer.http.allow");
  EXPECT_EQ(openError(false, http("/upload/x.tar"), r),
            "'" + http("/upload/x.tar") + "': not allowed by transfer.http.allow");
  EXPECT_EQ(fetch(https("/file/10.tar"), r), fileBytes(10));  // inside the prefix: fine
  const json seen = requestsSeen();
  EXPECT_EQ(seen.count("GET /status/200"), 0u);
  EXPECT_EQ(seen.value("GET /file/10.tar", 0), 1);
}

TEST_F(TransferHttpTest, ProtectedAddressIsRefusedUnlessAllowPrivate) {
  json r = rules();
  r.erase("allow_private");
  EXPECT_EQ(openError(true, http("/file/10.tar"), r),
            "'" + http("/file/10.tar") + "': " + server_ +
                " is in protected range 10.0.0.0/8 (private network)");
  EXPECT_EQ(openError(false, https("/upload/blocked.tar"), r),
            "'" + https("/upload/blocked.tar") + "': " + server_ +
                " is in protected range 10.0.0.0/8 (private network)");
  // allow_private narrower than the block, and not covering this address: still refused.
  r["allow_private"] = {"10.214.0.0/16"};
  EXPECT_THAT(openError(true, http("/file/10.tar"), r), HasSubstr("protected range 10.0.0.0/8"));
  EXPECT_EQ(requestsSeen().count("GET /file/10.tar"), 0u);
  // The positive control: the exemption lets the same URL through.
  EXPECT_TRUE(fetch(http("/file/10.tar"), rules()) == fileBytes(10));
}

TEST_F(TransferHttpTest, RedirectToTheMetadataAddressIsRefused) {
  json r = rules();
  r["allow"].push_back("http://169.254.169.254");  // so the address rule is what refuses
  const std::string location = http("/redirect?to=http://169.254.169.254/latest/meta-data/");
  EXPECT_EQ(openError(true, location, r),
            "'" + http("/redirect?" + kEllipsis) +
                "': redirect to 'http://169.254.169.254/latest/meta-data/': 169.254.169.254 is "
                "in protected range 169.254.169.254/32 (cloud metadata service)");
  // Not in allow at all: the allow rule refuses first.
  EXPECT_EQ(openError(true, location, rules()),
            "'" + http("/redirect?" + kEllipsis) +
                "': redirect to 'http://169.254.169.254/latest/meta-data/': not allowed by "
                "transfer.http.allow");
}

TEST_F(TransferHttpTest, RedirectFromHttpsToHttpIsRefused) {
  EXPECT_EQ(openError(true, https("/redirect?to=" + http("/file/10.tar")), rules()),
            "'" + https("/redirect?" + kEllipsis) + "': redirect to '" + http("/file/10.tar") +
                "': refused, a downgrade from https to http");
}

TEST_F(TransferHttpTest, RedirectToAnAllowedUrlIsFollowed) {
  EXPECT_TRUE(fetch(https("/redirect?to=" + https("/file/5000.tar")), rules()) == fileBytes(5000));
  // Relative, and two hops (the inner URL encoded in the outer query).
  EXPECT_TRUE(fetch(http("/redirect?to=/file/77.tar"), rules()) == fileBytes(77));
  EXPECT_TRUE(fetch(http("/redirect?to=%2Fredirect%3Fto%3D%2Ffile%2F78.tar"), rules()) ==
              fileBytes(78));
  json r = rules();
  r["redirects"] = 1;
  EXPECT_THAT(openError(true, http("/redirect?to=%2Fredirect%3Fto%3D%2Ffile%2F78.tar"), r),
              HasSubstr("more than 1 redirects (transfer.http.redirects)"));
}

TEST_F(TransferHttpTest, ZeroRedirectsRefusesA3xx) {
  json r = rules();
  r["redirects"] = 0;
  EXPECT_EQ(openError(true, http("/redirect?to=/file/10.tar"), r),
            "'" + http("/redirect?" + kEllipsis) +
                "': the server redirects (HTTP 302 Found) to '/file/10.tar', and "
                "transfer.http.redirects is 0");
  EXPECT_EQ(requestsSeen().count("GET /file/10.tar"), 0u);
}

TEST_F(TransferHttpTest, TrickleHitsTheIdleTimeout) {
  json r = rules();
  r["idle_timeout_ms"] = 500;
  const auto start = Clock::now();
  auto t = open(true, http("/trickle"), r);
  ASSERT_TRUE(t.has_value()) << t.error().message();
  EXPECT_EQ((*t)->size(), 0u);  // no Content-Length
  const Drained d = drain((*t)->fd(), std::chrono::seconds(5));
  EXPECT_TRUE(d.eof);
  EXPECT_LE(d.bytes, 2u);
  auto done = (*t)->finish(true);
  ASSERT_FALSE(done.has_value());
  EXPECT_EQ(done.error().op(), "'" + http("/trickle") +
                                   "': reading the body: nothing received or sent for "
                                   "transfer.http.idle_timeout_ms (500 ms)");
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
}

TEST_F(TransferHttpTest, EndlessHitsMaxBytes) {
  const uint64_t max = 1024 * 1024;
  const auto start = Clock::now();
  auto t = open(true, http("/endless"), rules(), max);
  ASSERT_TRUE(t.has_value()) << t.error().message();
  const Drained d = drain((*t)->fd(), std::chrono::seconds(5), 0);
  EXPECT_TRUE(d.eof);
  EXPECT_LE(d.bytes, max);
  auto done = (*t)->finish(true);
  ASSERT_FALSE(done.has_value());
  EXPECT_EQ(done.error().op(),
            "'" + http("/endless") + "': more than the transfer limit of 1048576 bytes");
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
}

TEST_F(TransferHttpTest, EndlessHitsTheTotalTimeout) {
  json r = rules();
  r["timeout_ms"] = 1000;
  const auto start = Clock::now();
  auto t = open(true, https("/endless"), r);
  ASSERT_TRUE(t.has_value()) << t.error().message();
  const Drained d = drain((*t)->fd(), std::chrono::seconds(5), 0);
  EXPECT_TRUE(d.eof);
  EXPECT_GT(d.bytes, 0u);
  auto done = (*t)->finish(true);
  ASSERT_FALSE(done.has_value());
  EXPECT_EQ(done.error().op(),
            "'" + https("/endless") +
                "': the transfer took longer than transfer.http.timeout_ms (1000 ms)");
  const auto took = Clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(900));
  EXPECT_LT(took, std::chrono::seconds(3));
}

TEST_F(TransferHttpTest, DownloadCutShortFailsAtFinish) {
  for (const std::string& location : {http("/cut/200000"), https("/cut/200000")}) {
    SCOPED_TRACE(location);
    auto t = open(true, location, rules());
    ASSERT_TRUE(t.has_value()) << t.error().message();
    EXPECT_EQ((*t)->size(), 200000u);
    const Drained d = drain((*t)->fd(), std::chrono::seconds(5));
    EXPECT_TRUE(d.eof);
    EXPECT_EQ(d.bytes, 100000u);
    EXPECT_TRUE(d.data == fileBytes(100000));
    auto done = (*t)->finish(true);
    ASSERT_FALSE(done.has_value());
    EXPECT_EQ(done.error().op(), "'" + location +
                                     "': the server closed the connection after 100000 bytes, "
                                     "before the end of the body");
  }
}

TEST_F(TransferHttpTest, ContentLengthOverMaxBytesFailsAtOpen) {
  EXPECT_EQ(openError(true, http("/file/5000.tar"), rules(), 4096),
            "'" + http("/file/5000.tar") +
                "': 5000 bytes (Content-Length), more than the transfer limit of 4096 bytes");
}

TEST_F(TransferHttpTest, ErrorStatusesFailAtOpen) {
  EXPECT_EQ(openError(true, http("/status/404"), rules()),
            "'" + http("/status/404") + "': HTTP 404 Not Found");
  EXPECT_EQ(openError(true, https("/status/503"), rules()),
            "'" + https("/status/503") + "': HTTP 503 Service Unavailable");
  EXPECT_EQ(openError(true, http("/redirect?to=/status/410"), rules()),
            "'" + http("/redirect?" + kEllipsis) + "': redirect to '" + http("/status/410") +
                "': HTTP 410 Gone");
}

TEST_F(TransferHttpTest, RefusedConnectionFailsAtOpen) {
  json r = rules();
  r["allow"].push_back("http://" + server_ + ":9");
  const std::string error = openError(true, "http://" + server_ + ":9/x.tar", r);
  EXPECT_THAT(error, HasSubstr("'http://" + server_ + ":9/x.tar': connecting to " + server_ +
                               ":9: Connection refused"));
}

TEST_F(TransferHttpTest, ClosingEarlyStopsTheDownloadPromptly) {
  for (const std::string path : {"/endless", "/trickle"}) {
    SCOPED_TRACE(path);
    auto t = open(true, http(path), rules());
    ASSERT_TRUE(t.has_value()) << t.error().message();
    drain((*t)->fd(), std::chrono::milliseconds(200), 0);
    const auto start = Clock::now();
    EXPECT_TRUE((*t)->finish(false).has_value());
    EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(500));
  }
  // Destroyed unfinished (the host gave up): the same, through the destructor.
  auto t = open(true, http("/endless"), rules());
  ASSERT_TRUE(t.has_value()) << t.error().message();
  const auto start = Clock::now();
  t->reset();
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(500));
}

TEST_F(TransferHttpTest, UploadIsPutWithItsLengthAndSha256) {
  const std::string data = fileBytes(2 * 1024 * 1024 + 5);
  const std::string location = "https://alice:s3cret@" + server_ + ":" +
                               std::to_string(kHttpsPort) +
                               "/upload/result.tar.zst?X-Amz-Signature=deadbeef";
  auto t = open(false, location, rules());
  ASSERT_TRUE(t.has_value()) << t.error().message();
  EXPECT_EQ((*t)->format(), "tar.zst");
  EXPECT_EQ((*t)->display(), https("/upload/result.tar.zst?" + kEllipsis));
  ASSERT_TRUE(sendAll((*t)->fd(), data));
  auto done = (*t)->finish(true);
  ASSERT_TRUE(done.has_value()) << done.error().message();

  auto [status, body] = serverGet("/uploaded/result.tar.zst");
  ASSERT_EQ(status, 200) << body;
  const json got = json::parse(body);
  EXPECT_EQ(got["size"], data.size());
  EXPECT_EQ(got["sha256"], sha256Hex(data));
  EXPECT_EQ(got["method"], "PUT");
  EXPECT_EQ(got["user_agent"], "airlock-transfer/1");
  EXPECT_EQ(got["authorization"], "Basic YWxpY2U6czNjcmV0");  // alice:s3cret

  // The format follows the name.
  for (const auto& [name, format] : std::vector<std::pair<std::string, std::string>>{
           {"a.tar", "tar"}, {"a.tgz", "tar.gz"}, {"a.zip", "zip"}, {"a.bin", "tar.gz"}}) {
    auto f = open(false, http("/upload/" + name), rules());
    ASSERT_TRUE(f.has_value()) << f.error().message();
    EXPECT_EQ((*f)->format(), format) << name;
  }
}

TEST_F(TransferHttpTest, UploadFinishFalseSendsNothing) {
  auto t = open(false, http("/upload/discarded.tar"), rules());
  ASSERT_TRUE(t.has_value()) << t.error().message();
  ASSERT_TRUE(sendAll((*t)->fd(), fileBytes(300000)));
  EXPECT_TRUE((*t)->finish(false).has_value());
  EXPECT_EQ(serverGet("/uploaded/discarded.tar").first, 404);
  EXPECT_EQ(requestsSeen().count("PUT /upload/discarded.tar"), 0u);
}

TEST_F(TransferHttpTest, UploadOverMaxBytesFails) {
  auto t = open(false, http("/upload/big.tar"), rules(), 100000);
  ASSERT_TRUE(t.has_value()) << t.error().message();
  sendAll((*t)->fd(), fileBytes(1000000));  // fails (EPIPE) once the plugin stops reading
  auto done = (*t)->finish(true);
  ASSERT_FALSE(done.has_value());
  EXPECT_EQ(done.error().op(),
            "'" + http("/upload/big.tar") + "': more than the transfer limit of 100000 bytes");
  EXPECT_EQ(requestsSeen().count("PUT /upload/big.tar"), 0u);
}

TEST_F(TransferHttpTest, UploadRefusedByTheServerFails) {
  auto t = open(false, http("/status/x.tar"), rules());  // PUT there answers 404
  ASSERT_TRUE(t.has_value()) << t.error().message();
  ASSERT_TRUE(sendAll((*t)->fd(), fileBytes(1000)));
  auto done = (*t)->finish(true);
  ASSERT_FALSE(done.has_value());
  EXPECT_EQ(done.error().op(),
            "'" + http("/status/x.tar") + "': the upload was refused: HTTP 404 Not Found");
}

}  // namespace
}  // namespace airlock::plugin
