#include "supervisor/api/admission.h"

namespace airlock::api {
namespace {

Admit refused(int status, std::string message) {
  Admit a;
  a.status = status;
  a.refusal = std::move(message);
  return a;
}

}  // namespace

Admit Admission::openConnection(uint64_t id, const std::string& client) {
  std::lock_guard lock(mu_);
  Admit admit;
  admit.admitted = true;
  Client& own = clients_[client];
  if (own.connections >= limits_.max_connections_per_client) {
    admit.evict = evictOldestOf(client);
    if (admit.evict == 0) {
      if (own.connections == 0) clients_.erase(client);
      return refused(429, client + " has " + std::to_string(limits_.max_connections_per_client) +
                              " connections open, each with a request in progress "
                              "(server.max_connections_per_client); retry when one ends");
    }
  } else if (connections_.size() >= limits_.max_connections) {
    // The client holding the most connections gives one up, so a flood from one client costs
    // that client first.
    std::string biggest;
    size_t most = 0;
    for (const auto& [name, c] : clients_) {
      if (!c.waiting.empty() && c.connections > most) {
        most = c.connections;
        biggest = name;
      }
    }
    admit.evict = most == 0 ? 0 : evictOldestOf(biggest);
    if (admit.evict == 0) {
      if (clients_[client].connections == 0) clients_.erase(client);
      return refused(503, "the supervisor has " + std::to_string(limits_.max_connections) +
                              " connections open, each with a request in progress "
                              "(server.max_connections); retry later");
    }
  }
  Connection& c = connections_[id];
  c.client = client;
  ++clients_[client].connections;
  markWaiting(id, c);
  return admit;
}

void Admission::closeConnection(uint64_t id) {
  std::lock_guard lock(mu_);
  forget(id);
}

Admit Admission::beginRequest(uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = connections_.find(id);
  if (it == connections_.end()) return Admit{};  // evicted while its header arrived
  Connection& c = it->second;
  Client& client = clients_[c.client];
  if (client.requests >= limits_.max_requests_per_client) {
    return refused(429, c.client + " has " + std::to_string(limits_.max_requests_per_client) +
                            " requests in progress (server.max_requests_per_client); retry "
                            "when one ends");
  }
  if (requests_ >= limits_.max_requests) {
    return refused(503, "the supervisor is answering " + std::to_string(limits_.max_requests) +
                            " requests (server.max_requests); retry later");
  }
  client.waiting.erase({c.waiting_since, id});
  c.waiting_since = 0;
  ++client.requests;
  ++requests_;
  Admit admit;
  admit.admitted = true;
  return admit;
}

void Admission::endRequest(uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = connections_.find(id);
  if (it == connections_.end() || it->second.waiting_since != 0) return;
  --clients_[it->second.client].requests;
  --requests_;
  markWaiting(id, it->second);
}

void Admission::used(uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = connections_.find(id);
  if (it == connections_.end() || it->second.waiting_since == 0) return;
  clients_[it->second.client].waiting.erase({it->second.waiting_since, id});
  markWaiting(id, it->second);
}

size_t Admission::connections() const {
  std::lock_guard lock(mu_);
  return connections_.size();
}

size_t Admission::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

size_t Admission::connectionsOf(const std::string& client) const {
  std::lock_guard lock(mu_);
  auto it = clients_.find(client);
  return it == clients_.end() ? 0 : it->second.connections;
}

size_t Admission::clients() const {
  std::lock_guard lock(mu_);
  return clients_.size();
}

void Admission::markWaiting(uint64_t id, Connection& c) {
  c.waiting_since = ++sequence_;
  clients_[c.client].waiting.insert({c.waiting_since, id});
}

uint64_t Admission::evictOldestOf(const std::string& client) {
  auto it = clients_.find(client);
  if (it == clients_.end() || it->second.waiting.empty()) return 0;
  uint64_t victim = it->second.waiting.begin()->second;
  forget(victim);
  return victim;
}

void Admission::forget(uint64_t id) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  auto owner = clients_.find(it->second.client);
  if (owner != clients_.end()) {
    Client& c = owner->second;
    if (it->second.waiting_since != 0) {
      c.waiting.erase({it->second.waiting_since, id});
    } else {
      --c.requests;  // closed with its request unfinished
      --requests_;
    }
    if (--c.connections == 0) clients_.erase(owner);
  }
  connections_.erase(it);
}

}  // namespace airlock::api
