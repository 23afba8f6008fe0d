#include "supervisor/api/json_fields.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "supervisor/encoding/base64.h"

namespace airlock::api {

namespace {

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string quoteKey(const std::string& key) {
  // Keys come from the client: keep the message printable and short.
  std::string out;
  for (char c : key.substr(0, 64)) {
    unsigned char u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? '?' : c;
  }
  if (key.size() > 64) out += "...";
  return out;
}

std::optional<std::string> Fields::str(const char* key, bool allow_nul) {
  const Json* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return typeError(key, "a string", *v), std::nullopt;
  const auto& s = v->get_ref<const std::string&>();
  if (!allow_nul && s.find('\0') != std::string::npos) {
    return setError("field '" + name(key) + "': contains a NUL byte"), std::nullopt;
  }
  return s;
}

std::optional<bool> Fields::boolean(const char* key) {
  const Json* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return typeError(key, "a boolean", *v), std::nullopt;
  return v->get<bool>();
}

std::optional<int64_t> Fields::integer(const char* key, bool positive) {
  const Json* v = get(key);
  if (v == nullptr) return std::nullopt;
  int64_t out = 0;
  if (v->is_number_integer() && !v->is_number_unsigned()) {
    out = v->get<int64_t>();
  } else if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return setError("field '" + name(key) + "': " + std::to_string(u) + " is too large"),
             std::nullopt;
    }
    out = static_cast<int64_t>(u);
  } else if (v->is_number_float()) {
    double d = v->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) {
      return typeError(key, "an integer", *v), std::nullopt;
    }
    out = static_cast<int64_t>(d);
  } else {
    return typeError(key, "an integer", *v), std::nullopt;
  }
  if (positive && out <= 0) {
    return setError("field '" + name(key) + "': must be positive, got " + std::to_string(out)),
           std::nullopt;
  }
  return out;
}

std::optional<double> Fields::positiveNumber(const char* key) {
  const Json* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return typeError(key, "a number", *v), std::nullopt;
  double d = v->get<double>();
  if (!std::isfinite(d) || d <= 0) {
    return setError("field '" + name(key) + "': must be a positive number"), std::nullopt;
  }
  return d;
}

std::optional<std::map<std::string, std::string>> Fields::stringMap(const char* key) {
  const Json* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) return typeError(key, "an object of strings", *v), std::nullopt;
  std::map<std::string, std::string> out;
  for (const auto& [k, val] : v->items()) {
    std::string item = std::string(key) + "." + quoteKey(k);
    if (!val.is_string()) return typeError(item, "a string", val), std::nullopt;
    const auto& s = val.get_ref<const std::string&>();
    if (k.find('\0') != std::string::npos || s.find('\0') != std::string::npos) {
      return setError("field '" + name(item) + "': contains a NUL byte"), std::nullopt;
    }
    out.emplace(k, s);
  }
  return out;
}

std::optional<std::vector<std::string>> Fields::stringArray(const char* key) {
  const Json* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_array()) return typeError(key, "an array of strings", *v), std::nullopt;
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& item = (*v)[i];
    std::string at = std::string(key) + "[" + std::to_string(i) + "]";
    if (!item.is_string()) return typeError(at, "a string", item), std::nullopt;
    const auto& s = item.get_ref<const std::string&>();
    if (s.find('\0') != std::string::npos) {
      return setError("field '" + name(at) + "': contains a NUL byte"), std::nullopt;
    }
    out.push_back(s);
  }
  return out;
}

void Fields::typeError(const std::string& key, const char* expected, const Json& got) {
  setError("field '" + name(key) + "': expected " + expected + ", got " + got.type_name());
}

std::optional<std::string> Fields::finish() {
  if (error_) return error_;
  for (const auto& [k, v] : obj_.items()) {
    if (known_.count(k)) continue;
    std::string msg = "unknown field '" + prefix_ + quoteKey(k) + "'";
    std::string best;
    size_t best_d = 3;
    for (const auto& cand : known_) {
      size_t d = editDistance(k, cand);
      if (d < best_d) {
        best_d = d;
        best = cand;
      }
    }
    if (!best.empty()) msg += " (did you mean '" + prefix_ + best + "'?)";
    return msg;
  }
  return std::nullopt;
}

const Json* Fields::get(const char* key) {
  known_.insert(key);
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::unexpected<sandbox::ServiceError> badRequest(std::string message) {
  return sandbox::serviceError(sandbox::ErrorCode::kBadRequest, std::move(message));
}

void requireAbsolutePath(Fields& f, const char* key, const std::optional<std::string>& v,
                         std::string& out) {
  if (!v) return f.setError("field '" + f.name(key) + "' is required");
  if (v->empty() || v->front() != '/') {
    return f.setError("field '" + f.name(key) + "': must be an absolute path, got '" +
                      quoteKey(*v) + "'");
  }
  out = *v;
}

std::optional<std::string> textOrBase64(Fields& f, const char* text_key, const char* b64_key) {
  auto text = f.str(text_key, true);
  auto b64 = f.str(b64_key);
  if (text && b64) {
    f.setError("fields '" + f.name(text_key) + "' and '" + f.name(b64_key) + "' are exclusive");
    return std::nullopt;
  }
  if (b64) {
    auto bytes = encoding::base64Decode(*b64);
    if (!bytes) f.setError("field '" + f.name(b64_key) + "': not valid base64");
    return bytes;
  }
  return text;
}

}  // namespace airlock::api
