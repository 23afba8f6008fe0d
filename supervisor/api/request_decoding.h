// Strict decoders for the JSON request bodies of docs/api.md.
//
// Request bodies come from API clients, which may be other tenants' agents: every decoder takes
// raw bytes and either returns the typed request or a kBadRequest error naming the field and
// what was wrong ("field 'timeout_s': expected a number, got string"). Unknown fields are errors
// so that typos do not pass silently; null counts as absent for optional fields. Nothing here
// throws or crashes on any input (tests/unit/api_decoding_fuzz_test.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "supervisor/sandbox/service.h"

namespace airlock::api {

using sandbox::Json;
using sandbox::SResult;

// Parses a request body that must be one JSON object. An empty body is `{}` when
// `empty_is_object` (routes whose fields are all optional).
SResult<Json> parseJsonObject(std::string_view body, bool empty_is_object);

SResult<sandbox::SandboxSpec> decodeCreateSandbox(std::string_view body);

struct KeepAliveRequest {
  std::optional<int64_t> keep_alive_s;
  std::optional<int64_t> lifetime_s;
};
SResult<KeepAliveRequest> decodeKeepAlive(std::string_view body);

// PUT /v1/sandboxes/{sb}/network: {"rules": ["allow tcp 10.0.0.0/8 443", ...]} (required; []
// removes every rule). The rules' grammar is checked by the service (400 naming the rule).
SResult<std::vector<std::string>> decodeNetworkRules(std::string_view body);

// POST /v1/reviews/{rid}/approve|reject: {"reason": "..."}, all optional.
SResult<std::string> decodeReviewDecision(std::string_view body);

struct CommandRequest {
  sandbox::CommandSpec spec;
  bool stream = true;
};
SResult<CommandRequest> decodeRunCommand(std::string_view body);

struct StdinRequest {
  std::string data;
  bool eof = false;
};
SResult<StdinRequest> decodeStdin(std::string_view body);

struct SignalRequest {
  int signo = 0;
};
SResult<SignalRequest> decodeSignal(std::string_view body);

struct CodeRequest {
  sandbox::CodeSpec spec;
  bool stream = true;
};
SResult<CodeRequest> decodeRunCode(std::string_view body);

struct ContextRequest {
  std::string language;
  std::string cwd;  // "": the home directory
};
SResult<ContextRequest> decodeCreateContext(std::string_view body);

struct WriteFileRequest {
  std::string path;
  std::string content;
  uint32_t mode = 0644;
};
SResult<WriteFileRequest> decodeWriteFile(std::string_view body);

// POST /v1/sandboxes/{sb}/transfers: {"direction": "in", "source": URL, "path": DIR} or
// {"direction": "out", "dest": URL, "path": DIR}; "stream" (default true) as for commands.
struct TransferRequest {
  sandbox::TransferSpec spec;
  bool stream = true;
};
SResult<TransferRequest> decodeTransfer(std::string_view body);

struct ReadFileRequest {
  std::string path;
  bool base64 = false;  // "encoding": "base64"
};
SResult<ReadFileRequest> decodeReadFile(std::string_view body);

struct MkdirRequest {
  std::string path;
  bool parents = false;
};
SResult<MkdirRequest> decodeMkdir(std::string_view body);

struct RemoveRequest {
  std::string path;
  bool recursive = false;
};
SResult<RemoveRequest> decodeRemove(std::string_view body);

struct RenameRequest {
  std::string from;
  std::string to;
};
SResult<RenameRequest> decodeRename(std::string_view body);

// POST /v1/runs (run_decoding.cc): one program in a sandbox of its own, as `airlock run` asks.
struct RunRequest {
  sandbox::ProgramSpec spec;
  bool stream = true;
};
SResult<RunRequest> decodeRun(std::string_view body);

// "SIGTERM", "TERM", "15" → 15. nullopt for unknown names and numbers outside 1..64.
std::optional<int> parseSignal(std::string_view text);
// "0644", "644", "0o644" → 0644. nullopt unless octal digits within 07777.
std::optional<uint32_t> parseOctalMode(std::string_view text);

}  // namespace airlock::api
