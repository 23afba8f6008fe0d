#include "supervisor/mcp/sandbox_tools.h"
#include "supervisor/log/log.h"

#include <algorithm>
#include <iostream>

#include "supervisor/encoding/base64.h"
#include "supervisor/mcp/tool_catalog.h"

namespace airlock::mcp {

namespace {

using sdk::ErrorKind;

constexpr size_t kMaxStreamText = 64 * 1024;     // per stream, so one call cannot flood the model
constexpr uint64_t kMaxReadBytes = 16ull << 20;  // read_file answers in one JSON-RPC message
constexpr const char* kHome = "/home/user";

Json textContent(const std::string& text) { return {{"type", "text"}, {"text", text}}; }

Json toolResult(Json content, bool is_error) {
  return {{"content", std::move(content)}, {"isError", is_error}};
}

Json errorResult(const std::string& text) {
  return toolResult(Json::array({textContent(text)}), true);
}

std::string capped(const std::string& text) {
  if (text.size() <= kMaxStreamText) return text;
  return text.substr(0, kMaxStreamText) + "\n[... " + std::to_string(text.size() - kMaxStreamText) +
         " more bytes not shown]";
}

void appendSection(std::string& out, const std::string& title, const std::string& body) {
  if (body.empty()) return;
  if (!out.empty()) out += "\n";
  out += title + ":\n" + capped(body);
  if (out.back() != '\n') out += "\n";
}

std::string stringArg(const Json& args, const char* key, const std::string& fallback = "") {
  auto it = args.find(key);
  return it != args.end() && it->is_string() ? it->get<std::string>() : fallback;
}

std::optional<double> numberArg(const Json& args, const char* key) {
  auto it = args.find(key);
  if (it == args.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string mimeTypeOf(const std::string& path) {
  static const std::map<std::string, std::string> kTypes = {
      {".png", "image/png"},
      {".jpg", "image/jpeg"},
      {".jpeg", "image/jpeg"},
      {".gif", "image/gif"},
      {".svg", "image/svg+xml"},
      {".pdf", "application/pdf"},
      {".zip", "application/zip"},
      {".gz", "application/gzip"},
      {".json", "application/json"},
      {".csv", "text/csv"},
      {".parquet", "application/vnd.apache.parquet"}};
  auto dot = path.rfind('.');
  if (dot != std::string::npos && path.find('/', dot) == std::string::npos) {
    std::string ext = path.substr(dot);
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (auto it = kTypes.find(ext); it != kTypes.end()) return it->second;
  }
  return "application/octet-stream";
}

}  // namespace

std::string describeError(const sdk::Error& error) {
  if (error.kind() == ErrorKind::kDeniedByReview && error.review()) {
    const auto& r = *error.review();
    std::string who = "reviewer '" + (r.reviewer.empty() ? std::string("?") : r.reviewer) + "'";
    if (!r.rule.empty()) who += ", rule '" + r.rule + "'";
    return "Denied by airlock's review (" + who +
           "): " + (r.reason.empty() ? std::string("no reason given") : r.reason) +
           ". Nothing was run. Change the code so it does not need what the rule forbids.";
  }
  return error.message();
}

struct SandboxTools::Target {
  sdk::Sandbox* session = nullptr;        // one of this session's sandboxes
  std::optional<sdk::Sandbox> connected;  // or one made elsewhere, addressed by id or name
  std::string note;                       // said before the tool's own output
  sdk::Sandbox& get() { return session != nullptr ? *session : *connected; }
};

SandboxTools::SandboxTools(SessionOptions options) : options_(std::move(options)) {}

SandboxTools::~SandboxTools() { endAll(); }

void SandboxTools::endAll() {
  auto end = [](sdk::Sandbox& sb) {
    if (auto r = sb.kill(); !r)
      log::warn("mcp.sandbox_end", {{"sandbox", sb.id()}, {"error", r.error().message()}});
    else
      log::info("mcp.sandbox_end", {{"sandbox", sb.id()}});
  };
  if (default_) end(*default_);
  default_.reset();
  for (auto& [id, sb] : created_) end(sb);
  created_.clear();
}

void SandboxTools::detachAll() {
  if (default_) default_->detach();
  default_.reset();
  for (auto& [id, sb] : created_) sb.detach();
  created_.clear();
}

sdk::Result<SandboxTools::Target> SandboxTools::resolve(const Json& args) {
  Target t;
  std::string wanted = stringArg(args, "sandbox_id");
  if (!wanted.empty()) {
    auto matches = [&](const sdk::Sandbox& sb) {
      return sb.id() == wanted || (!sb.info().name.empty() && sb.info().name == wanted);
    };
    if (default_ && matches(*default_)) {
      t.session = &*default_;
      return t;
    }
    for (auto& [id, sb] : created_)
      if (matches(sb)) {
        t.session = &sb;
        return t;
      }
    auto sb = sdk::Sandbox::connect(wanted, options_.connection);
    if (!sb) return std::unexpected(sb.error());
    t.connected.emplace(std::move(*sb));
    return t;
  }
  if (default_) {
    auto alive = default_->refresh();
    if (alive) {
      t.session = &*default_;
      return t;
    }
    if (alive.error().kind() != ErrorKind::kNotFound) return std::unexpected(alive.error());
    t.note = "Note: the previous default sandbox " + default_->id() +
             " had ended (idle timeout); this ran in a new one, so earlier variables and files "
             "are gone.\n";
    default_->detach();
    default_.reset();
  }
  sdk::SandboxOptions o;
  o.profile = options_.default_profile;
  o.language = options_.default_language;
  o.metadata = {{"created_by", "airlock-mcp"}, {"role", "default"}};
  o.connection = options_.connection;
  auto sb = sdk::Sandbox::create(o);
  if (!sb) return std::unexpected(std::move(sb.error()).wrap("creating the default sandbox"));
  log::info("mcp.sandbox_create", {{"sandbox", sb->id()}, {"default", true}});
  default_.emplace(std::move(*sb));
  t.session = &*default_;
  return t;
}

Json SandboxTools::call(const std::string& name, const Json& arguments) {
  const ToolSpec* tool = findTool(name);
  if (tool == nullptr) return errorResult("unknown tool '" + name + "'");
  if (auto bad = validateArguments(*tool, arguments))
    return errorResult("invalid arguments for " + name + ": " + *bad);
  if (name == "run_code") return runCode(arguments);
  if (name == "run_command") return runCommand(arguments);
  if (name == "write_file") return writeFile(arguments);
  if (name == "read_file") return readFile(arguments);
  if (name == "list_files") return listFiles(arguments);
  if (name == "transfer_in") return transfer(arguments, true);
  if (name == "transfer_out") return transfer(arguments, false);
  if (name == "create_sandbox") return createSandbox(arguments);
  return endSandbox(arguments);
}

Json SandboxTools::runCode(const Json& args) {
  auto target = resolve(args);
  if (!target) return errorResult(describeError(target.error()));
  std::string out, err;
  sdk::RunCodeOptions o;
  o.language = stringArg(args, "language");
  o.timeout_s = numberArg(args, "timeout_s");
  o.on_stdout = [&](std::string_view s) { out += s; };
  o.on_stderr = [&](std::string_view s) { err += s; };
  auto ex = target->get().runCode(stringArg(args, "code"), o);
  std::string text = target->note;
  if (!ex) {
    text += describeError(ex.error()) + "\n";
    appendSection(text, "stdout so far", out);
    appendSection(text, "stderr so far", err);
    return errorResult(text);
  }
  Json content = Json::array();
  appendSection(text, "stdout", ex->stdout_text);
  appendSection(text, "stderr", ex->stderr_text);
  if (const auto* main = ex->mainResult(); main != nullptr && main->has("text/plain"))
    appendSection(text, "result", main->text());
  if (ex->error) {
    std::string trace;
    for (const auto& line : ex->error->traceback)
      trace += line + (line.ends_with('\n') ? "" : "\n");
    appendSection(text, "error", ex->error->name + ": " + ex->error->value + "\n" + trace);
  }
  if (ex->status == sdk::RunStatus::kContextLost)
    text += "\nThe interpreter died (context lost); its variables are gone.\n";
  size_t images = 0;
  for (const auto& r : ex->results)
    if (r.has("image/png")) ++images;
  if (images > 0) text += "\n" + std::to_string(images) + " image(s) attached.\n";
  if (text.empty()) text = "(the code ran and printed nothing)";
  content.push_back(textContent(text));
  for (const auto& r : ex->results)
    if (r.has("image/png"))
      content.push_back({{"type", "image"}, {"data", r.png()}, {"mimeType", "image/png"}});
  bool failed = ex->error.has_value() || ex->status != sdk::RunStatus::kOk;
  return toolResult(std::move(content), failed);
}

Json SandboxTools::runCommand(const Json& args) {
  auto target = resolve(args);
  if (!target) return errorResult(describeError(target.error()));
  std::string out, err;
  sdk::CommandOptions o;
  o.cwd = stringArg(args, "cwd");
  o.timeout_s = numberArg(args, "timeout_s");
  o.on_stdout = [&](std::string_view s) { out += s; };
  o.on_stderr = [&](std::string_view s) { err += s; };
  auto r = target->get().commands().run(stringArg(args, "command"), o);
  std::string text = target->note;
  if (!r) {
    text += describeError(r.error()) + "\n";
    appendSection(text, "stdout so far", out);
    appendSection(text, "stderr so far", err);
    return errorResult(text);
  }
  text += r->signal != 0 ? "killed by signal " + std::to_string(r->signal) + "\n"
                         : "exit code: " + std::to_string(r->exit_code) + "\n";
  appendSection(
      text, "stdout",
      r->stdout_text + (r->stdout_truncated ? "\n[output truncated by the sandbox's limit]" : ""));
  appendSection(
      text, "stderr",
      r->stderr_text + (r->stderr_truncated ? "\n[output truncated by the sandbox's limit]" : ""));
  return toolResult(Json::array({textContent(text)}), r->exit_code != 0 || r->signal != 0);
}

Json SandboxTools::writeFile(const Json& args) {
  std::string path = stringArg(args, "path");
  std::string content = stringArg(args, "content");
  if (stringArg(args, "encoding", "utf-8") == "base64") {
    auto bytes = encoding::base64Decode(content);
    if (!bytes)
      return errorResult("invalid arguments for write_file: 'content' is not valid padded base64");
    content = std::move(*bytes);
  }
  auto target = resolve(args);
  if (!target) return errorResult(describeError(target.error()));
  if (auto r = target->get().files().write(path, content); !r)
    return errorResult(target->note + describeError(r.error()));
  return toolResult(
      Json::array({textContent(target->note + "wrote " + std::to_string(content.size()) +
                               " bytes to " + path + " in sandbox " + target->get().id())}),
      false);
}

Json SandboxTools::readFile(const Json& args) {
  std::string path = stringArg(args, "path");
  auto target = resolve(args);
  if (!target) return errorResult(describeError(target.error()));
  sdk::Sandbox& sb = target->get();
  auto st = sb.files().stat(path);
  if (!st) return errorResult(target->note + describeError(st.error()));
  if (st->type == "dir") return errorResult(path + " is a directory; use list_files");
  if (st->size > kMaxReadBytes)
    return errorResult(path + " is " + std::to_string(st->size) +
                       " bytes; read_file returns at most " + std::to_string(kMaxReadBytes) +
                       " (read a part with run_command, e.g. head -c)");
  auto bytes = sb.files().read(path);
  if (!bytes) return errorResult(target->note + describeError(bytes.error()));
  if (encoding::isValidUtf8(*bytes) && bytes->find('\0') == std::string::npos)
    return toolResult(Json::array({textContent(target->note + *bytes)}), false);
  Json content = Json::array();
  if (!target->note.empty()) content.push_back(textContent(target->note));
  content.push_back({{"type", "resource"},
                     {"resource",
                      {{"uri", "airlock://" + sb.id() + path},
                       {"mimeType", mimeTypeOf(path)},
                       {"blob", encoding::base64Encode(*bytes)}}}});
  return toolResult(std::move(content), false);
}

Json SandboxTools::listFiles(const Json& args) {
  std::string path = stringArg(args, "path", kHome);
  auto target = resolve(args);
  if (!target) return errorResult(describeError(target.error()));
  auto entries = target->get().files().list(path);
  if (!entries) return errorResult(target->note + describeError(entries.error()));
  std::sort(entries->begin(), entries->end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::string text = target->note + path + " (" + std::to_string(entries->size()) + " entries)\n";
  for (const auto& e : *entries)
    text += e.type + "\t" + (e.type == "dir" ? std::string("-") : std::to_string(e.size)) + "\t" +
            e.name + (e.type == "dir" ? "/" : "") + "\n";
  return toolResult(Json::array({textContent(text)}), false);
}

Json SandboxTools::transfer(const Json& args, bool in) {
  const std::string location = stringArg(args, in ? "source" : "dest");
  const std::string path = stringArg(args, "path");
  auto target = resolve(args);
  if (!target) return errorResult(describeError(target.error()));
  sdk::Sandbox& sb = target->get();
  auto t = in ? sb.transferIn(location, path) : sb.transferOut(location, path);
  if (!t) return errorResult(target->note + describeError(t.error()));
  std::string text = target->note + "transfer " + (t->id.empty() ? "-" : t->id) + " " + t->status +
                     ": " + (in ? "unpacked " : "packed ") + std::to_string(t->files) + " files, " +
                     std::to_string(t->dirs) + " directories, " + std::to_string(t->links) +
                     " links (" + std::to_string(t->bytes) + " bytes) " +
                     (in ? "from " + t->location + " into " + t->sandbox_path
                         : "from " + t->sandbox_path + " to " + t->location) +
                     " in sandbox " + sb.id() + "\narchive: " + std::to_string(t->archive_bytes) +
                     " bytes" + (t->sha256.empty() ? "" : ", sha256 " + t->sha256) + "\n";
  Json record = {{"id", t->id},
                 {"direction", t->direction},
                 {"plugin", t->plugin},
                 {"location", t->location},
                 {"sandbox_path", t->sandbox_path},
                 {"files", t->files},
                 {"dirs", t->dirs},
                 {"links", t->links},
                 {"bytes", t->bytes},
                 {"archive_bytes", t->archive_bytes},
                 {"sha256", t->sha256.empty() ? Json(nullptr) : Json(t->sha256)},
                 {"ms", t->ms},
                 {"status", t->status},
                 {"error", nullptr}};
  Json result = toolResult(Json::array({textContent(text)}), false);
  result["structuredContent"] = std::move(record);
  return result;
}

Json SandboxTools::createSandbox(const Json& args) {
  sdk::SandboxOptions o;
  o.profile = stringArg(args, "profile");
  o.language = stringArg(args, "language");
  o.name = stringArg(args, "name");
  o.isolation = stringArg(args, "isolation");
  if (auto m = args.find("mounts"); m != args.end() && m->is_array())
    for (const auto& source : *m)
      if (source.is_string()) o.mounts.push_back({source.get<std::string>(), "", false});
  o.metadata = {{"created_by", "airlock-mcp"}};
  o.connection = options_.connection;
  auto sb = sdk::Sandbox::create(o);
  if (!sb) return errorResult(describeError(sb.error()));
  const auto& i = sb->info();
  log::info("mcp.sandbox_create", {{"sandbox", i.id}});
  Json info = {
      {"sandbox_id", i.id}, {"name", i.name}, {"profile", i.profile}, {"language", i.language}};
  std::string text = "sandbox_id: " + i.id + "\nname: " + (i.name.empty() ? "-" : i.name) +
                     "\nprofile: " + i.profile + "\nlanguage: " + i.language +
                     "\nPass sandbox_id to run_code, run_command and the file tools. It ends "
                     "with end_sandbox or when this session ends.";
  created_.emplace(i.id, std::move(*sb));
  Json result = toolResult(Json::array({textContent(text)}), false);
  result["structuredContent"] = info;
  return result;
}

Json SandboxTools::endSandbox(const Json& args) {
  std::string wanted = stringArg(args, "sandbox_id");
  auto matches = [&](const sdk::Sandbox& sb) {
    return sb.id() == wanted || (!sb.info().name.empty() && sb.info().name == wanted);
  };
  sdk::Result<> r;
  std::string id = wanted;
  if (default_ && matches(*default_)) {
    id = default_->id();
    r = default_->kill();
    if (r) default_.reset();
  } else if (auto it = std::find_if(created_.begin(), created_.end(),
                                    [&](auto& entry) { return matches(entry.second); });
             it != created_.end()) {
    id = it->first;
    r = it->second.kill();
    if (r) created_.erase(it);
  } else {
    auto sb = sdk::Sandbox::connect(wanted, options_.connection);
    if (!sb) return errorResult(describeError(sb.error()));
    id = sb->id();
    r = sb->kill();
  }
  if (!r) return errorResult(describeError(r.error()));
  return toolResult(Json::array({textContent("ended sandbox " + id)}), false);
}

}  // namespace airlock::mcp
