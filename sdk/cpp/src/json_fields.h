// Lenient readers of the supervisor's JSON answers: a missing or mistyped field reads as its
// default, so an older or newer supervisor never crashes the SDK.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "base64.h"

namespace airlock::sdk::fields {

inline std::string str(const nlohmann::json& doc, const char* key) {
  if (!doc.is_object()) return {};
  auto it = doc.find(key);
  return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
}

inline int64_t integer(const nlohmann::json& doc, const char* key, int64_t fallback = 0) {
  if (!doc.is_object()) return fallback;
  auto it = doc.find(key);
  return it != doc.end() && it->is_number() ? it->get<int64_t>() : fallback;
}

inline double number(const nlohmann::json& doc, const char* key) {
  if (!doc.is_object()) return 0;
  auto it = doc.find(key);
  return it != doc.end() && it->is_number() ? it->get<double>() : 0;
}

inline bool boolean(const nlohmann::json& doc, const char* key) {
  if (!doc.is_object()) return false;
  auto it = doc.find(key);
  return it != doc.end() && it->is_boolean() && it->get<bool>();
}

// `<key>` as text, or `<key>_base64` decoded (output that is not UTF-8).
inline std::string bytes(const nlohmann::json& doc, const std::string& key) {
  if (!doc.is_object()) return {};
  if (auto it = doc.find(key); it != doc.end() && it->is_string()) return it->get<std::string>();
  if (auto it = doc.find(key + "_base64"); it != doc.end() && it->is_string())
    return decodeBase64(it->get<std::string>()).value_or("");
  return {};
}

}  // namespace airlock::sdk::fields
