// What the built-in language plugins share: reading a code request and the plugin config.
// Header-only; plugins link the SDK and nlohmann/json (header-only) and nothing else.
#pragma once

#include <airlock/plugin.hpp>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::languages {

struct Config {
  std::string interpreter;  // absolute path inside the sandbox; empty: the plugin's default
};

// Parses the plugin's config table ({"interpreter": "/usr/bin/python3.12"}). Unknown keys and
// wrong types are errors, like everywhere else in airlock's policy.
inline Config parseConfig(std::string_view json, std::string_view plugin) {
  nlohmann::json doc = nlohmann::json::parse(json.empty() ? std::string_view("{}") : json, nullptr,
                                             /*allow_exceptions=*/false);
  std::string where = "config of " + std::string(plugin);
  if (doc.is_discarded() || !doc.is_object())
    throw sdk::PluginError(EINVAL, where + ": not a JSON object");
  Config config;
  for (const auto& [key, value] : doc.items()) {
    if (key != "interpreter")
      throw sdk::PluginError(EINVAL, where + ": unknown key '" + key + "' (known: interpreter)");
    if (!value.is_string() || value.get<std::string>().empty() ||
        value.get<std::string>().front() != '/')
      throw sdk::PluginError(EINVAL, where + ": 'interpreter' must be an absolute path");
    config.interpreter = value.get<std::string>();
  }
  return config;
}

inline std::vector<std::string> requestArgs(const airlock_code_request_v1& request) {
  std::vector<std::string> args;
  for (const char* const* a = request.args; a != nullptr && *a != nullptr; ++a)
    args.emplace_back(*a);
  return args;
}

// The inline program text; argv strings cannot carry NUL bytes.
inline std::string inlineCode(const airlock_code_request_v1& request) {
  std::string code(request.code.ptr != nullptr ? request.code.ptr : "",
                   request.code.ptr != nullptr ? request.code.len : 0);
  if (code.find('\0') != std::string::npos)
    throw sdk::PluginError(EINVAL, "inline program contains a NUL byte; run it as a file");
  return code;
}

// The program file, made safe to pass where an option could be expected ("-x" → "./-x").
inline std::string programPath(const airlock_code_request_v1& request) {
  if (request.path == nullptr || request.path[0] == '\0')
    throw sdk::PluginError(EINVAL, "file request without a path");
  std::string path = request.path;
  if (path.front() == '-') path.insert(0, "./");
  return path;
}

// The modules a prestart driver imports before its program arrives (AIRLOCK_CODE_PRESTART). They
// travel as the driver's arguments, so none may be empty or look like an option.
inline void checkPrestartModule(const std::string& module) {
  if (module.empty() || module.front() == '-')
    throw sdk::PluginError(EINVAL,
                           "prestart module name '" + module + "' is empty or starts with '-'");
}

// Linux's limit on one argv string, NUL included (MAX_ARG_STRLEN: 32 pages). Session drivers
// travel as a single argument and are checked against it at compile time.
inline constexpr size_t kMaxArgStrlen = 32 * 4096;

inline bool isInline(const airlock_code_request_v1& request) {
  if (request.source == AIRLOCK_CODE_INLINE) return true;
  if (request.source == AIRLOCK_CODE_FILE) return false;
  throw sdk::PluginError(EINVAL, "unknown code source " + std::to_string(request.source));
}

}  // namespace airlock::languages
