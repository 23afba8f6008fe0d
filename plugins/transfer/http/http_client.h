// The network side of airlock.transfer.http: checking a URL against the rules, connecting
// (TCP, then TLS that always verifies the peer and its name), the request, redirects, the body.
// Each Download or Upload has its own io_context, so transfers never share state; the plugin
// class (http.cc) only adds the fds and threads the host sees.
//
// Every error is a PluginError whose message starts with the location's display form in single
// quotes and names what refused it: a rule (transfer.http.allow, a protected range, a timeout)
// or the server (its status).
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rules.h"
#include "url.h"

namespace airlock::transfer_http {

inline constexpr const char* kUserAgent = "airlock-transfer/1";

// Where `url` may be connected to: checks transfer.http.allow, resolves the host once and keeps
// only the addresses no protected range refuses (connect only to these; never resolve again).
// Throws PluginError starting with `context` ("'<display>': ").
std::vector<boost::asio::ip::tcp::endpoint> checkedEndpoints(const Rules& rules, const Url& url,
                                                             const std::string& context);

class Download {
 public:
  // Connects, sends the GET, follows redirects as the rules allow (each hop checked again) and
  // reads the final response's header. Throws PluginError: a refused URL, DNS, a refused
  // connection, TLS, a non-2xx status, a Content-Length over max_bytes (0: no cap).
  Download(const Rules& rules, std::string_view location, uint64_t max_bytes);
  ~Download();
  Download(const Download&) = delete;
  Download& operator=(const Download&) = delete;

  const std::string& display() const;
  std::optional<uint64_t> contentLength() const;

  // Copies the body into `fd` (a connected stream socket, taken over and closed) until the body
  // ends, the reader closes its end, a limit or timeout is hit, or stop() is called. Call once,
  // from one thread. Returns the error, or "" when the whole body was written.
  std::string pump(int fd);
  // Thread-safe: makes pump() return promptly (or at once, if it has not started).
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class Upload {
 public:
  // Checks the destination now, before anything is packed: transfer.http.allow and the
  // addresses, which it keeps for send().
  Upload(const Rules& rules, std::string_view location);
  ~Upload();
  Upload(const Upload&) = delete;
  Upload& operator=(const Upload&) = delete;

  const std::string& display() const;
  const Url& url() const;

  // Sends `size` bytes of `fd` (read from offset 0) with transfer.http.method_out and a
  // Content-Length; follows no redirect. Throws PluginError on a failure or a non-2xx answer.
  void send(int fd, uint64_t size);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace airlock::transfer_http
