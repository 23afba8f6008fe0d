// Bytes from a sandbox on their way into JSON events: text when it is UTF-8, base64 when not
// (supervisor/encoding/base64.h).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace airlock::sandbox {

// Splits a byte stream into event payloads without cutting a UTF-8 sequence in two: an
// incomplete sequence at the end of one chunk waits for the next chunk.
class OutputEncoder {
 public:
  // Sets "data" (valid UTF-8) or "data_base64" on `event` for the bytes that are complete.
  // Returns false when nothing is ready yet (only a partial sequence was buffered).
  bool encode(std::string_view chunk, nlohmann::json& event);
  // The bytes still held at the end of the stream, if any.
  bool flush(nlohmann::json& event);

 private:
  std::string pending_;
};

}  // namespace airlock::sandbox
