// The review section of a profile ([profiles.<name>.review]): which reviewers look at code and
// commands before they reach a sandbox, in which order, and how each one is set up.
// docs/review.md explains the model; reference.toml lists every key with its default.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/result.h"

namespace airlock::policy {

// The built-in reviewers a chain may name. Review plugins are named "plugin:<short name>".
inline constexpr std::string_view kBuiltinReviewers[] = {"limits", "patterns", "python_ast",
                                                         "shell",  "command",  "webhook"};
inline constexpr std::string_view kPluginReviewerPrefix = "plugin:";

struct ReviewLimits {
  uint64_t max_bytes = 1 << 20;  // largest code or command text reviewed, bytes; more is denied
  uint32_t max_lines = 20000;    // most lines in one piece of code; more is denied
  bool allow_binary = false;     // let NUL bytes and invalid UTF-8 through (denied by default)
};

// One rule of the patterns reviewer ([[profiles.<name>.review.patterns.rules]]).
struct ReviewRule {
  std::string id;                      // names the rule in verdicts: "py-subprocess"
  std::string pattern;                 // RE2 syntax, searched anywhere in the text
  std::string action = "deny";         // "deny", "allow" (stop looking: allowed) or "hold"
  std::string reason;                  // said to the caller when the rule decides
  std::vector<std::string> languages;  // "python", "node", "shell"; []: every language
  bool operator==(const ReviewRule&) const = default;
};

struct ReviewPatterns {
  uint64_t max_scan_bytes = 1 << 20;  // longer text is not scanned and fails the reviewer, bytes
  std::vector<ReviewRule> rules;      // tried in order; the first that matches decides
};

struct ReviewPythonAst {
  // Modules whose import is denied, with their submodules ("os" would also deny "os.path").
  std::vector<std::string> deny_imports = {"subprocess", "ctypes", "pty", "multiprocessing",
                                           "importlib"};
  // Dotted callables denied after resolving import aliases ("builtins.exec" is "exec"); a
  // trailing '*' matches a prefix.
  std::vector<std::string> deny_calls = {"os.system",
                                         "os.popen",
                                         "os.exec*",
                                         "os.spawn*",
                                         "os.fork",
                                         "os.forkpty",
                                         "os.kill",
                                         "os.posix_spawn*",
                                         "eval",
                                         "exec",
                                         "compile",
                                         "__import__",
                                         "importlib.import_module"};
  // Attribute names whose use is denied: the usual ways out of a restricted namespace.
  std::vector<std::string> deny_attributes = {"__subclasses__", "__globals__", "__builtins__",
                                              "__code__",       "__bases__",   "__mro__",
                                              "__loader__",     "__dict__"};
  uint64_t max_bytes = 1 << 20;  // larger code is not parsed and fails the reviewer, bytes
  uint32_t timeout_ms = 10000;   // for the whole check, sandbox start included, milliseconds
  // Single-use checker sandboxes `airlock serve` keeps started, their interpreter waiting for
  // the code to judge; 0: each check starts its sandbox.
  uint32_t pool_size = 2;
};

struct ReviewShell {
  // "allowlist": shell code and commands may only run the commands in `allow`; "off": every
  // shell code and command is denied.
  std::string mode = "allowlist";
  std::vector<std::string> allow = {"cat",  "cut",  "echo", "grep", "head", "ls",   "pwd",
                                    "sort", "tail", "tr",   "uniq", "wc",   "true", "false"};
};

struct ReviewCommand {
  std::vector<std::string> argv;  // the reviewer program and its arguments (absolute path)
  uint32_t timeout_ms = 5000;     // killed and failed after this long, milliseconds
};

struct ReviewWebhook {
  std::string url;             // "http://host:port/path" of the reviewer service
  uint32_t timeout_ms = 5000;  // for connect, request and answer together, milliseconds
  std::string token_file;      // file whose content is sent as "Authorization: Bearer ..."
};

// A review plugin's settings ([[profiles.<name>.review.plugins]]).
struct ReviewPlugin {
  std::string name;           // the plugin's short or full name: "example"
  std::string config = "{}";  // JSON object handed to the plugin's create()
  bool operator==(const ReviewPlugin&) const = default;
};

struct Review {
  std::vector<std::string> chain;  // reviewers in order; []: nothing is reviewed
  bool fail_open = false;          // a reviewer that errors or times out allows (relaxation)
  uint32_t cache_entries = 1024;   // verdicts kept per profile (least recently used go); 0: none
  uint32_t hold_deadline_s = 600;  // how long a held request waits for an operator, seconds
  std::vector<ReviewPlugin> plugins;
  ReviewLimits limits;
  ReviewPatterns patterns;
  ReviewPythonAst python_ast;
  ReviewShell shell;
  ReviewCommand command;
  ReviewWebhook webhook;
};

// Where review.webhook.url points. Only plain HTTP: a reviewer service reached over TLS sits
// behind a local proxy.
struct WebhookUrl {
  std::string host;  // name or IP address ("[::1]" is given as "::1")
  uint16_t port = 80;
  std::string target = "/";  // path and query
};
// "http://host[:port][/path]" → its parts, or what is wrong with it.
Result<WebhookUrl> parseWebhookUrl(std::string_view url);

}  // namespace airlock::policy
