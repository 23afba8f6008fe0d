// The agent channel codec (protocol/codec.cc) fed a byte stream as a hostile agent (or a broken
// supervisor) could write it: FrameReader splits it into frames, and each frame's payload goes to
// the decoder of its type, the one the receiving side would call.
//
// Invariants checked:
// - FrameReader yields the same frames whether the bytes come at once or in small pieces;
// - every decoded message re-encodes to a frame that decodes again, and encoding that second
//   decode gives the same bytes (decode -> encode -> decode -> encode is stable), with the
//   frame's type and request id kept.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "airlock/protocol/messages.h"
#include "support/fuzz_check.h"

namespace proto = airlock::protocol;

namespace {

using Frame = std::pair<proto::FrameHeader, std::string>;

// Every whole frame in `bytes` fed `piece` bytes at a time, up to the first corrupt header.
std::vector<Frame> readFrames(std::string_view bytes, size_t piece, bool& corrupt) {
  proto::FrameReader reader;
  std::vector<Frame> frames;
  corrupt = false;
  for (size_t at = 0; at < bytes.size() && !corrupt; at += piece) {
    reader.feed(bytes.substr(at, piece));
    while (true) {
      auto next = reader.next();
      if (!next) {
        FUZZ_CHECK(!next.error().message().empty());
        corrupt = true;
        break;
      }
      if (!*next) break;
      FUZZ_CHECK((*next)->second.size() == (*next)->first.payload_len);
      frames.push_back(std::move(**next));
    }
  }
  return frames;
}

template <typename Decode>
void roundTrip(const proto::FrameHeader& header, std::string_view payload, Decode decode) {
  auto first = decode(payload);
  if (!first) {
    FUZZ_CHECK(!first.error().message().empty());
    return;
  }
  std::string once;
  proto::encode(once, header.request_id, *first);
  auto once_header = proto::decodeHeader(once);
  // Defaults the payload left out are written back, so a frame near kMaxPayload may outgrow it.
  if (!once_header) {
    FUZZ_CHECK(once.size() > proto::kHeaderSize + proto::kMaxPayload);
    return;
  }
  FUZZ_CHECK(once_header->type == header.type);
  FUZZ_CHECK(once_header->request_id == header.request_id);
  FUZZ_CHECK(once_header->payload_len == once.size() - proto::kHeaderSize);
  auto second = decode(std::string_view(once).substr(proto::kHeaderSize));
  FUZZ_CHECK(second.has_value());
  std::string twice;
  proto::encode(twice, header.request_id, *second);
  FUZZ_CHECK(once == twice);
}

void decodeFrame(const Frame& frame) {
  const auto& [h, payload] = frame;
  using T = proto::MsgType;
  switch (h.type) {
    case T::kHello:
      return roundTrip(h, payload, proto::decodeHello);
    case T::kConfigure:
      return roundTrip(h, payload, proto::decodeConfigure);
    case T::kExec:
      return roundTrip(h, payload, proto::decodeExec);
    case T::kStdin:
      return roundTrip(h, payload, proto::decodeStdin);
    case T::kSignal:
      return roundTrip(h, payload, proto::decodeSignal);
    case T::kOutput:
      return roundTrip(h, payload, proto::decodeOutput);
    case T::kExited:
      return roundTrip(h, payload, proto::decodeExited);
    case T::kError:
      return roundTrip(h, payload, proto::decodeError);
    case T::kFileWrite:
      return roundTrip(h, payload, proto::decodeFileWrite);
    case T::kFileRead:
      return roundTrip(h, payload, proto::decodeFileRead);
    case T::kFileData:
      return roundTrip(h, payload, proto::decodeFileData);
    case T::kStarted:
      return roundTrip(h, payload, proto::decodeStarted);
    case T::kFileList:
      return roundTrip(h, payload, proto::decodeFileList);
    case T::kFileStat:
      return roundTrip(h, payload, proto::decodeFileStat);
    case T::kFileEntries:
      return roundTrip(h, payload, proto::decodeFileEntries);
    case T::kFileMkdir:
      return roundTrip(h, payload, proto::decodeFileMkdir);
    case T::kFileRemove:
      return roundTrip(h, payload, proto::decodeFileRemove);
    case T::kFileRename:
      return roundTrip(h, payload, proto::decodeFileRename);
    case T::kReattached:
      return roundTrip(h, payload, proto::decodeReattached);
    case T::kPortOpen:
      return roundTrip(h, payload, proto::decodePortOpen);
    case T::kPortData:
      return roundTrip(h, payload, proto::decodePortData);
    case T::kPortCredit:
      return roundTrip(h, payload, proto::decodePortCredit);
    case T::kPortClose:
      return roundTrip(h, payload, proto::decodePortClose);
    case T::kReattach:
      return roundTrip(h, payload, proto::decodeReattach);
    case T::kNote:
      return roundTrip(h, payload, proto::decodeNote);
    case T::kShutdown:
    case T::kResume:
    case T::kOk:
      return;  // no fields: receivers ignore the payload
  }
  FUZZ_CHECK(false && "decodeHeader let an unknown message type through");
}

bool sameFrames(const std::vector<Frame>& a, const std::vector<Frame>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first.type != b[i].first.type || a[i].first.request_id != b[i].first.request_id ||
        a[i].first.flags != b[i].first.flags || a[i].second != b[i].second)
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  bool corrupt_whole = false, corrupt_pieces = false;
  const auto whole = readFrames(bytes, bytes.size() + 1, corrupt_whole);
  // Reads from a socket come in pieces of any size; 1..7 bytes covers splits inside headers.
  const auto pieces = readFrames(bytes, 1 + size % 7, corrupt_pieces);
  FUZZ_CHECK(corrupt_whole == corrupt_pieces);
  FUZZ_CHECK(sameFrames(whole, pieces));
  for (const auto& frame : whole) decodeFrame(frame);
  return 0;
}
