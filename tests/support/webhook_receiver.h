// A loopback HTTP receiver for the audit webhooks' tests: records each POST (target, the
// X-Airlock-* headers, body) and answers the first `fail_first` of them 503 with Retry-After: 0,
// the rest 200. Written on plain sockets so the tests share no HTTP code with what they check.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace airlock::testing {

class WebhookReceiver {
 public:
  struct Request {
    std::string target, event, delivery, signature, body;
    int answered = 0;  // the status we answered
  };

  explicit WebhookReceiver(int fail_first = 0) : fail_first_(fail_first) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(listen_fd_, 64);
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
    thread_ = std::thread([this] { loop(); });
  }
  ~WebhookReceiver() {
    uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof one);
    thread_.join();
    ::close(listen_fd_);
    ::close(stop_fd_);
  }

  uint16_t port() const { return port_; }
  std::string url(const std::string& path = "/hook") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  std::vector<Request> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  // Waits until pred holds for the requests so far (woken by each request), or the timeout.
  bool waitFor(const std::function<bool(const std::vector<Request>&)>& pred,
               std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(requests_); });
  }

 private:
  static std::string header(const std::string& head, std::string name) {
    std::string lower = head;
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t at = lower.find("\r\n" + name + ":");
    if (at == std::string::npos) return "";
    size_t start = at + 2 + name.size() + 1;
    size_t end = head.find("\r\n", start);
    std::string v = head.substr(start, end - start);
    v.erase(0, v.find_first_not_of(' '));
    return v;
  }

  void serve(int fd) {
    std::string raw;
    char buf[8192];
    size_t head_end;
    while ((head_end = raw.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) return;
      raw.append(buf, static_cast<size_t>(n));
    }
    std::string head = raw.substr(0, head_end + 2);
    size_t want = std::stoul("0" + header(head, "Content-Length"));
    std::string body = raw.substr(head_end + 4);
    while (body.size() < want) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) return;
      body.append(buf, static_cast<size_t>(n));
    }
    Request r;
    size_t sp1 = head.find(' '), sp2 = head.find(' ', sp1 + 1);
    r.target = head.substr(sp1 + 1, sp2 - sp1 - 1);
    r.event = header(head, "X-Airlock-Event");
    r.delivery = header(head, "X-Airlock-Delivery");
    r.signature = header(head, "X-Airlock-Signature");
    r.body = body;
    {
      std::lock_guard lock(mu_);
      r.answered = static_cast<int>(requests_.size()) < fail_first_ ? 503 : 200;
    }
    const std::string answer =
        r.answered == 503
            ? "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 0\r\nContent-Length: 0\r\n"
              "Connection: close\r\n\r\n"
            : "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    (void)!::write(fd, answer.data(), answer.size());
    {
      std::lock_guard lock(mu_);
      requests_.push_back(std::move(r));
    }
    cv_.notify_all();
  }

  void loop() {
    while (true) {
      pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) continue;
      if (fds[1].revents != 0) return;
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      timeval limit{.tv_sec = 5, .tv_usec = 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
      serve(fd);
      ::close(fd);
    }
  }

  int fail_first_;
  int listen_fd_ = -1, stop_fd_ = -1;
  uint16_t port_ = 0;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<Request> requests_;
  std::thread thread_;
};

}  // namespace airlock::testing
