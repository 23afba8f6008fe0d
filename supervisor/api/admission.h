// Who may hold a connection and who may start a request: the API server's limits, as plain
// bookkeeping with no sockets, so every rule is unit-tested on its own (admission_test.cc).
//
// The rule that keeps a flood from locking everyone out: a connection waiting for a request
// (idle keep-alive, or a header still arriving) costs no thread, and it is the first thing given
// up when the server is full. A new connection over a limit evicts the oldest waiting connection
// of the client holding the most (or, over its own limit, its own oldest; oldest by last use), so
// one client holding hundreds of idle sockets cannot keep another out. Only connections with a
// request being answered are never evicted; when those alone fill a limit, the newcomer is refused
// with the limit named: 429 for a client's own limit, 503 for the server's.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>

namespace airlock::api {

struct AdmissionLimits {
  size_t max_connections = 4096;             // open connections, every client together
  size_t max_connections_per_client = 1024;  // open connections of one client
  size_t max_requests = 512;                 // requests being answered (streams included)
  size_t max_requests_per_client = 256;      // requests of one client being answered
};

// The answer to a new connection or request.
struct Admit {
  bool admitted = false;
  uint64_t evict = 0;   // admitted by evicting this waiting connection (0: none); close it
  int status = 0;       // refused: 429 (the client's own limit) or 503 (the server's)
  std::string refusal;  // refused: the message, naming the limit and its policy key
};

class Admission {
 public:
  explicit Admission(AdmissionLimits limits) : limits_(limits) {}

  // A connection `id` (never 0, never reused) from `client` ("uid 1000", "tcp 127.0.0.1").
  // Admitted ones start out waiting for a request.
  Admit openConnection(uint64_t id, const std::string& client);
  // The connection is gone. No-op for an id already evicted or closed.
  void closeConnection(uint64_t id);

  // A request header is complete on `id`: a request slot, and the connection is no longer
  // evictable. Refused when the connection was evicted meanwhile (status 0: just close it) or a
  // request limit is full.
  Admit beginRequest(uint64_t id);
  // Its answer is done; the connection waits for the next request (evictable again).
  void endRequest(uint64_t id);
  // A request on `id` was answered without a request slot (GET /healthz): it counts as the
  // connection's latest use, so eviction takes connections idle for longer first.
  void used(uint64_t id);

  size_t connections() const;
  size_t requests() const;
  size_t connectionsOf(const std::string& client) const;
  size_t clients() const;  // clients with a connection open

 private:
  struct Connection {
    std::string client;
    uint64_t waiting_since = 0;  // a sequence number; 0 while a request is being answered
  };
  struct Client {
    size_t connections = 0;
    size_t requests = 0;
    std::set<std::pair<uint64_t, uint64_t>> waiting;  // (waiting_since, id), oldest first
  };

  void markWaiting(uint64_t id, Connection& c);
  // Removes `id` and returns it, the oldest waiting connection of `client`; 0 when none.
  uint64_t evictOldestOf(const std::string& client);
  void forget(uint64_t id);

  const AdmissionLimits limits_;
  mutable std::mutex mu_;
  std::map<uint64_t, Connection> connections_;
  std::map<std::string, Client> clients_;
  size_t requests_ = 0;
  uint64_t sequence_ = 0;
};

}  // namespace airlock::api
