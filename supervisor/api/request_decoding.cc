#include "supervisor/api/request_decoding.h"

#include <array>
#include <cctype>

#include "supervisor/api/json_fields.h"

namespace airlock::api {

namespace {

// nlohmann's parser is iterative, but destroying or dumping a value recurses; bodies nested
// deeper than any real request are refused before parsing.
constexpr int kMaxDepth = 64;
// Host directories per sandbox: each is a mount the backend makes at start.
constexpr size_t kMaxMounts = 16;

std::optional<std::string> checkDepth(std::string_view body) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) {
        return "malformed JSON body: nested deeper than " + std::to_string(kMaxDepth) +
               " levels at byte " + std::to_string(i + 1);
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::nullopt;
}

}  // namespace

SResult<Json> parseJsonObject(std::string_view body, bool empty_is_object) {
  size_t first = body.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    if (empty_is_object) return Json::object();
    return badRequest("request body is empty; expected a JSON object");
  }
  if (auto err = checkDepth(body)) return badRequest(*err);
  Json j;
  try {
    j = Json::parse(body.begin(), body.end());
  } catch (const Json::parse_error& e) {
    // what() is "[json.exception.parse_error.101] parse error at line 1, column 9: ...".
    std::string what = e.what();
    auto pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    return badRequest("malformed JSON body: " + what);
  } catch (const std::exception& e) {
    return badRequest(std::string("malformed JSON body: ") + e.what());
  }
  if (!j.is_object()) {
    return badRequest(std::string("request body: expected a JSON object, got ") + j.type_name());
  }
  return j;
}

SResult<sandbox::SandboxSpec> decodeCreateSandbox(std::string_view body) {
  return decodeObject<sandbox::SandboxSpec>(body, true, [](Fields& f, sandbox::SandboxSpec& s) {
    s.profile = f.str("profile").value_or("");
    s.language = f.str("language").value_or("");
    s.isolation = f.str("isolation").value_or("");
    s.name = f.str("name").value_or("");
    s.env = f.stringMap("env").value_or(std::map<std::string, std::string>{});
    s.metadata = f.stringMap("metadata").value_or(std::map<std::string, std::string>{});
    s.keep_alive_s = f.integer("keep_alive_s", true);
    s.lifetime_s = f.integer("lifetime_s", true);
    s.persistent = f.boolean("persistent").value_or(false);
    if (s.persistent && s.name.empty()) f.setError("field 'persistent': needs a 'name'");
    objectArray(f, "mounts", kMaxMounts, "mounts", [&](Fields& m) {
      sandbox::MountSpec spec;
      auto source = m.str("source");
      if (!source || source->empty())
        m.setError("field '" + m.name("source") + "' is required: \"hostdir:ROOT/sub/dir\"");
      spec.source = source.value_or("");
      spec.path = m.str("path").value_or("");
      spec.writable = m.boolean("writable").value_or(false);
      s.mounts.push_back(std::move(spec));
    });
  });
}

SResult<KeepAliveRequest> decodeKeepAlive(std::string_view body) {
  return decodeObject<KeepAliveRequest>(body, true, [](Fields& f, KeepAliveRequest& r) {
    r.keep_alive_s = f.integer("keep_alive_s", true);
    r.lifetime_s = f.integer("lifetime_s", true);
  });
}

SResult<std::vector<std::string>> decodeNetworkRules(std::string_view body) {
  return decodeObject<std::vector<std::string>>(
      body, false, [](Fields& f, std::vector<std::string>& rules) {
        auto given = f.stringArray("rules");
        if (!given) {
          f.setError("field 'rules' is required: an array of rule strings ([] removes every rule)");
          return;
        }
        rules = std::move(*given);
      });
}

SResult<std::string> decodeReviewDecision(std::string_view body) {
  return decodeObject<std::string>(
      body, true, [](Fields& f, std::string& reason) { reason = f.str("reason").value_or(""); });
}

