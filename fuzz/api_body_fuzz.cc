// The JSON request bodies of the HTTP API (supervisor/api/request_decoding.cc, run_decoding.cc,
// json_fields.cc): every body decoder gets the same bytes, as any of them may get any body a
// client sends. Also the signal and mode texts the decoders and query strings take.
//
// Invariants checked: decoders return a value or a 400 naming what was wrong, never throw;
// parseSignal and parseOctalMode return only what they promise (1..64, bits within 07777).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "supervisor/api/request_decoding.h"
#include "support/fuzz_check.h"

namespace api = airlock::api;
using airlock::sandbox::ErrorCode;

namespace {

template <typename Decode>
void decode(std::string_view body, Decode decoder) {
  auto r = decoder(body);
  if (!r) {
    FUZZ_CHECK(r.error().code == ErrorCode::kBadRequest ||
               r.error().code == ErrorCode::kPayloadTooLarge);
    FUZZ_CHECK(!r.error().message.empty());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  decode(body, api::decodeCreateSandbox);
  decode(body, api::decodeKeepAlive);
  decode(body, api::decodeNetworkRules);
  decode(body, api::decodeReviewDecision);
  decode(body, api::decodeRunCommand);
  decode(body, api::decodeStdin);
  decode(body, api::decodeSignal);
  decode(body, api::decodeRunCode);
  decode(body, api::decodeCreateContext);
  decode(body, api::decodeWriteFile);
  decode(body, api::decodeTransfer);
  decode(body, api::decodeReadFile);
  decode(body, api::decodeMkdir);
  decode(body, api::decodeRemove);
  decode(body, api::decodeRename);
  decode(body, api::decodeRun);
  for (bool empty_is_object : {false, true}) {
    auto obj = api::parseJsonObject(body, empty_is_object);
    if (obj) FUZZ_CHECK(obj->is_object());
  }
  if (size <= 64) {
    if (auto signo = api::parseSignal(body)) FUZZ_CHECK(*signo >= 1 && *signo <= 64);
    if (auto mode = api::parseOctalMode(body)) FUZZ_CHECK(*mode <= 07777);
  }
  return 0;
}
