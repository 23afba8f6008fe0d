// POST /v1/runs: the request body of a one-shot program (docs/api.md, "Runs").
#include <limits>

#include "supervisor/api/json_fields.h"

namespace airlock::api {

namespace {

// Files per request: a run is not a file transfer service. Each file out is staged on the
// host before it is sent back, so there are fewer of those.
constexpr size_t kMaxFilesIn = 256;
constexpr size_t kMaxFilesOut = 64;
constexpr size_t kMaxTransfers = 16;  // each way

// A sandbox path of a file: required, not empty (relative paths are under /home/user).
std::string sandboxPath(Fields& f) {
  auto path = f.str("path");
  if (!path) f.setError("field '" + f.name("path") + "' is required");
  if (path && path->empty()) f.setError("field '" + f.name("path") + "': must not be empty");
  return path.value_or("");
}

void readProgram(Fields& f, sandbox::ProgramSpec& s) {
  auto code = textOrBase64(f, "code", "code_base64");
  const Json* script = f.raw("script");
  if (code && script != nullptr)
    return f.setError("fields 'code' and 'script' are exclusive: give exactly one");
  if (code) {
    s.code = std::move(*code);
    if (s.language.empty())
      f.setError("field 'language' is required with 'code' (a script's extension can name it)");
    return;
  }
  if (script == nullptr) return f.setError("one of the fields 'code' or 'script' is required");
  if (!script->is_object()) return f.typeError("script", "an object", *script);
  Fields sub(*script, "script.");
  auto name = sub.str("name");
  if (!name) {
    sub.setError("field 'script.name' is required");
  } else if (name->empty() || *name == "." || *name == ".." ||
             name->find('/') != std::string::npos || name->size() > 255) {
    sub.setError("field 'script.name': expected a file name (no '/', at most 255 bytes), got '" +
                 quoteKey(*name) + "'");
  }
  auto content = textOrBase64(sub, "content", "content_base64");
  if (!content)
    sub.setError("one of the fields 'script.content' or 'script.content_base64' is required");
  if (auto err = sub.finish()) return f.setError(*err);
  s.script_name = *name;
  s.code = std::move(*content);
}

}  // namespace

SResult<RunRequest> decodeRun(std::string_view body) {
  return decodeObject<RunRequest>(body, false, [](Fields& f, RunRequest& r) {
    sandbox::ProgramSpec& s = r.spec;
    s.profile = f.str("profile").value_or("");
    s.language = f.str("language").value_or("");
    readProgram(f, s);
    s.args = f.stringArray("args").value_or(std::vector<std::string>{});
    s.env = f.stringMap("env").value_or(std::map<std::string, std::string>{});
    for (const auto& [k, v] : s.env) {
      if (k.empty() || k.find('=') != std::string::npos) {
        f.setError("field 'env': '" + quoteKey(k) + "' is not a variable name (empty or has '=')");
        break;
      }
    }
    if (auto t = f.integer("timeout_s", true)) {
      if (*t > std::numeric_limits<uint32_t>::max())
        f.setError("field 'timeout_s': " + std::to_string(*t) + " is too large");
      else
        s.timeout_s = static_cast<uint32_t>(*t);
    }
    if (auto m = f.integer("memory_mb", true)) s.memory_mb = static_cast<uint64_t>(*m);
    s.stdin_data = textOrBase64(f, "stdin", "stdin_base64");
    objectArray(f, "files_in", kMaxFilesIn, "files", [&](Fields& file) {
      sandbox::ProgramFile in;
      in.path = sandboxPath(file);
      auto content = textOrBase64(file, "content", "content_base64");
      if (!content)
        file.setError("one of the fields '" + file.name("content") + "' or '" +
                      file.name("content_base64") + "' is required");
      in.content = content.value_or("");
      s.files_in.push_back(std::move(in));
    });
    objectArray(f, "files_out", kMaxFilesOut, "files",
                [&](Fields& file) { s.files_out.push_back(sandboxPath(file)); });
    // Transfers: a location a transfer plugin takes, and a sandbox directory.
    auto transfers = [&](const char* key, const char* where,
                         std::vector<sandbox::ProgramTransfer>& to) {
      objectArray(f, key, kMaxTransfers, "transfers", [&](Fields& t) {
        sandbox::ProgramTransfer x;
        x.path = sandboxPath(t);
        auto location = t.str(where);
        if (!location || location->empty())
          t.setError("field '" + t.name(where) + "' is required: a URL or hostdir:ROOT/path");
        x.location = location.value_or("");
        to.push_back(std::move(x));
      });
    };
    transfers("transfers_in", "source", s.transfers_in);
    transfers("transfers_out", "dest", s.transfers_out);
    r.stream = f.boolean("stream").value_or(true);
  });
}

}  // namespace airlock::api
