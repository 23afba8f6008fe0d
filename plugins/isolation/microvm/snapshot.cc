#include "snapshot.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>

#include "artifacts.h"

namespace airlock::isolation::microvm {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

int msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(left.count());
}

// The "status" of a query-status or query-migrate reply, or "" when it has none (or is not an
// object): the callers say what an empty status means for them.
std::string statusOf(const Json& reply) {
  return reply.is_object() && reply.contains("status") && reply["status"].is_string()
             ? reply["status"].get<std::string>()
             : "";
}

}  // namespace

std::string snapshotPath(const std::string& cache_dir, const Boot& boot) {
  Boot b = boot;
  b.console_log = "console";  // per sandbox: host files and ids, not the guest's state
  b.qemu_log.clear();
  b.runas_uid = b.runas_gid = -1;
  for (auto& s : b.shares) s.path = "share";  // a staging point per sandbox; the device is kept
  std::vector<std::string> parts = {"snapshot-v1", fileIdentity(b.qemu)};
  for (auto& a : qemuArgv(b)) parts.push_back(std::move(a));
  return cache_dir + "/snapshot-" + cacheKey(parts) + ".vmstate";
}

Result<std::string> Qmp::readLine(Clock::time_point deadline) {
  for (;;) {
    if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    if (buffer_.size() > (1 << 20)) return fail("qmp: a reply of over 1 MiB");
    pollfd p{fd_, POLLIN, 0};
    int n = ::poll(&p, 1, msLeft(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sysError("poll", "qmp");
    if (n == 0) return Unexpected(Error("qmp: no reply in time", "", ETIMEDOUT));
    char buf[4096];
    ssize_t got = ::read(fd_, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return sysError("read", "qmp");
    if (got == 0) return fail("qmp: QEMU closed its monitor");
    buffer_.append(buf, static_cast<size_t>(got));
  }
}

Result<> Qmp::handshake(Clock::time_point deadline) {
  auto greeting = readLine(deadline);
  if (!greeting) return Unexpected(greeting.error());
  if (greeting->find("\"QMP\"") == std::string::npos)
    return fail("qmp: not QEMU's greeting: " + greeting->substr(0, 200));
  auto r = execute(R"({"execute":"qmp_capabilities"})", deadline);
  if (!r) return Unexpected(r.error());
  return {};
}

Result<std::string> Qmp::execute(const std::string& command, Clock::time_point deadline,
                                 int pass_fd) {
  const std::string line = command + "\n";
  iovec iov{const_cast<char*>(line.data()), line.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (pass_fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  // One short line on a socket with room: a partial send would be a broken monitor.
  ssize_t sent;
  do {
    sent = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent != static_cast<ssize_t>(line.size())) return sysError("sendmsg", "qmp");
  for (;;) {
    auto reply = readLine(deadline);
    if (!reply) return Unexpected(reply.error());
    Json j = Json::parse(*reply, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return fail("qmp: not a JSON object: " + reply->substr(0, 200));
    if (j.contains("event")) continue;  // asynchronous: STOP, RESUME, MIGRATION...
    if (j.contains("error")) {
      const Json& e = j["error"];
      return fail("qmp: " + command + ": " +
                  (e.is_object() && e.contains("desc") && e["desc"].is_string()
                       ? e["desc"].get<std::string>()
                       : reply->substr(0, 200)));
    }
    if (j.contains("return")) return j["return"].dump();
  }
}

Result<> awaitRunning(Qmp& qmp, Clock::time_point deadline) {
  if (auto r = qmp.handshake(deadline); !r) return r;
  for (;;) {
    auto r = qmp.execute(R"({"execute":"query-status"})", deadline);
    if (!r) return Unexpected(r.error());
    const std::string status = statusOf(Json::parse(*r, nullptr, false));
    if (status == "running") return {};
    if (status == "paused") {
      // Loaded: the snapshot was taken of a stopped guest, which is how it arrives.
      if (auto c = qmp.execute(R"({"execute":"cont"})", deadline); !c) return Unexpected(c.error());
      continue;
    }
    if (status != "inmigrate" && status != "prelaunch")
      return fail("the guest is " + (status.empty() ? std::string("in no state") : status) +
                  " instead of running");
    if (msLeft(deadline) == 0)
      return Unexpected(Error("the snapshot did not load in time", "", ETIMEDOUT));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

Result<uint64_t> saveSnapshot(Qmp& qmp, const std::string& path, Clock::time_point deadline) {
  const std::string tmp = path + ".tmp";
  UniqueFd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!out) return sysError("open", tmp);
  // QEMU writes into a pipe and the plugin into the file: QEMU's own writes to files are capped
  // by RLIMIT_FSIZE (the console's cap), and a snapshot is tens of MiB.
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return sysError("pipe2", "snapshot");
  UniqueFd from_qemu(p[0]), to_file(p[1]);
  auto fail_with = [&](const Error& e) -> Result<uint64_t> {
    ::unlink(tmp.c_str());
    // The guest must run on whatever went wrong: it is a sandbox being created.
    (void)qmp.execute(R"({"execute":"migrate_cancel"})", deadline);
    (void)qmp.execute(R"({"execute":"cont"})", deadline);
    return Unexpected(e);
  };
  for (const char* command :
       {R"({"execute":"stop"})",
        // QEMU's default migration rate (128 MiB/s) is a link's, not a local pipe's.
        R"({"execute":"migrate-set-parameters","arguments":{"max-bandwidth":17179869184}})"}) {
    if (auto r = qmp.execute(command, deadline); !r) return fail_with(r.error());
  }
  if (auto r = qmp.execute(R"({"execute":"getfd","arguments":{"fdname":"airlock-snapshot"}})",
                           deadline, to_file.get());
      !r)
    return fail_with(r.error());
  to_file.reset();  // QEMU's copy is the only writer: its close after the migration is our EOF
  if (auto r = qmp.execute(R"({"execute":"migrate","arguments":{"uri":"fd:airlock-snapshot"}})",
                           deadline);
      !r)
    return fail_with(r.error());
  uint64_t bytes = 0;
  char buf[1 << 16];
  for (;;) {
    pollfd pf{from_qemu.get(), POLLIN, 0};
    int n = ::poll(&pf, 1, msLeft(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail_with(Error("the snapshot did not arrive in time", tmp, ETIMEDOUT));
    ssize_t got = ::read(from_qemu.get(), buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return fail_with(Error("read", "snapshot pipe", errno));
    if (got == 0) break;
    for (ssize_t done = 0; done < got;) {
      ssize_t w = ::write(out.get(), buf + done, static_cast<size_t>(got - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return fail_with(Error("write", tmp, errno));
      done += w;
    }
    bytes += static_cast<uint64_t>(got);
  }
  for (;;) {
    auto r = qmp.execute(R"({"execute":"query-migrate"})", deadline);
    if (!r) return fail_with(r.error());
    Json j = Json::parse(*r, nullptr, false);
    const std::string status = statusOf(j);
    if (status == "completed") break;
    if (status == "failed" || status == "cancelled" || status.empty())
      return fail_with(
          Error("the migration into the snapshot " + (status.empty() ? "said nothing" : status) +
                (j.is_object() && j.contains("error-desc") && j["error-desc"].is_string()
                     ? ": " + j["error-desc"].get<std::string>()
                     : std::string())));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  out.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail_with(Error("rename", tmp, errno));
  if (auto r = qmp.execute(R"({"execute":"cont"})", deadline); !r) return Unexpected(r.error());
  return bytes;
}

}  // namespace airlock::isolation::microvm
