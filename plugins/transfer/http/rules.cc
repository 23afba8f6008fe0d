#include "rules.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace airlock::transfer_http {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& key, const std::string& why) {
  throw std::invalid_argument("transfer.http." + key + ": " + why);
}

const json* member(const json& rules, const char* key) {
  auto it = rules.find(key);
  return it == rules.end() || it->is_null() ? nullptr : &*it;
}

std::string stringOf(const json& rules, const char* key, std::string fallback) {
  const json* v = member(rules, key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) bad(key, "not a string");
  return v->get<std::string>();
}

int64_t integerOf(const json& rules, const char* key, int64_t fallback, int64_t max) {
  const json* v = member(rules, key);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > max)
    bad(key, "not an integer from 0 to " + std::to_string(max));
  return v->get<int64_t>();
}

const json& arrayOf(const json& rules, const char* key) {
  static const json kEmpty = json::array();
  const json* v = member(rules, key);
  if (v == nullptr) return kEmpty;
  if (!v->is_array()) bad(key, "not an array");
  return *v;
}

std::string indexed(const char* key, size_t i) {
  return std::string(key) + "[" + std::to_string(i) + "]";
}

}  // namespace

Rules parseRules(std::string_view text) {
  json rules;
  try {
    rules = json::parse(text);
  } catch (const json::exception& e) {
    throw std::invalid_argument(std::string("transfer.http: the rules are not JSON: ") + e.what());
  }
  if (!rules.is_object()) throw std::invalid_argument("transfer.http: the rules are not an object");
  Rules r;

  const json& allow = arrayOf(rules, "allow");
  for (size_t i = 0; i < allow.size(); ++i) {
    if (!allow[i].is_string()) bad(indexed("allow", i), "not a string");
    try {
      r.allow.push_back(parsePattern(allow[i].get<std::string>()));
    } catch (const std::invalid_argument& e) {
      bad(indexed("allow", i), "'" + allow[i].get<std::string>() + "': " + e.what());
    }
  }

  const json& blocked = arrayOf(rules, "blocked");
  for (size_t i = 0; i < blocked.size(); ++i) {
    const json& entry = blocked[i];
    if (!entry.is_object() || !entry.contains("cidr") || !entry["cidr"].is_string())
      bad(indexed("blocked", i), "not an object with a \"cidr\" string");
    ProtectedRange range;
    try {
      range.cidr = parseCidr(entry["cidr"].get<std::string>());
    } catch (const std::invalid_argument& e) {
      bad(indexed("blocked", i), e.what());
    }
    if (entry.contains("why") && entry["why"].is_string())
      range.why = entry["why"].get<std::string>();
    if (range.why.empty()) range.why = "protected";
    r.addresses.blocked.push_back(std::move(range));
  }

  const json& allow_private = arrayOf(rules, "allow_private");
  for (size_t i = 0; i < allow_private.size(); ++i) {
    if (!allow_private[i].is_string()) bad(indexed("allow_private", i), "not a string");
    try {
      r.addresses.allow_private.push_back(parseCidr(allow_private[i].get<std::string>()));
    } catch (const std::invalid_argument& e) {
      bad(indexed("allow_private", i), e.what());
    }
  }

  r.redirects = static_cast<int>(integerOf(rules, "redirects", r.redirects, 20));
  constexpr int64_t kDay = 24LL * 3600 * 1000;
  r.connect_timeout = std::chrono::milliseconds(
      integerOf(rules, "connect_timeout_ms", r.connect_timeout.count(), kDay));
  r.idle_timeout =
      std::chrono::milliseconds(integerOf(rules, "idle_timeout_ms", r.idle_timeout.count(), kDay));
  r.timeout = std::chrono::milliseconds(integerOf(rules, "timeout_ms", r.timeout.count(), kDay));
  r.ca_file = stringOf(rules, "ca_file", r.ca_file);
  r.spool_dir = stringOf(rules, "spool_dir", r.spool_dir);
  if (r.spool_dir.empty()) bad("spool_dir", "empty");
  r.method_out = stringOf(rules, "method_out", r.method_out);
  // A token (RFC 9110 5.6.2): it goes into the request line as it is.
  if (r.method_out.empty() ||
      r.method_out.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                     "0123456789!#$%&'*+-.^_`|~") != std::string::npos)
    bad("method_out", "'" + r.method_out + "' is not an HTTP method");
  return r;
}

}  // namespace airlock::transfer_http
