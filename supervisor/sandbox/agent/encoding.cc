#include "supervisor/sandbox/agent/encoding.h"

#include "supervisor/encoding/base64.h"

namespace airlock::sandbox {

namespace {

// Length of the UTF-8 sequence a lead byte starts (0: not a lead byte).
size_t sequenceLength(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 0;
}

void setData(std::string_view bytes, nlohmann::json& event) {
  if (encoding::isValidUtf8(bytes))
    event["data"] = std::string(bytes);
  else
    event["data_base64"] = encoding::base64Encode(bytes);
}

}  // namespace

bool OutputEncoder::encode(std::string_view chunk, nlohmann::json& event) {
  std::string bytes = std::move(pending_);
  pending_.clear();
  bytes.append(chunk);
  // Hold back a trailing sequence that is valid so far but incomplete.
  size_t keep = 0;
  for (size_t back = 1; back <= 3 && back <= bytes.size(); ++back) {
    auto c = static_cast<unsigned char>(bytes[bytes.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    size_t len = sequenceLength(c);
    if (len > back) keep = back;
    break;
  }
  if (keep > 0) {
    pending_ = bytes.substr(bytes.size() - keep);
    bytes.resize(bytes.size() - keep);
  }
  if (bytes.empty()) return false;
  setData(bytes, event);
  return true;
}

bool OutputEncoder::flush(nlohmann::json& event) {
  if (pending_.empty()) return false;
  setData(pending_, event);
  pending_.clear();
  return true;
}

}  // namespace airlock::sandbox
