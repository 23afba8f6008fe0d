// The field reader under every request decoder (request_decoding.h): typed getters that
// remember the first error, naming the field and what was wrong ("field 'timeout_s': expected a
// number, got string"), and unknown fields as errors with a suggestion. Nothing here throws.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "supervisor/api/request_decoding.h"

namespace airlock::api {

// A client-given key made printable and short for messages.
std::string quoteKey(const std::string& key);

// Reads the fields of one JSON object, remembering the first error and which keys were known.
// `prefix` names a nested object in messages ("files_in[0]." → "field 'files_in[0].path'").
class Fields {
 public:
  explicit Fields(const Json& obj, std::string prefix = {})
      : obj_(obj), prefix_(std::move(prefix)) {}

  std::optional<std::string> str(const char* key, bool allow_nul = false);
  std::optional<bool> boolean(const char* key);
  // A positive whole number (or any integer when `positive` is false).
  std::optional<int64_t> integer(const char* key, bool positive);
  std::optional<double> positiveNumber(const char* key);
  std::optional<std::map<std::string, std::string>> stringMap(const char* key);
  std::optional<std::vector<std::string>> stringArray(const char* key);
  // The raw value (marks the key known); nullptr when absent or null.
  const Json* raw(const char* key) { return get(key); }

  // The field's name in messages: the prefix and the key.
  std::string name(const std::string& key) const { return prefix_ + key; }
  void setError(std::string message) {
    if (!error_) error_ = std::move(message);
  }
  void typeError(const std::string& key, const char* expected, const Json& got);
  // The first error, or an unknown field (with a suggestion when one is close).
  std::optional<std::string> finish();

 private:
  const Json* get(const char* key);

  const Json& obj_;
  std::string prefix_;
  std::set<std::string> known_;
  std::optional<std::string> error_;
};

std::unexpected<sandbox::ServiceError> badRequest(std::string message);

// The objects of an array field, each read by `item` with its own Fields ("files_in[0].path");
// at most `max` of them (`noun` names them in the error).
template <typename Item>
void objectArray(Fields& f, const char* key, size_t max, const char* noun, Item item) {
  const Json* v = f.raw(key);
  if (v == nullptr) return;
  if (!v->is_array()) return f.typeError(key, "an array of objects", *v);
  if (v->size() > max)
    return f.setError("field '" + f.name(key) + "': at most " + std::to_string(max) + " " + noun +
                      ", got " + std::to_string(v->size()));
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& obj = (*v)[i];
    std::string at = std::string(key) + "[" + std::to_string(i) + "]";
    if (!obj.is_object()) return f.typeError(at, "an object", obj);
    Fields sub(obj, f.name(at) + ".");
    item(sub);
    if (auto err = sub.finish()) return f.setError(*err);
  }
}

// Decodes `body` as an object and runs `fill` over its fields; the shared frame of every decoder.
template <typename T, typename Fill>
SResult<T> decodeObject(std::string_view body, bool empty_is_object, Fill fill) {
  auto obj = parseJsonObject(body, empty_is_object);
  if (!obj) return std::unexpected(obj.error());
  Fields f(*obj);
  T out{};
  fill(f, out);
  if (auto err = f.finish()) return badRequest(*err);
  return out;
}

void requireAbsolutePath(Fields& f, const char* key, const std::optional<std::string>& v,
                         std::string& out);

// `text_key` (text) or `b64_key` (base64), at most one; the bytes, or nullopt when neither is
// given or on an error.
std::optional<std::string> textOrBase64(Fields& f, const char* text_key, const char* b64_key);

}  // namespace airlock::api
