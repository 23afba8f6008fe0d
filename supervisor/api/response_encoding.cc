#include "supervisor/api/response_encoding.h"

#include "supervisor/encoding/base64.h"

namespace airlock::api {

using encoding::base64Decode;
using encoding::base64Encode;
using encoding::isValidUtf8;
namespace {

// The bytes of a stdout/stderr event: "data" text or "data_base64".
std::string eventBytes(const Json& event) {
  auto it = event.find("data");
  if (it != event.end() && it->is_string()) return it->get<std::string>();
  it = event.find("data_base64");
  if (it != event.end() && it->is_string()) {
    return base64Decode(it->get_ref<const std::string&>()).value_or("");
  }
  return {};
}

std::string eventType(const Json& event) {
  auto it = event.find("type");
  return it != event.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Json valueOr(const Json& obj, const char* key, Json fallback) {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(key);
  return it != obj.end() ? *it : fallback;
}

}  // namespace

std::string dumpJson(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

namespace {

// JSON string escaping for text already known to be UTF-8: only '"', '\\' and control bytes
// change; runs of everything else are copied whole.
void appendEscaped(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  size_t run = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 15];
    }
  }
  out.append(s.data() + run, s.size() - run);
}

}  // namespace

std::string eventLine(const Json& event) {
  // stdout/stderr text events are most of a stream's bytes; nlohmann's generic escaper (which
  // re-validates UTF-8 byte by byte) was most of the supervisor's CPU for large outputs. Their
  // text was validated by the service, so only JSON escaping is left to do.
  if (event.is_object() && event.size() == 2) {
    auto type = event.find("type");
    auto data = event.find("data");
    if (type != event.end() && data != event.end() && data->is_string() &&
        (*type == "stdout" || *type == "stderr")) {
      const auto& text = data->get_ref<const std::string&>();
      std::string line;
      line.reserve(text.size() + text.size() / 8 + 32);
      line += *type == "stdout" ? R"({"type":"stdout","data":")" : R"({"type":"stderr","data":")";
      appendEscaped(line, text);
      line += "\"}\n";
      return line;
    }
  }
  return dumpJson(event) + "\n";
}

namespace {

std::string frame(char kind, std::string_view payload) {
  std::string out;
  out.reserve(5 + payload.size());
  const auto n = static_cast<uint32_t>(payload.size());
  out += kind;
  for (int shift : {24, 16, 8, 0}) out += static_cast<char>((n >> shift) & 0xff);
  out += payload;
  return out;
}

}  // namespace

std::string eventFrame(const Json& event) {
  if (event.is_object() && event.size() == 2) {
    auto type = event.find("type");
    if (type != event.end() && (*type == "stdout" || *type == "stderr")) {
      const char kind = *type == "stdout" ? 'o' : 'e';
      if (auto data = event.find("data"); data != event.end() && data->is_string())
        return frame(kind, data->get_ref<const std::string&>());
      if (auto b64 = event.find("data_base64"); b64 != event.end() && b64->is_string())
        if (auto bytes = encoding::base64Decode(b64->get_ref<const std::string&>()))
          return frame(kind, *bytes);
    }
  }
  return frame('j', dumpJson(event));
}

std::string errorBody(const sandbox::ServiceError& error) {
  Json body = {
      {"error", {{"code", sandbox::errorCodeName(error.code)}, {"message", error.message}}}};
  if (!error.review.is_null()) body["error"]["review"] = error.review;
  return dumpJson(body);
}

Json encodeSandbox(const sandbox::SandboxInfo& s) {
  Json mounts = Json::array();
  for (const auto& m : s.mounts)
    mounts.push_back({{"source", m.source}, {"path", m.path}, {"writable", m.writable}});
  return Json{{"id", s.id},
              {"node", s.node.empty() ? Json(nullptr) : Json(s.node)},
              {"name", s.name},
              {"tenant", s.tenant},
              {"profile", s.profile},
              {"language", s.language},
              {"isolation", s.isolation},
              {"state", s.state},
              {"metadata", s.metadata},
              {"persistent", s.persistent},
              {"created_at", s.created_at},
              {"last_active_at", s.last_active_at},
              {"keep_alive_s", s.keep_alive_s},
              {"idle_expires_at", s.idle_expires_at},
              {"lifetime_s", s.lifetime_s},
              {"ends_at", s.ends_at},
              {"commands_running", s.commands_running},
              {"contexts", s.contexts},
              {"mounts", std::move(mounts)},
              {"current_execution", s.current_execution},
              {"recent_denials", {{"review", s.review_denials}}}};
}

Json encodeCommand(const sandbox::CommandInfo& c) {
  Json j = {{"command_id", c.command_id},
            {"argv", c.argv},
            {"pid", c.pid},
            {"state", c.state},
            {"background", c.background},
            {"started_at", c.started_at},
            {"exit_code", nullptr},
            {"signal", nullptr}};
  if (c.exit_code) j["exit_code"] = *c.exit_code;
  if (c.signal) j["signal"] = *c.signal;
  if (!c.ended_by.empty()) j["ended_by"] = c.ended_by;
  return j;
}

Json encodeWorkspace(const sandbox::WorkspaceInfo& w) {
  return {{"name", w.name},
          {"size_bytes", w.size_bytes},
          {"used_bytes", w.used_bytes},
          {"modified_at", w.modified_at},
          {"in_use", w.in_use}};
}

Json encodeContext(const sandbox::ContextInfo& c) {
  return Json{{"context_id", c.context_id}, {"language", c.language}, {"state", c.state},
              {"created_at", c.created_at}, {"runs", c.runs},         {"cwd", c.cwd}};
}

Json encodeFileEntry(const sandbox::FileEntry& e, bool with_path) {
  Json j;
  if (with_path) {
    j["path"] = e.name;
    auto slash = e.name.find_last_of('/');
    j["name"] = slash == std::string::npos ? e.name : e.name.substr(slash + 1);
  } else {
    j["name"] = e.name;
  }
  j["type"] = e.type;
  j["size"] = e.size;
  j["mode"] = e.mode;
  j["mtime_ms"] = e.mtime_ms;
  return j;
}

void putText(Json& doc, const std::string& key, std::string_view bytes) {
  if (isValidUtf8(bytes)) {
    doc[key] = std::string(bytes);
  } else {
    doc[key + "_base64"] = base64Encode(bytes);
  }
}

void CommandAggregate::add(const Json& event) {
  std::string type = eventType(event);
  if (type == "start") {
    command_id_ = valueOr(event, "command_id", nullptr);
  } else if (type == "stdout") {
    stdout_ += eventBytes(event);
  } else if (type == "stderr") {
    stderr_ += eventBytes(event);
  } else if (type == "exit") {
    exit_ = event;
    saw_exit_ = true;
  }
}

Json CommandAggregate::document() const {
  Json doc = {{"command_id", command_id_},
              {"exit_code", valueOr(exit_, "exit_code", nullptr)},
              {"signal", valueOr(exit_, "signal", 0)},
              {"timed_out", valueOr(exit_, "timed_out", false)}};
  putText(doc, "stdout", stdout_);
  putText(doc, "stderr", stderr_);
  doc["stdout_truncated"] = valueOr(exit_, "stdout_truncated", false);
  doc["stderr_truncated"] = valueOr(exit_, "stderr_truncated", false);
  doc["duration_ms"] = valueOr(exit_, "duration_ms", 0);
  if (exit_.contains("review")) doc["review"] = exit_["review"];
  if (exit_.contains("audit")) doc["audit"] = exit_["audit"];
  // Why the command counts as failed whatever its exit code (an audit that failed closed).
  if (exit_.contains("error")) doc["error"] = exit_["error"];
  return doc;
}

void CodeAggregate::add(const Json& event) {
  std::string type = eventType(event);
  if (type == "stdout") {
    stdout_ += eventBytes(event);
  } else if (type == "stderr") {
    stderr_ += eventBytes(event);
  } else if (type == "result" || type == "display") {
    results_.push_back(valueOr(event, "data", Json::object()));
  } else if (type == "error") {
    error_ = event;
    error_.erase("type");
  } else if (type == "end") {
    end_ = event;
    saw_end_ = true;
  }
}

Json CodeAggregate::document() const {
  Json doc = {{"status", valueOr(end_, "status", "error")}};
  putText(doc, "stdout", stdout_);
  putText(doc, "stderr", stderr_);
  doc["results"] = results_;
  doc["error"] = error_;
  doc["duration_ms"] = valueOr(end_, "duration_ms", 0);
  doc["context_id"] = valueOr(end_, "context_id", nullptr);
  doc["context_restarted"] = valueOr(end_, "context_restarted", false);
  doc["execution_count"] = valueOr(end_, "execution_count", nullptr);
  if (end_.contains("review")) doc["review"] = end_["review"];
  if (end_.contains("audit")) doc["audit"] = end_["audit"];
  return doc;
}

void RunAggregate::add(const Json& event) {
  if (eventType(event) != "result") return;
  result_ = event;
  result_.erase("type");
  saw_result_ = true;
}

}  // namespace airlock::api