SResult<CommandRequest> decodeRunCommand(std::string_view body) {
  return decodeObject<CommandRequest>(body, false, [](Fields& f, CommandRequest& r) {
    auto argv = f.stringArray("argv");
    auto cmd = f.str("cmd");
    if (argv && cmd) {
      f.setError("fields 'argv' and 'cmd' are exclusive: give exactly one");
    } else if (!argv && !cmd) {
      f.setError("one of the fields 'argv' or 'cmd' is required");
    } else if (argv && argv->empty()) {
      f.setError("field 'argv': must not be empty");
    } else if (argv && (*argv)[0].empty()) {
      f.setError("field 'argv[0]': must not be empty");
    } else if (cmd && cmd->empty()) {
      f.setError("field 'cmd': must not be empty");
    }
    if (argv) r.spec.argv = std::move(*argv);
    if (cmd) r.spec.cmd = std::move(*cmd);
    r.spec.env = f.stringMap("env").value_or(std::map<std::string, std::string>{});
    r.spec.cwd = f.str("cwd").value_or("");
    if (!r.spec.cwd.empty() && r.spec.cwd.front() != '/') {
      f.setError("field 'cwd': must be an absolute path, got '" + quoteKey(r.spec.cwd) + "'");
    }
    r.spec.stdin_data = textOrBase64(f, "stdin", "stdin_base64").value_or("");
    r.spec.timeout_s = f.positiveNumber("timeout_s");
    r.spec.background = f.boolean("background").value_or(false);
    r.stream = f.boolean("stream").value_or(true);
  });
}

SResult<StdinRequest> decodeStdin(std::string_view body) {
  return decodeObject<StdinRequest>(body, false, [](Fields& f, StdinRequest& r) {
    r.data = textOrBase64(f, "data", "data_base64").value_or("");
    r.eof = f.boolean("eof").value_or(false);
  });
}

SResult<SignalRequest> decodeSignal(std::string_view body) {
  return decodeObject<SignalRequest>(body, false, [](Fields& f, SignalRequest& r) {
    const Json* v = f.raw("signal");
    if (v == nullptr) return f.setError("field 'signal' is required");
    std::optional<int> signo;
    if (v->is_string()) {
      signo = parseSignal(v->get_ref<const std::string&>());
      if (!signo) {
        return f.setError("field 'signal': unknown signal '" +
                          quoteKey(v->get_ref<const std::string&>()) + "'");
      }
    } else if (v->is_number_integer()) {
      int64_t n = v->is_number_unsigned()
                      ? static_cast<int64_t>(std::min<uint64_t>(v->get<uint64_t>(), 1000))
                      : v->get<int64_t>();
      if (n < 1 || n > 64) {
        return f.setError("field 'signal': " + std::to_string(n) + " is not a signal number");
      }
      signo = static_cast<int>(n);
    } else {
      return f.typeError("signal", "a signal name or number", *v);
    }
    r.signo = *signo;
  });
}

SResult<CodeRequest> decodeRunCode(std::string_view body) {
  return decodeObject<CodeRequest>(body, false, [](Fields& f, CodeRequest& r) {
    auto code = f.str("code", true);
    if (!code) f.setError("field 'code' is required");
    r.spec.code = code.value_or("");
    r.spec.language = f.str("language").value_or("");
    r.spec.context_id = f.str("context_id").value_or("");
    r.spec.timeout_s = f.positiveNumber("timeout_s");
    r.spec.env = f.stringMap("env").value_or(std::map<std::string, std::string>{});
    for (const auto& [name, value] : r.spec.env) {
      // Names a shell can export, so that every language applies the same set.
      bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
      for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
      if (!ok) {
        f.setError("field 'env': '" + quoteKey(name) +
                   "' is not a variable name (letters, digits and '_', not starting with a digit)");
        break;
      }
    }
    r.stream = f.boolean("stream").value_or(true);
  });
}

SResult<ContextRequest> decodeCreateContext(std::string_view body) {
  return decodeObject<ContextRequest>(body, true, [](Fields& f, ContextRequest& r) {
    r.language = f.str("language").value_or("");
    r.cwd = f.str("cwd").value_or("");
    if (!r.cwd.empty() && r.cwd.front() != '/')
      f.setError("field 'cwd': must be an absolute path, got '" + quoteKey(r.cwd) + "'");
  });
}

SResult<TransferRequest> decodeTransfer(std::string_view body) {
  return decodeObject<TransferRequest>(body, false, [](Fields& f, TransferRequest& r) {
    const auto direction = f.str("direction");
    if (!direction) return f.setError("field 'direction' is required: \"in\" or \"out\"");
    if (*direction != "in" && *direction != "out")
      return f.setError("field 'direction': expected \"in\" or \"out\", got '" +
                        quoteKey(*direction) + "'");
    r.spec.in = *direction == "in";
    const char* where = r.spec.in ? "source" : "dest";
    const char* other = r.spec.in ? "dest" : "source";
    const auto location = f.str(where);
    if (f.raw(other) != nullptr)
      return f.setError("field '" + std::string(other) + "': a transfer " + *direction +
                        " names its '" + where + "'");
    if (!location || location->empty())
      return f.setError("field '" + std::string(where) + "' is required for direction \"" +
                        *direction + "\"");
    r.spec.location = *location;
    requireAbsolutePath(f, "path", f.str("path"), r.spec.path);
    if (auto s = f.boolean("stream")) r.stream = *s;
  });
}

