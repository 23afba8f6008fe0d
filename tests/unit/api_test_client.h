// A small blocking HTTP/1.1 client over raw sockets for the API tests: enough to send exact
// bytes (including malformed ones) and to read responses chunk by chunk.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace airlock::testing {

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lowercase names
  std::string body;
  bool ok = false;  // a whole response was read
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

class HttpClient {
 public:
  static std::optional<HttpClient> unix(const std::string& path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd);
      return std::nullopt;
    }
    return HttpClient(fd);
  }
  static std::optional<HttpClient> tcp(uint16_t port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd);
      return std::nullopt;
    }
    return HttpClient(fd);
  }

  HttpClient(HttpClient&& o) noexcept : fd_(std::exchange(o.fd_, -1)), buf_(std::move(o.buf_)) {}
  HttpClient& operator=(HttpClient&&) = delete;
  ~HttpClient() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }
  void closeNow() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  bool sendRaw(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  bool sendRequest(const std::string& method, const std::string& target, const std::string& body,
                   const std::string& extra_headers = "") {
    std::string req = method + " " + target + " HTTP/1.1\r\nHost: airlock\r\n" + extra_headers;
    if (!body.empty() || method == "POST" || method == "PUT") {
      req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
             "\r\n";
    }
    req += "\r\n" + body;
    return sendRaw(req);
  }

  HttpResponse request(const std::string& method, const std::string& target,
                       const std::string& body = "", const std::string& extra_headers = "") {
    if (!sendRequest(method, target, body, extra_headers)) return {};
    return readResponse();
  }

  // Reads the status line and headers.
  bool readHead(HttpResponse& r, int timeout_ms = 10000) {
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill(timeout_ms)) return false;
    }
    std::string head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    size_t line_end = head.find("\r\n");
    std::string status_line = head.substr(0, line_end);
    if (status_line.size() < 12) return false;
    r.status = std::stoi(status_line.substr(9, 3));
    size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      size_t e = head.find("\r\n", pos);
      if (e == std::string::npos) e = head.size();
      std::string line = head.substr(pos, e - pos);
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (auto& c : name) c = static_cast<char>(std::tolower(c));
        std::string value = line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        r.headers[name] = value;
      }
      pos = e + 2;
    }
    return true;
  }

  // One chunk of a chunked body: its bytes, "" for the last chunk, nullopt on error/timeout.
  std::optional<std::string> readChunk(int timeout_ms = 10000) {
    size_t e;
    while ((e = buf_.find("\r\n")) == std::string::npos) {
      if (!fill(timeout_ms)) return std::nullopt;
    }
    size_t size = std::stoul(buf_.substr(0, e), nullptr, 16);
    buf_.erase(0, e + 2);
    while (buf_.size() < size + 2) {
      if (!fill(timeout_ms)) return std::nullopt;
    }
    std::string data = buf_.substr(0, size);
    buf_.erase(0, size + 2);
    return data;
  }

  HttpResponse readResponse(int timeout_ms = 10000) {
    HttpResponse r;
    if (!readHead(r, timeout_ms)) return r;
    if (r.status == 100) {  // 100 Continue: the real answer follows
      return readResponse(timeout_ms);
    }
    if (r.header("transfer-encoding") == "chunked") {
      while (true) {
        auto chunk = readChunk(timeout_ms);
        if (!chunk) return r;
        if (chunk->empty()) break;
        r.body += *chunk;
      }
    } else if (!r.header("content-length").empty()) {
      size_t len = std::stoul(r.header("content-length"));
      while (buf_.size() < len) {
        if (!fill(timeout_ms)) return r;
      }
      r.body = buf_.substr(0, len);
      buf_.erase(0, len);
    }
    r.ok = true;
    return r;
  }

  // True when the server closed the connection within timeout_ms.
  bool closedByServer(int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) == 1) {
        char c;
        ssize_t n = recv(fd_, &c, 1, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN)) return true;
        buf_ += c;
      }
    }
    return false;
  }

 private:
  explicit HttpClient(int fd) : fd_(fd) {}

  bool fill(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1) return false;
    char tmp[65536];
    ssize_t n = recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string buf_;
};

}  // namespace airlock::testing
