// airlock.transfer.http: archives from and to http(s) URLs, for `--in https://...:DIR` and
// `--out DIR:https://...` (presigned object-store URLs included).
//
// In: open() does the whole exchange up to the final response's header (redirects included),
// so every refusal (a URL outside transfer.http.allow, a protected address, DNS, TLS, a non-2xx
// status) fails open() before the sandbox sees a byte. A thread then streams the body into a
// socketpair whose other end the host reads; a failure midway is kept for finish(true), which
// makes the host discard what was unpacked.
//
// Out: open() checks the URL and its addresses before the host packs anything. A thread drains
// the packed archive into an unnamed spool file (transfer.http.spool_dir), and finish(true)
// uploads it with a Content-Length, as presigned URLs need; finish(false) discards it.
//
// The network logic is in http_client.cc, the URL and address rules in url.cc and
// address_check.cc; this file only adds the fds and threads.
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <airlock/plugin.hpp>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "http_client.h"
#include "rules.h"
#include "url.h"

namespace {

using airlock::sdk::PluginError;
using airlock::sdk::TransferPlugin;
namespace th = airlock::transfer_http;

std::string inQuotes(const std::string& s) { return "'" + s + "'"; }

[[noreturn]] void sysFail(const std::string& display, const std::string& what) {
  const int e = errno;
  throw PluginError(e, inQuotes(display) + ": " + what + ": " + std::strerror(e));
}

// A fd closed on scope exit unless released.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = other.release();
    }
    return *this;
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// [0] for the host, [1] for the plugin's thread.
void streamPair(const std::string& display, Fd& host, Fd& mine) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) sysFail(display, "socketpair");
  host = Fd(sv[0]);
  mine = Fd(sv[1]);
}

class InStream final : public TransferPlugin::Stream {
 public:
  InStream(std::unique_ptr<th::Download> download, Fd mine) : download_(std::move(download)) {
    const int fd = mine.get();
    thread_ = std::thread([this, fd] { error_ = download_->pump(fd); });
    mine.release();  // pump() owns it now
  }
  ~InStream() override { stop(); }

  void finish(bool ok) override {
    if (!ok) return stop();
    // The host closed its end before finishing: the pump ends on its own, at the body's end or
    // as it sees the reader gone.
    if (thread_.joinable()) thread_.join();
    if (!error_.empty()) throw PluginError(EIO, inQuotes(download_->display()) + ": " + error_);
  }

 private:
  void stop() {
    if (!thread_.joinable()) return;
    download_->stop();
    thread_.join();
  }

  std::unique_ptr<th::Download> download_;
  std::string error_;
  std::thread thread_;  // last: joined before the members it uses go
};

class OutStream final : public TransferPlugin::Stream {
 public:
  OutStream(std::unique_ptr<th::Upload> upload, Fd mine, Fd spool, uint64_t max_bytes)
      : upload_(std::move(upload)),
        sock_(mine.release()),
        spool_(spool.release()),
        max_bytes_(max_bytes),
        stop_(::eventfd(0, EFD_CLOEXEC)) {
    if (stop_.get() < 0) sysFail(upload_->display(), "eventfd");
    thread_ = std::thread([this] { drain(); });
  }
  ~OutStream() override { stop(); }

  void finish(bool ok) override {
    if (!ok) return stop();  // the unnamed spool file goes with its fd
    if (thread_.joinable()) thread_.join();
    if (!error_.empty())
      throw PluginError(error_code_, inQuotes(upload_->display()) + ": " + error_);
    upload_->send(spool_.get(), bytes_);
  }

 private:
  void stop() {
    if (!thread_.joinable()) return;
    const uint64_t one = 1;
    (void)!::write(stop_.get(), &one, sizeof one);
    thread_.join();
  }

  void fail(int code, std::string message) {
    error_code_ = code;
    error_ = std::move(message);
  }

  // Until the host's EOF, a cap, a write error or stop(). Closing our end when done makes any
  // further write of the host's fail (EPIPE) rather than block.
  void drain() {
    std::vector<char> buf(64 * 1024);
    for (;;) {
      pollfd fds[2] = {{sock_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        fail(errno, std::string("poll: ") + std::strerror(errno));
        break;
      }
      if (fds[1].revents != 0) {
        fail(ECANCELED, "cancelled");
        break;
      }
      const ssize_t n = ::recv(sock_.get(), buf.data(), buf.size(), MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        fail(errno, std::string("reading the archive from the host: ") + std::strerror(errno));
        break;
      }
      if (n == 0) break;
      if (max_bytes_ != 0 && bytes_ + static_cast<uint64_t>(n) > max_bytes_) {
        fail(EFBIG, "more than the transfer limit of " + std::to_string(max_bytes_) + " bytes");
        break;
      }
      if (!spoolAll(buf.data(), static_cast<size_t>(n))) break;
      bytes_ += static_cast<uint64_t>(n);
    }
    ::close(sock_.release());
  }

  bool spoolAll(const char* data, size_t size) {
    while (size > 0) {
      const ssize_t w = ::write(spool_.get(), data, size);
      if (w < 0) {
        if (errno == EINTR) continue;
        fail(errno, std::string("spooling the archive (transfer.http.spool_dir): ") +
                        std::strerror(errno));
        return false;
      }
      data += w;
      size -= static_cast<size_t>(w);
    }
    return true;
  }

  std::unique_ptr<th::Upload> upload_;
  Fd sock_, spool_;
  uint64_t max_bytes_;
  Fd stop_;
  uint64_t bytes_ = 0;
  int error_code_ = 0;
  std::string error_;
  std::thread thread_;  // last: joined before the members it uses go
};

// An unnamed file in `dir`: nothing is left behind whatever happens to the process.
Fd openSpool(const std::string& dir, const std::string& display) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    // A file system without O_TMPFILE: a named file, unlinked at once.
    std::string name = dir + "/airlock-upload-XXXXXX";
    fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd >= 0) ::unlink(name.c_str());
  }
  if (fd < 0) sysFail(display, "transfer.http.spool_dir " + inQuotes(dir) + ": cannot spool there");
  return Fd(fd);
}

class Http final : public TransferPlugin {
 public:
  using TransferPlugin::TransferPlugin;
  static constexpr const char* kPrefixes[] = {"https://", "http://", nullptr};

  Opened open(const Request& r) override {
    const std::string display = th::redact(r.location);
    th::Rules rules;
    try {
      rules = th::parseRules(r.rules_json);
    } catch (const std::invalid_argument& e) {
      throw PluginError(EINVAL, inQuotes(display) + ": " + e.what());
    }
    Opened o;
    o.display = display;
    Fd host, mine;
    if (r.direction == Direction::kIn) {
      auto download = std::make_unique<th::Download>(rules, r.location, r.max_bytes);
      o.size = download->contentLength().value_or(0);
      streamPair(display, host, mine);
      o.stream = std::make_unique<InStream>(std::move(download), std::move(mine));
    } else if (r.direction == Direction::kOut) {
      auto upload = std::make_unique<th::Upload>(rules, r.location);
      o.format = th::formatOf(upload->url().path);
      Fd spool = openSpool(rules.spool_dir, display);
      streamPair(display, host, mine);
      o.stream = std::make_unique<OutStream>(std::move(upload), std::move(mine), std::move(spool),
                                             r.max_bytes);
    } else {
      throw PluginError(EINVAL, inQuotes(display) + ": an unknown transfer direction");
    }
    o.fd = host.release();
    return o;
  }
};

}  // namespace

AIRLOCK_TRANSFER_PLUGIN(Http, "airlock.transfer.http", "1.0.0")