SResult<WriteFileRequest> decodeWriteFile(std::string_view body) {
  return decodeObject<WriteFileRequest>(body, false, [](Fields& f, WriteFileRequest& r) {
    requireAbsolutePath(f, "path", f.str("path"), r.path);
    auto content = textOrBase64(f, "content", "content_base64");
    if (!content) f.setError("one of the fields 'content' or 'content_base64' is required");
    r.content = content.value_or("");
    const Json* mode = f.raw("mode");
    if (mode != nullptr) {
      std::optional<uint32_t> m;
      if (mode->is_string()) {
        m = parseOctalMode(mode->get_ref<const std::string&>());
      } else if (mode->is_number_integer()) {
        int64_t n = mode->is_number_unsigned()
                        ? static_cast<int64_t>(std::min<uint64_t>(mode->get<uint64_t>(), 077777))
                        : mode->get<int64_t>();
        if (n >= 0 && n <= 07777) m = static_cast<uint32_t>(n);
      } else {
        return f.typeError("mode", "an octal string or an integer", *mode);
      }
      if (!m) return f.setError("field 'mode': expected permission bits within 07777");
      r.mode = *m;
    }
  });
}

SResult<ReadFileRequest> decodeReadFile(std::string_view body) {
  return decodeObject<ReadFileRequest>(body, false, [](Fields& f, ReadFileRequest& r) {
    requireAbsolutePath(f, "path", f.str("path"), r.path);
    auto enc = f.str("encoding");
    if (enc && *enc != "utf-8" && *enc != "base64") {
      f.setError("field 'encoding': expected 'utf-8' or 'base64', got '" + quoteKey(*enc) + "'");
    }
    r.base64 = enc && *enc == "base64";
  });
}

SResult<MkdirRequest> decodeMkdir(std::string_view body) {
  return decodeObject<MkdirRequest>(body, false, [](Fields& f, MkdirRequest& r) {
    requireAbsolutePath(f, "path", f.str("path"), r.path);
    r.parents = f.boolean("parents").value_or(false);
  });
}

SResult<RemoveRequest> decodeRemove(std::string_view body) {
  return decodeObject<RemoveRequest>(body, false, [](Fields& f, RemoveRequest& r) {
    requireAbsolutePath(f, "path", f.str("path"), r.path);
    r.recursive = f.boolean("recursive").value_or(false);
  });
}

SResult<RenameRequest> decodeRename(std::string_view body) {
  return decodeObject<RenameRequest>(body, false, [](Fields& f, RenameRequest& r) {
    requireAbsolutePath(f, "from", f.str("from"), r.from);
    requireAbsolutePath(f, "to", f.str("to"), r.to);
  });
}

std::optional<int> parseSignal(std::string_view text) {
  static constexpr std::array<std::pair<const char*, int>, 31> kNames = {{
      {"HUP", 1},   {"INT", 2},     {"QUIT", 3},  {"ILL", 4},     {"TRAP", 5},  {"ABRT", 6},
      {"BUS", 7},   {"FPE", 8},     {"KILL", 9},  {"USR1", 10},   {"SEGV", 11}, {"USR2", 12},
      {"PIPE", 13}, {"ALRM", 14},   {"TERM", 15}, {"STKFLT", 16}, {"CHLD", 17}, {"CONT", 18},
      {"STOP", 19}, {"TSTP", 20},   {"TTIN", 21}, {"TTOU", 22},   {"URG", 23},  {"XCPU", 24},
      {"XFSZ", 25}, {"VTALRM", 26}, {"PROF", 27}, {"WINCH", 28},  {"IO", 29},   {"PWR", 30},
      {"SYS", 31},
  }};
  if (text.empty() || text.size() > 12) return std::nullopt;
  if (text.find_first_not_of("0123456789") == std::string_view::npos) {
    int n = 0;
    for (char c : text) n = n * 10 + (c - '0');
    if (n >= 1 && n <= 64) return n;
    return std::nullopt;
  }
  if (text.substr(0, 3) == "SIG") text.remove_prefix(3);
  for (const auto& [name, num] : kNames) {
    if (text == name) return num;
  }
  return std::nullopt;
}

std::optional<uint32_t> parseOctalMode(std::string_view text) {
  if (text.substr(0, 2) == "0o") text.remove_prefix(2);
  if (text.empty() || text.size() > 6) return std::nullopt;
  uint32_t m = 0;
  for (char c : text) {
    if (c < '0' || c > '7') return std::nullopt;
    m = m * 8 + static_cast<uint32_t>(c - '0');
  }
  if (m > 07777) return std::nullopt;
  return m;
}

}  // namespace airlock::api
