// Checks of [profiles.<name>.review]: every reviewer the chain names exists and is set up, every
// pattern compiles (RE2, so it also runs in linear time), and every number is in range.
#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>

#include "airlock/policy/policy.h"
#include "check.h"
#include "schema.h"

namespace airlock::policy {
namespace {

using detail::Problem;
using detail::q;
using detail::range;
using Check = std::optional<Problem>;

constexpr uint64_t kMaxReviewBytes = uint64_t{1} << 30;  // what limits.max_bytes may allow
constexpr uint64_t kMaxScanBytes = uint64_t{64} << 20;
constexpr uint64_t kMaxTimeoutMs = 600000;
constexpr uint64_t kMaxCacheEntries = 1000000;
constexpr uint64_t kMaxHoldS = 86400;
// What a pattern rule may apply to: code and commands by language, or "transfer" (a transfer's
// location and an archive's listing, which rules that name no language never see).
constexpr std::string_view kLanguages[] = {"python", "node", "shell", "transfer"};
constexpr std::string_view kActions[] = {"deny", "allow", "hold"};
constexpr std::string_view kShellModes[] = {"allowlist", "off"};

std::string joined(std::span<const std::string_view> names) {
  std::string out;
  for (auto n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

std::string hint(std::string_view word, std::span<const std::string_view> candidates) {
  std::string_view s = detail::closest(word, candidates);
  return s.empty() ? "" : " (did you mean " + q(s) + "?)";
}

bool inChain(const Review& r, std::string_view name) {
  return std::ranges::find(r.chain, name) != r.chain.end();
}

Check checkChain(const Review& r) {
  std::set<std::string> seen;
  for (size_t i = 0; i < r.chain.size(); ++i) {
    const std::string& name = r.chain[i];
    const std::string key = "review.chain[" + std::to_string(i) + "]";
    if (name.starts_with(kPluginReviewerPrefix)) {
      if (name.size() == kPluginReviewerPrefix.size()) {
        return Problem{key, key + " = " + q(name) + ": name the plugin: 'plugin:<name>'"};
      }
    } else if (std::ranges::find(kBuiltinReviewers, name) == std::end(kBuiltinReviewers)) {
      return Problem{key, key + " = " + q(name) + ": unknown reviewer" +
                              hint(name, kBuiltinReviewers) + "; the built-in ones are " +
                              joined(kBuiltinReviewers) + ", and plugins are 'plugin:<name>'"};
    }
    if (!seen.insert(name).second) {
      return Problem{key, key + " = " + q(name) + ": named twice in the chain"};
    }
  }
  return std::nullopt;
}

bool validRuleId(std::string_view id) {
  return !id.empty() && id.size() <= 64 && std::ranges::all_of(id, [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

Check checkRules(const ReviewPatterns& p) {
  if (auto c = range("review.patterns.max_scan_bytes", p.max_scan_bytes, 1, kMaxScanBytes)) {
    return c;
  }
  std::set<std::string> ids;
  for (size_t i = 0; i < p.rules.size(); ++i) {
    const ReviewRule& rule = p.rules[i];
    const std::string key = "review.patterns.rules[" + std::to_string(i) + "]";
    if (!validRuleId(rule.id)) {
      return Problem{key + ".id", key + ".id = " + q(rule.id) +
                                      ": use 1 to 64 letters, digits, '-', '_' and '.'"};
    }
    const std::string named = key + " (rule " + q(rule.id) + ")";
    if (!ids.insert(rule.id).second) {
      return Problem{key + ".id", named + ": another rule already has this id"};
    }
    if (rule.pattern.empty()) return Problem{key + ".pattern", named + ": pattern is empty"};
    RE2::Options options;
    options.set_log_errors(false);
    RE2 re(rule.pattern, options);
    if (!re.ok()) {
      return Problem{key + ".pattern",
                     named + ": invalid regular expression " + q(rule.pattern) + ": " + re.error()};
    }
    if (std::ranges::find(kActions, rule.action) == std::end(kActions)) {
      return Problem{key + ".action", named + ": action = " + q(rule.action) + ": use " +
                                          joined(kActions) + hint(rule.action, kActions)};
    }
    for (size_t j = 0; j < rule.languages.size(); ++j) {
      const std::string& lang = rule.languages[j];
      if (std::ranges::find(kLanguages, lang) == std::end(kLanguages)) {
        return Problem{key + ".languages[" + std::to_string(j) + "]",
                       named + ": unknown language " + q(lang) + " (use " + joined(kLanguages) +
                           ")" + hint(lang, kLanguages)};
      }
    }
  }
  return std::nullopt;
}

Check nonEmptyEntries(const std::string& key, const std::vector<std::string>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string& v = values[i];
    if (v.empty() || std::ranges::any_of(v, [](char c) {
          return std::isspace(static_cast<unsigned char>(c)) || c == '\0';
        })) {
      const std::string k = key + "[" + std::to_string(i) + "]";
      return Problem{k, k + " = " + q(v) + ": must be a non-empty word without spaces"};
    }
  }
  return std::nullopt;
}

Check checkPythonAst(const ReviewPythonAst& a) {
  for (Check c : {nonEmptyEntries("review.python_ast.deny_imports", a.deny_imports),
                  nonEmptyEntries("review.python_ast.deny_calls", a.deny_calls),
                  nonEmptyEntries("review.python_ast.deny_attributes", a.deny_attributes),
                  range("review.python_ast.max_bytes", a.max_bytes, 1, kMaxScanBytes),
                  range("review.python_ast.timeout_ms", a.timeout_ms, 100, kMaxTimeoutMs),
                  range("review.python_ast.pool_size", a.pool_size, 0, 1000)}) {
    if (c) return c;
  }
  return std::nullopt;
}

Check checkShell(const ReviewShell& s) {
  if (std::ranges::find(kShellModes, s.mode) == std::end(kShellModes)) {
    return Problem{"review.shell.mode", "review.shell.mode = " + q(s.mode) + ": use " +
                                            joined(kShellModes) + hint(s.mode, kShellModes)};
  }
  return nonEmptyEntries("review.shell.allow", s.allow);
}

Check checkCommand(const Review& r) {
  const ReviewCommand& c = r.command;
  if (auto p = range("review.command.timeout_ms", c.timeout_ms, 1, kMaxTimeoutMs)) return p;
  if (!inChain(r, "command")) return std::nullopt;
  if (c.argv.empty()) {
    return Problem{"review.command.argv",
                   "review.command.argv is empty: the chain names 'command', so give the "
                   "reviewer program, e.g. argv = [\"/usr/local/bin/my-reviewer\"]",
                   "review.chain"};
  }
  if (c.argv[0].empty() || c.argv[0].front() != '/') {
    return Problem{"review.command.argv[0]",
                   "review.command.argv[0] = " + q(c.argv[0]) + ": must be an absolute path"};
  }
  return std::nullopt;
}

Check checkWebhook(const Review& r) {
  const ReviewWebhook& w = r.webhook;
  if (auto p = range("review.webhook.timeout_ms", w.timeout_ms, 1, kMaxTimeoutMs)) return p;
  if (!w.token_file.empty() && w.token_file.front() != '/') {
    return Problem{"review.webhook.token_file",
                   "review.webhook.token_file = " + q(w.token_file) + ": must be an absolute path"};
  }
  if (w.url.empty() && !inChain(r, "webhook")) return std::nullopt;
  if (auto url = parseWebhookUrl(w.url); !url) {
    return Problem{"review.webhook.url",
                   "review.webhook.url = " + q(w.url) + ": " + url.error().message(),
                   "review.chain"};
  }
  return std::nullopt;
}

Check checkPlugins(const Review& r) {
  std::set<std::string> names;
  for (size_t i = 0; i < r.plugins.size(); ++i) {
    const ReviewPlugin& p = r.plugins[i];
    const std::string key = "review.plugins[" + std::to_string(i) + "]";
    if (p.name.empty() || p.name.find(':') != std::string::npos) {
      return Problem{key + ".name", key + ".name = " + q(p.name) +
                                        ": the plugin's short or full name, without 'plugin:'"};
    }
    if (!names.insert(p.name).second) {
      return Problem{key + ".name", key + ".name = " + q(p.name) + ": configured twice"};
    }
    auto json = nlohmann::json::parse(p.config, nullptr, false);
    if (json.is_discarded() || !json.is_object()) {
      return Problem{key + ".config",
                     key + ".config (plugin " + q(p.name) + "): must be a table or a JSON object"};
    }
  }
  return std::nullopt;
}

}  // namespace

Result<WebhookUrl> parseWebhookUrl(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.empty()) return fail("empty; give http://host:port/path");
  if (!url.starts_with(kScheme)) {
    return fail(url.starts_with("https://")
                    ? "https is not supported; reach a TLS service through a local proxy"
                    : "must start with http://");
  }
  std::string_view rest = url.substr(kScheme.size());
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  WebhookUrl out;
  out.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (authority.find('@') != std::string_view::npos) {
    return fail("credentials in the URL are not supported; use token_file");
  }
  std::string_view port;
  if (authority.starts_with("[")) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return fail("unterminated '[' in the host");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return fail("unexpected text after the host");
      port = after.substr(1);
    }
  } else {
    size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (out.host.empty()) return fail("no host");
  if (!port.empty() || authority.ends_with(":")) {
    if (port.empty() || port.size() > 5 ||
        !std::ranges::all_of(port, [](char c) { return c >= '0' && c <= '9'; })) {
      return fail("port must be a number from 1 to 65535");
    }
    unsigned long n = std::stoul(std::string(port));
    if (n == 0 || n > 65535) return fail("port must be a number from 1 to 65535");
    out.port = static_cast<uint16_t>(n);
  }
  if (std::ranges::any_of(
          out.target, [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
    return fail("the path has spaces or control characters");
  }
  return out;
}

namespace detail {

std::optional<Problem> checkReview(const Review& r) {
  for (Check c :
       {checkChain(r), range("review.cache_entries", r.cache_entries, 0, kMaxCacheEntries),
        range("review.hold_deadline_s", r.hold_deadline_s, 1, kMaxHoldS, "s"), checkPlugins(r),
        range("review.limits.max_bytes", r.limits.max_bytes, 1, kMaxReviewBytes),
        range("review.limits.max_lines", r.limits.max_lines, 1, UINT32_MAX), checkRules(r.patterns),
        checkPythonAst(r.python_ast), checkShell(r.shell), checkCommand(r), checkWebhook(r)}) {
    if (c) return c;
  }
  return std::nullopt;
}

}  // namespace detail
}  // namespace airlock::policy
