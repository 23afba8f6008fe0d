// A sandbox::Service for the API fuzzer: every call succeeds at once with a small canned answer,
// so a fuzzed request goes all the way through decoding, the handler and the response encoding
// without sandboxes, threads or waiting. Uploads read the whole request body (chunked or not)
// through the ByteSource, as the real service does.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "supervisor/sandbox/service.h"

namespace airlock::fuzz {

using sandbox::Caller;
using sandbox::Json;
using sandbox::SResult;

// Yields its events in order, never waiting, then is done.
class CannedStream final : public sandbox::EventStream {
 public:
  explicit CannedStream(std::vector<Json> events) : events_(std::move(events)) {}
  std::optional<Json> next(sandbox::Clock::time_point) override {
    if (at_ == events_.size()) return std::nullopt;
    return events_[at_++];
  }
  bool done() const override { return at_ == events_.size(); }

 private:
  std::vector<Json> events_;
  size_t at_ = 0;
};

inline std::unique_ptr<sandbox::EventStream> commandEvents() {
  return std::make_unique<CannedStream>(
      std::vector<Json>{{{"type", "start"}, {"command_id", "cmd-1"}, {"pid", 7}},
                        {{"type", "stdout"}, {"data", "out\n"}},
                        {{"type", "stderr"}, {"data_b64", "AAEC"}},
                        {{"type", "exit"}, {"exit_code", 0}, {"duration_ms", 3}}});
}

inline std::unique_ptr<sandbox::EventStream> codeEvents() {
  return std::make_unique<CannedStream>(
      std::vector<Json>{{{"type", "stdout"}, {"data", "4\n"}},
                        {{"type", "result"}, {"data", {{"text/plain", "4"}}}},
                        {{"type", "end"}, {"duration_ms", 1}}});
}

inline std::unique_ptr<sandbox::EventStream> transferEvents() {
  return std::make_unique<CannedStream>(std::vector<Json>{
      {{"type", "progress"}, {"transfer_id", "tr-1"}, {"bytes", 10}, {"rate_bps", 100}},
      {{"type", "transfer"}, {"transfer_id", "tr-1"}, {"state", "done"}, {"bytes", 10}}});
}

class StubService final : public sandbox::Service {
 public:
  SResult<sandbox::SandboxInfo> createSandbox(const Caller& caller,
                                              const sandbox::SandboxSpec& spec) override {
    sandbox::SandboxInfo info = sandboxInfo(caller, "sb-1");
    info.profile = spec.profile;
    info.metadata = spec.metadata;
    info.mounts = spec.mounts;
    return info;
  }
  SResult<std::vector<sandbox::SandboxInfo>> listSandboxes(
      const Caller& caller, const std::map<std::string, std::string>&) override {
    return std::vector<sandbox::SandboxInfo>{sandboxInfo(caller, "sb-1")};
  }
  SResult<sandbox::SandboxInfo> getSandbox(const Caller& caller, const std::string& sb) override {
    return sandboxInfo(caller, sb);
  }
  SResult<> destroySandbox(const Caller&, const std::string&) override { return {}; }
  SResult<sandbox::SandboxInfo> keepAlive(const Caller& caller, const std::string& sb,
                                          std::optional<int64_t> keep_alive_s,
                                          std::optional<int64_t> lifetime_s) override {
    sandbox::SandboxInfo info = sandboxInfo(caller, sb);
    info.keep_alive_s = keep_alive_s.value_or(0);
    info.lifetime_s = lifetime_s.value_or(0);
    return info;
  }
  SResult<Json> getNetwork(const Caller&, const std::string&) override {
    return Json{{"mode", "deny"}, {"rules", Json::array()}};
  }
  SResult<Json> setNetwork(const Caller&, const std::string&,
                           const std::vector<std::string>& rules) override {
    return Json{{"mode", "deny"}, {"rules", rules}};
  }
  SResult<std::unique_ptr<sandbox::EventStream>> runCommand(const Caller&, const std::string&,
                                                            const sandbox::CommandSpec&) override {
    return commandEvents();
  }
  SResult<std::vector<sandbox::CommandInfo>> listCommands(const Caller&,
                                                          const std::string&) override {
    sandbox::CommandInfo c;
    c.command_id = "cmd-1";
    c.argv = {"ls"};
    c.state = "exited";
    c.exit_code = 0;
    return std::vector<sandbox::CommandInfo>{c};
  }
  SResult<std::unique_ptr<sandbox::EventStream>> attachCommand(const Caller&, const std::string&,
                                                               const std::string&) override {
    return commandEvents();
  }
  SResult<> sendStdin(const Caller&, const std::string&, const std::string&, std::string,
                      bool) override {
    return {};
  }
  SResult<> signalCommand(const Caller&, const std::string&, const std::string&, int) override {
    return {};
  }
  SResult<sandbox::ContextInfo> createContext(const Caller&, const std::string&,
                                              const std::string& language,
                                              const std::string&) override {
    return sandbox::ContextInfo{"ctx-1", language, "idle", 0, 0};
  }
  SResult<std::vector<sandbox::ContextInfo>> listContexts(const Caller&,
                                                          const std::string&) override {
    return std::vector<sandbox::ContextInfo>{{"ctx-1", "python", "idle", 0, 0}};
  }
  SResult<sandbox::ContextInfo> restartContext(const Caller&, const std::string&,
                                               const std::string& context_id) override {
    return sandbox::ContextInfo{context_id, "python", "idle", 0, 0};
  }
  SResult<> destroyContext(const Caller&, const std::string&, const std::string&) override {
    return {};
  }
  SResult<std::unique_ptr<sandbox::EventStream>> runCode(const Caller&, const std::string&,
                                                         const sandbox::CodeSpec&) override {
    return codeEvents();
  }
  SResult<sandbox::FileEntry> writeFile(const Caller&, const std::string&, const std::string& path,
                                        uint32_t mode, const sandbox::ByteSource& source) override {
    auto size = drain(source);
    if (!size) return std::unexpected(size.error());
    return sandbox::FileEntry{path, "file", *size, mode, 0};
  }
  SResult<> readFile(const Caller&, const std::string&, const std::string&,
                     const std::function<void(uint64_t size)>& on_size,
                     const sandbox::ByteSink& sink) override {
    on_size(6);
    sink("abc");
    sink("\x00\xff\n");
    return {};
  }
  SResult<std::vector<sandbox::FileEntry>> listFiles(const Caller&, const std::string&,
                                                     const std::string&) override {
    return std::vector<sandbox::FileEntry>{{"a.txt", "file", 3, 0644, 0}, {"d", "dir", 0, 0755, 0}};
  }
  SResult<sandbox::FileEntry> statFile(const Caller&, const std::string&,
                                       const std::string& path) override {
    return sandbox::FileEntry{path, "file", 3, 0644, 0};
  }
  SResult<> makeDirectory(const Caller&, const std::string&, const std::string&, bool) override {
    return {};
  }
  SResult<> removeFile(const Caller&, const std::string&, const std::string&, bool) override {
    return {};
  }
  SResult<> renameFile(const Caller&, const std::string&, const std::string&,
                       const std::string&) override {
    return {};
  }
  SResult<std::unique_ptr<sandbox::EventStream>> startTransfer(
      const Caller&, const std::string&, const sandbox::TransferSpec&) override {
    return transferEvents();
  }
  SResult<Json> listTransfers(const Caller&, const std::string&) override {
    return Json{{"transfers", Json::array()}};
  }
  SResult<> cancelTransfer(const Caller&, const std::string&, const std::string&) override {
    return {};
  }
  SResult<Json> uploadArchive(const Caller&, const std::string&, const std::string&,
                              const sandbox::ByteSource& source) override {
    auto size = drain(source);
    if (!size) return std::unexpected(size.error());
    return Json{{"transfer_id", "tr-2"}, {"bytes", *size}};
  }
  SResult<> downloadArchive(const Caller&, const std::string&, const std::string&,
                            const std::string&, const sandbox::ByteSink& sink) override {
    sink(std::string_view("ustar\0\0", 7));
    return {};
  }
  SResult<std::vector<sandbox::WorkspaceInfo>> listWorkspaces(const Caller&) override {
    return std::vector<sandbox::WorkspaceInfo>{{"ws", 1 << 20, 4096, 0, false}};
  }
  SResult<> deleteWorkspace(const Caller&, const std::string&) override { return {}; }
  SResult<Json> listReviews(const Caller&) override { return Json{{"reviews", Json::array()}}; }
  SResult<> decideReview(const Caller&, const std::string&, bool, const std::string&) override {
    return {};
  }
  SResult<std::unique_ptr<sandbox::EventStream>> runOneShot(const Caller&,
                                                            const sandbox::ProgramSpec&) override {
    return std::make_unique<CannedStream>(std::vector<Json>{
        {{"type", "stdout"}, {"data", "hi\n"}},
        {{"type", "result"}, {"record", {{"exit_code", 0}}}, {"files_out", Json::array()}}});
  }
  Json health() override { return Json{{"status", "ok"}, {"sandboxes", 1}, {"draining", false}}; }
  std::string metricsText() override { return "airlock_sandboxes 1\n"; }

 private:
  static sandbox::SandboxInfo sandboxInfo(const Caller& caller, const std::string& id) {
    sandbox::SandboxInfo info;
    info.id = id;
    info.tenant = caller.tenant;
    info.profile = "default";
    info.language = "python";
    info.isolation = "namespaces";
    info.state = "running";
    return info;
  }

  // Reads a request body to its end, as an upload does.
  static SResult<uint64_t> drain(const sandbox::ByteSource& source) {
    char buf[4096];
    uint64_t total = 0;
    while (true) {
      auto n = source(buf, sizeof buf);
      if (!n) return std::unexpected(n.error());
      if (*n == 0) return total;
      total += *n;
    }
  }
};

}  // namespace airlock::fuzz
