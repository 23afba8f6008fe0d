// Mutation fuzzing of agent frames: corrupted, truncated and spliced frames must yield a clean
// error or a valid message, never a crash, a hang or unbounded buffering. Deterministic seed.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "airlock/protocol/messages.h"

namespace airlock::protocol {
namespace {

std::vector<std::string> seedFrames() {
  std::vector<std::string> frames;
  auto add = [&](auto m) {
    std::string f;
    encode(f, 7, m);
    frames.push_back(std::move(f));
  };
  add(Hello{kProtocolVersion, "0.1.0", 1});
  add(Configure{
      1000, 1000, 0, std::string(24, '\0'), {{7, 64, 64}}, {"/home/user", "/tmp"}, true, 0});
  add(Exec{{"/bin/sh", "-c", "echo hi"},
           {"PATH=/bin", "HOME=/home/user"},
           "/home/user",
           1000,
           4096,
           4096,
           true,
           true,
           ExecKillScope::kSession});
  add(Stdin{"input", true});
  add(Signal{15});
  add(Output{Stream::kStderr, "err"});
  add(Exited{0, 0, false, true, false, 10, 20, 30, 40, 50, 60});
  add(ErrorMsg{2, "exec", "execve '/x': ENOENT"});
  add(FileWrite{"/home/user/f", 0644, "abc", true, false});
  add(FileRead{"/home/user/f", 100});
  add(FileData{"abc", true, 3});
  add(Output{Stream::kControl, "{}"});
  add(Shutdown{});
  add(Ok{});
  add(Started{17});
  add(FileList{"/home/user"});
  add(FileStat{"/home/user/a"});
  add(FileEntries{
      {{"a", FileType::kFile, 3, 0644, 1700000000000}, {"d", FileType::kDir, 4096, 0755, 0}},
      false});
  add(FileMkdir{"/home/user/d/e", true, 0700});
  add(FileRemove{"/home/user/d", true});
  add(FileRename{"/home/user/a", "/home/user/b"});
  add(PortOpen{8000});
  add(PortData{"GET / HTTP/1.1\r\n\r\n", true});
  add(PortCredit{4096});
  add(PortClose{104});
  return frames;
}

// Decodes by type; on success re-encodes, which must decode again (canonical form is stable).
bool decodeAndRecheck(const FrameHeader& h, const std::string& p) {
  auto recheck = [&](const auto& decoded, auto decoder) -> bool {
    if (!decoded) return false;
    std::string again;
    encode(again, h.request_id, *decoded);
    auto d2 = decoder(std::string_view(again).substr(kHeaderSize));
    EXPECT_TRUE(d2) << "re-encoded " << msgTypeName(h.type) << " failed: " << d2.error().message();
    std::string third;
    if (d2) encode(third, h.request_id, *d2);
    EXPECT_EQ(again, third);
    return true;
  };
  switch (h.type) {
    case MsgType::kHello:
      return recheck(decodeHello(p), decodeHello);
    case MsgType::kConfigure:
      return recheck(decodeConfigure(p), decodeConfigure);
    case MsgType::kExec:
      return recheck(decodeExec(p), decodeExec);
    case MsgType::kStdin:
      return recheck(decodeStdin(p), decodeStdin);
    case MsgType::kSignal:
      return recheck(decodeSignal(p), decodeSignal);
    case MsgType::kOutput:
      return recheck(decodeOutput(p), decodeOutput);
    case MsgType::kExited:
      return recheck(decodeExited(p), decodeExited);
    case MsgType::kError:
      return recheck(decodeError(p), decodeError);
    case MsgType::kFileWrite:
      return recheck(decodeFileWrite(p), decodeFileWrite);
    case MsgType::kFileRead:
      return recheck(decodeFileRead(p), decodeFileRead);
    case MsgType::kFileData:
      return recheck(decodeFileData(p), decodeFileData);
    case MsgType::kStarted:
      return recheck(decodeStarted(p), decodeStarted);
    case MsgType::kFileList:
      return recheck(decodeFileList(p), decodeFileList);
    case MsgType::kFileStat:
      return recheck(decodeFileStat(p), decodeFileStat);
    case MsgType::kFileEntries:
      return recheck(decodeFileEntries(p), decodeFileEntries);
    case MsgType::kFileMkdir:
      return recheck(decodeFileMkdir(p), decodeFileMkdir);
    case MsgType::kFileRemove:
      return recheck(decodeFileRemove(p), decodeFileRemove);
    case MsgType::kFileRename:
      return recheck(decodeFileRename(p), decodeFileRename);
    case MsgType::kPortOpen:
      return recheck(decodePortOpen(p), decodePortOpen);
    case MsgType::kPortData:
      return recheck(decodePortData(p), decodePortData);
    case MsgType::kPortCredit:
      return recheck(decodePortCredit(p), decodePortCredit);
    case MsgType::kPortClose:
      return recheck(decodePortClose(p), decodePortClose);
    default:
      return true;
  }
}

std::string mutate(std::string s, std::mt19937& rng, const std::vector<std::string>& seeds) {
  int rounds = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < rounds; ++i) {
    if (s.empty()) s = seeds[rng() % seeds.size()];
    switch (rng() % 7) {
      case 0:
        s[rng() % s.size()] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:
        s[rng() % s.size()] = static_cast<char>(rng());
        break;
      case 2:
        s.resize(rng() % s.size());
        break;
      case 3:
        s.insert(rng() % (s.size() + 1), std::string(1 + rng() % 8, static_cast<char>(rng())));
        break;
      case 4:
        s += seeds[rng() % seeds.size()];
        break;
      case 5: {  // set a 32-bit length somewhere to an extreme value
        size_t at = rng() % s.size();
        uint32_t v = (rng() % 2) ? 0xffffffffu : static_cast<uint32_t>(rng() % 64);
        for (int b = 0; b < 4 && at + b < s.size(); ++b)
          s[at + b] = static_cast<char>(v >> (8 * b));
        break;
      }
      case 6: {  // duplicate a slice (repeated fields)
        size_t a = rng() % s.size(), len = 1 + rng() % 16;
        s.insert(rng() % (s.size() + 1), s.substr(a, len));
        break;
      }
    }
  }
  return s;
}

TEST(ProtocolFuzz, MutatedFramesNeverCrash) {
  std::mt19937 rng(0xa1710c);
  auto seeds = seedFrames();
  size_t decoded_ok = 0, errors = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string input = mutate(seeds[rng() % seeds.size()], rng, seeds);
    FrameReader reader;
    size_t at = 0;
    bool done = false;
    while (!done) {
      if (at < input.size()) {
        size_t n = std::min(input.size() - at, static_cast<size_t>(1 + rng() % 64));
        reader.feed(std::string_view(input).substr(at, n));
        at += n;
      }
      for (;;) {
        auto f = reader.next();
        if (!f) {
          ++errors;
          done = true;
          break;
        }
        if (!*f) break;
        ASSERT_LE((*f)->second.size(), kMaxPayload);
        if (decodeAndRecheck((*f)->first, (*f)->second))
          ++decoded_ok;
        else
          ++errors;
      }
      ASSERT_LE(reader.buffered(), input.size());
      if (at >= input.size()) done = true;
    }
    // Every decoder on the raw bytes too, as if a header had let them through.
    std::string_view raw(input);
    (void)decodeHello(raw);
    (void)decodeConfigure(raw);
    (void)decodeExec(raw);
    (void)decodeStdin(raw);
    (void)decodeSignal(raw);
    (void)decodeOutput(raw);
    (void)decodeExited(raw);
    (void)decodeError(raw);
    (void)decodeFileWrite(raw);
    (void)decodeFileRead(raw);
    (void)decodeFileData(raw);
    (void)decodeStarted(raw);
    (void)decodeFileList(raw);
    (void)decodeFileStat(raw);
    (void)decodeFileEntries(raw);
    (void)decodeFileMkdir(raw);
    (void)decodeFileRemove(raw);
    (void)decodeFileRename(raw);
  }
  // Both outcomes must occur, or the mutator is not exercising the decoder.
  EXPECT_GT(decoded_ok, 1000u);
  EXPECT_GT(errors, 1000u);
}

}  // namespace
}  // namespace airlock::protocol
