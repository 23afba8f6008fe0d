#include "netns_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "test_support.h"

extern char** environ;

namespace airlock::testing {

std::unique_ptr<NetnsServer> NetnsServer::start(const std::vector<std::string>& argv, uint16_t port,
                                                std::string* why) {
  // Names and addresses unique per process and per server within it, so tests running side by
  // side (and two servers of one test) never collide.
  static std::atomic<int> serial{0};
  const int pid = static_cast<int>(::getpid());
  const int n = serial++;
  std::unique_ptr<NetnsServer> s(new NetnsServer());
  s->port_ = port;
  s->ns_ = "airlock-e-" + std::to_string(pid) + "-" + std::to_string(n);
  const std::string tag = std::to_string((pid * 8 + n) % 10000000);
  s->veth_host_ = "aeh" + tag;
  const std::string veth_ns = "aen" + tag;
  const int base = ((pid * 8 + n) % 16384) * 4;
  const std::string net = "10.214." + std::to_string(base >> 8) + ".";
  s->address_ = net + std::to_string((base & 255) + 2);
  auto ip = [&](const std::vector<std::string>& args) {
    std::vector<std::string> full = {"/usr/bin/ip"};
    full.insert(full.end(), args.begin(), args.end());
    auto r = runCommand(full, "", 20);
    if (r.exit_code != 0 && why->empty()) *why = "ip " + args[0] + ": " + r.err;
    return r.exit_code == 0;
  };
  if (!ip({"netns", "add", s->ns_})) return nullptr;
  s->netns_made_ = true;
  if (!ip({"link", "add", s->veth_host_, "type", "veth", "peer", "name", veth_ns}) ||
      !ip({"link", "set", veth_ns, "netns", s->ns_}) ||
      !ip({"addr", "add", net + std::to_string((base & 255) + 1) + "/30", "dev", s->veth_host_}) ||
      !ip({"link", "set", s->veth_host_, "up"}) ||
      !ip({"-n", s->ns_, "addr", "add", s->address_ + "/30", "dev", veth_ns}) ||
      !ip({"-n", s->ns_, "link", "set", veth_ns, "up"}) ||
      !ip({"-n", s->ns_, "link", "set", "lo", "up"}))
    return nullptr;

  std::vector<std::string> full = {"/usr/bin/ip", "netns", "exec", s->ns_};
  for (std::string a : argv) {
    for (size_t at; (at = a.find("{addr}")) != std::string::npos;) a.replace(at, 6, s->address_);
    full.push_back(std::move(a));
  }
  std::vector<char*> args;
  for (auto& a : full) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  const int rc = posix_spawn(&s->pid_, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    s->pid_ = -1;
    *why = "posix_spawn ip netns exec: error " + std::to_string(rc);
    return nullptr;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!s->listening()) {
    if (std::chrono::steady_clock::now() > deadline) {
      *why = "the server in " + s->ns_ + " never listened on port " + std::to_string(port);
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return s;
}

void NetnsServer::stopServer() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

NetnsServer::~NetnsServer() {
  stopServer();
  if (netns_made_) {
    runCommand({"/usr/bin/ip", "netns", "del", ns_}, "", 10);
    runCommand({"/usr/bin/ip", "link", "del", veth_host_}, "", 10);
  }
}

std::string NetnsServer::url(const std::string& path) const {
  return "http://" + address_ + ":" + std::to_string(port_) + path;
}

bool NetnsServer::listening() const {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port_);
  ::inet_pton(AF_INET, address_.c_str(), &sa.sin_addr);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  ::close(fd);
  return ok;
}

}  // namespace airlock::testing
