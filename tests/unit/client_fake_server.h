// A tiny HTTP server for the client tests: listens on a temporary Unix socket (or loopback TCP)
// in its own thread, records every request and answers from per-route handlers, which can
// stream chunked NDJSON in several flushes.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace airlock::testing {

struct RecordedRequest {
  std::string method;
  std::string target;                          // path and query, as sent
  std::string path;                            // without the query
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;                            // empty when the route consumed it as a stream
  uint64_t body_bytes = 0;

  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? "" : it->second;
  }
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

// Writes one answer on a connection (implemented with Beast in the .cc).
class Responder {
 public:
  virtual ~Responder() = default;
  virtual void send(int status, const std::string& body,
                    const std::string& content_type = "application/json") = 0;
  void json(int status, const nlohmann::json& body) { send(status, body.dump()); }
  void error(int status, const std::string& code, const std::string& message) {
    json(status, {{"error", {{"code", code}, {"message", message}}}});
  }
  // A chunked answer: each chunk() is written and flushed at once.
  virtual void beginChunked(int status,
                            const std::string& content_type = "application/x-ndjson") = 0;
  virtual void chunk(std::string_view data) = 0;
  virtual void endChunked() = 0;
  // A fixed-length answer written in pieces.
  virtual void beginFixed(int status, uint64_t length, const std::string& content_type) = 0;
  virtual void raw(std::string_view data) = 0;
};

class FakeServer {
 public:
  using Handler = std::function<void(const RecordedRequest&, Responder&)>;
  // Receives the request body in pieces instead of RecordedRequest::body.
  using BodySink = std::function<void(std::string_view piece)>;

  explicit FakeServer(bool tcp = false);
  ~FakeServer();
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  std::string url() const;  // unix:///tmp/.../airlock.sock or http://127.0.0.1:PORT
  std::string socketPath() const { return socket_path_; }

  // `path` excludes the query. Unknown routes answer 404 not_found.
  void on(const std::string& method, const std::string& path, Handler handler);
  void onBody(const std::string& method, const std::string& path, BodySink sink);
  // Answers as soon as the request head is read, without reading the body, then closes.
  void onHead(const std::string& method, const std::string& path, Handler handler);
  void json(const std::string& method, const std::string& path, int status,
            const nlohmann::json& body);

  std::vector<RecordedRequest> requests() const;
  RecordedRequest last() const;

 private:
  struct Impl;
  void serve(int fd);
  void acceptLoop();

  TempDir dir_;
  std::string socket_path_;
  uint16_t port_ = 0;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_ = false;
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::vector<std::thread> connections_;
  std::vector<RecordedRequest> requests_;
  std::map<std::string, Handler> handlers_;
  std::map<std::string, BodySink> sinks_;
  std::map<std::string, Handler> head_handlers_;
};

}  // namespace airlock::testing
