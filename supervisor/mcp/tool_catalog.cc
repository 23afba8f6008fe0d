#include "supervisor/mcp/tool_catalog.h"

namespace airlock::mcp {

namespace {

// Built with the catalog, not at start-up: every `airlock` process would pay for it otherwise.
Json sandboxIdSchema() {
  return {{"type", "string"},
          {"description",
           "Id or name of the sandbox to use (from create_sandbox). Omit it to use this "
           "session's default sandbox, created on first use and ended when the session ends."}};
}

Json objectSchema(Json properties, std::vector<std::string> required) {
  return {{"type", "object"},
          {"properties", std::move(properties)},
          {"required", std::move(required)},
          {"additionalProperties", false}};
}

std::vector<ToolSpec> buildCatalog() {
  const Json kSandboxId = sandboxIdSchema();
  std::vector<ToolSpec> tools;
  tools.push_back(
      {"run_code", "Run code",
       "Run Python or JavaScript (Node) code in an isolated airlock sandbox with no network. The "
       "interpreter is stateful: variables, imports and files persist between calls in the same "
       "sandbox. Returns stdout, stderr, the value of the last expression, the error with its "
       "traceback when the code raised, and every open matplotlib figure as a PNG image (no "
       "savefig needed). pandas, numpy and matplotlib are available where the host has them.",
       objectSchema(
           {{"code", {{"type", "string"}, {"description", "The program text to run."}}},
            {"language",
             {{"type", "string"},
              {"description",
               "python (default) or node; the sandbox's profile decides which are allowed."}}},
            {"sandbox_id", kSandboxId},
            {"timeout_s",
             {{"type", "number"},
              {"exclusiveMinimum", 0},
              {"description",
               "Stop the run after this many seconds (the interpreter and its state are kept)."}}}},
           {"code"})});
  tools.push_back(
      {"run_command", "Run a shell command",
       "Run a shell command (/bin/sh -c) in an isolated airlock sandbox as an unprivileged user "
       "with no network, and wait for it to end. Returns the exit code, stdout and stderr. The "
       "working directory defaults to /home/user, where files persist for the sandbox's life.",
       objectSchema({{"command", {{"type", "string"}, {"description", "The shell command line."}}},
                     {"sandbox_id", kSandboxId},
                     {"cwd",
                      {{"type", "string"},
                       {"description", "Absolute working directory (default /home/user)."}}},
                     {"timeout_s",
                      {{"type", "number"},
                       {"exclusiveMinimum", 0},
                       {"description", "Kill the command after this many seconds."}}}},
                    {"command"})});
  tools.push_back(
      {"write_file", "Write a file",
       "Create or overwrite a file inside a sandbox. Parent directories must exist (or use "
       "run_command with mkdir -p). Content is text unless encoding is base64.",
       objectSchema(
           {{"path",
             {{"type", "string"},
              {"description", "Absolute path inside the sandbox, e.g. /home/user/a.csv."}}},
            {"content", {{"type", "string"}, {"description", "The file's content."}}},
            {"encoding",
             {{"type", "string"},
              {"enum", {"utf-8", "base64"}},
              {"description", "utf-8 (default) or base64 for binary content."}}},
            {"sandbox_id", kSandboxId}},
           {"path", "content"})});
  tools.push_back(
      {"read_file", "Read a file",
       "Read a file from a sandbox. Text files come back as text; binary files (images, "
       "archives) as an embedded resource with base64 content.",
       objectSchema(
           {{"path", {{"type", "string"}, {"description", "Absolute path inside the sandbox."}}},
            {"sandbox_id", kSandboxId}},
           {"path"})});
  tools.push_back(
      {"list_files", "List a directory",
       "List the entries of a directory inside a sandbox: type, size and name of each.",
       objectSchema({{"path",
                      {{"type", "string"},
                       {"description", "Absolute directory path (default /home/user)."}}},
                     {"sandbox_id", kSandboxId}},
                    {})});
  tools.push_back(
      {"transfer_in", "Fetch an archive into a sandbox",
       "Fetch an archive (tar, tar.gz, tar.zst, zip, ...) from an https:// URL or from a host "
       "directory the operator provides (hostdir:NAME/path) and unpack it into a directory of a "
       "sandbox: a repository, a dataset. The archive is checked and unpacked inside the "
       "sandbox; an entry that would leave the directory refuses the whole archive, and the "
       "sandbox's policy decides which URLs and host directories are allowed. Returns the "
       "transfer record: files, directories, bytes, sha256.",
       objectSchema(
           {{"source",
             {{"type", "string"},
              {"description",
               "Where the archive comes from: https://host/path/file.tar.gz or "
               "hostdir:NAME/sub/path."}}},
            {"path",
             {{"type", "string"},
              {"description",
               "Absolute directory inside the sandbox to unpack into, e.g. /home/user/data; "
               "created if missing."}}},
            {"sandbox_id", kSandboxId}},
           {"source", "path"})});
  tools.push_back(
      {"transfer_out", "Send a sandbox directory out",
       "Pack a directory of a sandbox into an archive and send it out: uploaded with PUT to an "
       "https:// URL (a presigned object-store URL, for example; the format comes from the "
       "URL's path, else tar.gz), or written as hostdir:NAME/file.tar.gz into a host directory "
       "the operator made writable. Returns the transfer record: files, bytes, sha256.",
       objectSchema({{"dest",
                      {{"type", "string"},
                       {"description",
                        "Where the archive goes: https://host/path/results.tar.gz or "
                        "hostdir:NAME/results.tar.gz."}}},
                     {"path",
                      {{"type", "string"},
                       {"description", "Absolute directory inside the sandbox to pack."}}},
                     {"sandbox_id", kSandboxId}},
                    {"dest", "path"})});
  tools.push_back(
      {"create_sandbox", "Create a sandbox",
       "Create a new isolated sandbox and return its id, for work that must be kept apart from "
       "the default sandbox (another dataset, another language). Pass the id as sandbox_id to "
       "the other tools. It ends with end_sandbox or when this session ends.",
       objectSchema(
           {{"profile",
             {{"type", "string"},
              {"description",
               "Policy profile (limits, network, packages); default profile if omitted."}}},
            {"language",
             {{"type", "string"},
              {"description", "Default language for run_code: python or node."}}},
            {"name",
             {{"type", "string"},
              {"description", "A unique name that can be used instead of the id."}}},
            {"isolation",
             {{"type", "string"},
              {"description",
               "Isolation backend, e.g. gvisor or microvm (a virtual machine) for code "
               "you trust less; only what the profile offers (its default if omitted)."}}},
            {"mounts",
             {{"type", "array"},
              {"items", {{"type", "string"}}},
              {"description",
               "Operator directories to see read-only under /mnt, e.g. [\"hostdir:datasets/iris\"] "
               "(shown at /mnt/datasets/iris); only roots the operator declared."}}}},
           {})});
  tools.push_back(
      {"end_sandbox", "End a sandbox",
       "End a sandbox now: every process in it is killed and its files are removed.",
       objectSchema({{"sandbox_id",
                      {{"type", "string"}, {"description", "Id or name of the sandbox to end."}}}},
                    {"sandbox_id"})});
  return tools;
}

bool hasType(const Json& value, const std::string& type) {
  if (type == "string") return value.is_string();
  if (type == "number") return value.is_number();
  if (type == "integer") return value.is_number_integer() || value.is_number_unsigned();
  if (type == "boolean") return value.is_boolean();
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  return true;
}

}  // namespace

const std::vector<ToolSpec>& toolCatalog() {
  static const std::vector<ToolSpec> catalog = buildCatalog();
  return catalog;
}

const ToolSpec* findTool(std::string_view name) {
  for (const auto& t : toolCatalog())
    if (t.name == name) return &t;
  return nullptr;
}

Result<Json> toolDefinitions(std::string_view format) {
  Json out = Json::array();
  for (const auto& t : toolCatalog()) {
    if (format == "openai") {
      out.push_back(
          {{"type", "function"},
           {"function",
            {{"name", t.name}, {"description", t.description}, {"parameters", t.input_schema}}}});
    } else if (format == "anthropic") {
      out.push_back(
          {{"name", t.name}, {"description", t.description}, {"input_schema", t.input_schema}});
    } else if (format == "mcp") {
      out.push_back({{"name", t.name},
                     {"title", t.title},
                     {"description", t.description},
                     {"inputSchema", t.input_schema}});
    } else {
      return fail("unknown tool format '" + std::string(format) + "' (openai, anthropic or mcp)");
    }
  }
  if (format == "mcp") return Json{{"tools", out}};
  return out;
}

std::optional<std::string> validateArguments(const ToolSpec& tool, const Json& arguments) {
  if (!arguments.is_object()) return "arguments must be a JSON object";
  const Json& properties = tool.input_schema["properties"];
  for (const auto& required : tool.input_schema["required"]) {
    if (!arguments.contains(required.get<std::string>()))
      return "missing required argument '" + required.get<std::string>() + "'";
  }
  for (const auto& [key, value] : arguments.items()) {
    auto prop = properties.find(key);
    if (prop == properties.end()) {
      std::string known;
      for (const auto& [name, _] : properties.items()) known += (known.empty() ? "" : ", ") + name;
      return "unknown argument '" + key + "' (" + tool.name + " takes " + known + ")";
    }
    std::string type = (*prop)["type"].get<std::string>();
    if (!hasType(value, type))
      return "argument '" + key + "' must be " + (type == "integer" ? "an " : "a ") + type;
    if (auto e = prop->find("enum"); e != prop->end()) {
      bool listed = false;
      for (const auto& allowed : *e) listed = listed || allowed == value;
      if (!listed) return "argument '" + key + "' must be one of " + e->dump();
    }
    if (auto min = prop->find("exclusiveMinimum");
        min != prop->end() && value.is_number() && value.get<double>() <= min->get<double>())
      return "argument '" + key + "' must be greater than " + min->dump();
  }
  return std::nullopt;
}

}  // namespace airlock::mcp
