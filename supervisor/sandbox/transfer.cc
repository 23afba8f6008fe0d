#include "supervisor/sandbox/transfer.h"

// SHA256_* rather than EVP, as policy/hash.cc explains (no provider tables to initialize).
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
#include <unistd.h>

#include <csignal>

#include "supervisor/sandbox/agent/program.h"
#include "supervisor/sandbox/transfer_output.h"

namespace airlock::sandbox {
namespace {

using Clock = std::chrono::steady_clock;

// The helper is the agent's own binary: /proc/self/exe in the execution's child names it.
constexpr const char* kHelper = "/proc/self/exe";
// Its stdin frames (agent/transfer_helper.h, --framed): 'D', a 4-byte length and the bytes, each
// frame fitting one Stdin message of the agent protocol; then 'E' or 'A'.
constexpr size_t kFrameChunk = protocol::kMaxChunk - 5;
// Archive bytes sent but not yet read by the helper (its "C BYTES" credit lines): the agent
// holds at most 4 MiB of stdin a process has not taken, and refuses the rest.
constexpr uint64_t kWindow = 2 << 20;  // plus one chunk in flight: under the 4 MiB
// The helper's credit lines: one per 512 KiB read, ~16 bytes each.
constexpr uint64_t kCreditBytesPerMiB = 2 * 24;
// What the helper says besides the archive: a summary line, or an error line.
constexpr uint64_t kReportCap = 16 * 1024;

class Sha256 {
 public:
  Sha256() { SHA256_Init(&ctx_); }
  void update(std::string_view bytes) { SHA256_Update(&ctx_, bytes.data(), bytes.size()); }
  std::string hex() {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256_Final(digest, &ctx_);
    static const char kHex[] = "0123456789abcdef";
    std::string out;
    for (unsigned char b : digest) {
      out += kHex[b >> 4];
      out += kHex[b & 0xf];
    }
    return out;
  }

 private:
  SHA256_CTX ctx_;
};

std::vector<std::string> limitArgs(const TransferLimits& l, bool unpack) {
  std::vector<std::string> a = {"--max-bytes", std::to_string(l.max_bytes), "--max-files",
                                std::to_string(l.max_files)};
  if (unpack) {
    a.insert(a.end(), {"--max-depth", std::to_string(l.max_depth), "--max-ratio",
                       std::to_string(l.max_ratio)});
  }
  return a;
}

protocol::Exec helperExec(std::vector<std::string> argv, const std::vector<std::string>& env,
                          Clock::time_point deadline) {
  protocol::Exec e;
  e.argv = std::move(argv);
  e.env = env;
  e.cwd = "/";
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  e.timeout_ms = left.count() > 0 ? static_cast<uint64_t>(left.count()) : 1;
  // One process of its own: the sandbox's other programs go on (a served sandbox).
  e.kill_scope = protocol::ExecKillScope::kSession;
  return e;
}

Result<> exitedOk(const ProgramOutcome& o, const std::string& report, const std::string& what) {
  if (!o.error.empty()) return fail(what + ": " + o.error);
  if (o.exited.timed_out) return fail(what + ": the time limit passed");
  if (o.exited.signal != 0)
    return fail(what + ": the helper was killed by signal " + std::to_string(o.exited.signal));
  if (o.exited.exit_code != 0)
    return fail(what + ": " + (report.empty() ? "the helper failed" : lastLine(report)));
  return {};
}

}  // namespace

Result<TransferSummary> unpackInto(AgentConnection& conn, const std::string& dir,
                                   const ChunkSource& source, const TransferLimits& limits,
                                   const std::vector<std::string>& env, Clock::time_point deadline,
                                   const TransferHooks& hooks) {
  const auto t0 = Clock::now();
  std::vector<std::string> argv = {kHelper, "--unpack", dir, "--framed"};
  for (auto& a : limitArgs(limits, true)) argv.push_back(std::move(a));
  if (hooks.review) {
    argv.push_back("--listing");
    argv.push_back(std::to_string(kListingCap));
  }
  protocol::Exec exec = helperExec(std::move(argv), env, deadline);
  exec.stdin_pipe = true;
  exec.stdout_cap = exec.stderr_cap = kReportCap;
  exec.stdout_cap += (limits.max_bytes >> 20) * kCreditBytesPerMiB;
  if (hooks.review) exec.stdout_cap += kListingCap;
  auto run = ProgramRun::start(conn, exec);
  if (!run) return Unexpected(run.error());

  TransferSummary sum;
  Sha256 sha;
  std::string source_error;
  // What the helper says: credit lines while it reads, then the listing (when reviewed) and
  // the summary. The review runs here, on this thread, once the listing is complete.
  std::string out, err, review_error;
  bool answered = false;
  uint64_t credited = 0;
  size_t scanned = 0;  // of `out`, for credit lines
  const OutputFn on_output = [&](protocol::Stream s, std::string_view bytes) {
    if (s != protocol::Stream::kStdout) {
      err.append(bytes);
      return;
    }
    out.append(bytes);
    credited = readCreditLines(out, scanned, credited);
    if (answered || !hooks.review) return;
    auto listing = completeListing(out);
    if (!listing) return;
    answered = true;
    if (auto verdict = hooks.review(*listing); !verdict) review_error = verdict.error().message();
    (*run)->write(review_error.empty() ? "C" : "A", true);
  };
  bool helper_ended = false;
  for (;;) {
    if (hooks.cancelled && hooks.cancelled()) {
      source_error = kTransferCancelled;
      break;
    }
    if (Clock::now() >= deadline) {
      source_error = "the time limit passed";
      break;
    }
    auto chunk = source();
    if (!chunk) {
      source_error = chunk.error().message();
      break;
    }
    if (chunk->empty()) {
      if (hooks.cancelled && hooks.cancelled()) {
        source_error = kTransferCancelled;  // a cancel shuts the source, which reads as its end
      } else if (hooks.complete) {
        if (auto done = hooks.complete(); !done) source_error = done.error().message();
      }
      break;
    }
    sum.moved_bytes += chunk->size();
    if (sum.moved_bytes > limits.max_bytes) {
      source_error = "the archive is larger than " + std::to_string(limits.max_bytes) + " bytes";
      break;
    }
    sha.update(*chunk);
    for (size_t at = 0; at < chunk->size(); at += kFrameChunk) {
      const std::string_view part = std::string_view(*chunk).substr(at, kFrameChunk);
      const uint32_t n = static_cast<uint32_t>(part.size());
      std::string frame = "D";
      for (int i = 0; i < 4; ++i) frame += static_cast<char>((n >> (8 * i)) & 0xff);
      frame.append(part);
      (*run)->write(std::move(frame), false);
    }
    if (hooks.progress) hooks.progress(sum.moved_bytes);
    // Flow control: wait for the helper to read what it has before sending more.
    while (sum.moved_bytes > credited + kWindow && source_error.empty()) {
      auto more = (*run)->pump(on_output, deadline);
      if (!more) source_error = more.error().message();
      if (more && !*more) helper_ended = true;  // it failed: wait() below says why
      if (!more || !*more) break;
    }
    if (!source_error.empty() || helper_ended) break;
  }
  // 'A': the helper removes what it staged, whatever it parsed so far. With a review to come,
  // stdin stays open for its answer.
  const bool reviewing = hooks.review && source_error.empty() && !helper_ended;
  if (!helper_ended) (*run)->write(source_error.empty() ? "E" : "A", !reviewing);
  answered = answered || !reviewing;
  auto outcome = (*run)->wait(on_output, deadline);
  if (!outcome) return Unexpected(outcome.error());
  if (!source_error.empty()) return fail(source_error);
  if (!review_error.empty()) return fail(review_error);
  if (auto ok = exitedOk(*outcome, err, "unpacking into " + dir); !ok)
    return Unexpected(ok.error());
  if (auto r = readSummary(lastLine(out), sum); !r) return Unexpected(r.error());
  sum.sha256 = sha.hex();
  sum.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return sum;
}

Result<TransferSummary> packFrom(AgentConnection& conn, const std::string& dir,
                                 const std::string& format, const ChunkSink& sink,
                                 const TransferLimits& limits, const std::vector<std::string>& env,
                                 Clock::time_point deadline, const TransferHooks& hooks) {
  const auto t0 = Clock::now();
  std::vector<std::string> argv = {kHelper, "--pack", dir, "--format", format};
  for (auto& a : limitArgs(limits, false)) argv.push_back(std::move(a));
  protocol::Exec exec = helperExec(std::move(argv), env, deadline);
  // The archive may be as large as the limit; past it the agent stops forwarding (truncated).
  exec.stdout_cap = limits.max_bytes + 1;
  exec.stderr_cap = kReportCap;
  auto run = ProgramRun::start(conn, exec);
  if (!run) return Unexpected(run.error());

  TransferSummary sum;
  Sha256 sha;
  std::string err, sink_error;
  auto outcome = (*run)->wait(
      [&](protocol::Stream s, std::string_view bytes) {
        if (s != protocol::Stream::kStdout) {
          err.append(bytes);
          return;
        }
        if (!sink_error.empty()) return;
        sum.moved_bytes += bytes.size();
        if (sum.moved_bytes > limits.max_bytes) {
          sink_error = "the archive is larger than " + std::to_string(limits.max_bytes) + " bytes";
          (void)(*run)->signal(SIGKILL);
          return;
        }
        sha.update(bytes);
        if (hooks.cancelled && hooks.cancelled()) {
          sink_error = kTransferCancelled;
          (void)(*run)->signal(SIGKILL);
          return;
        }
        if (auto r = sink(bytes); !r) {
          sink_error = r.error().message();
          (void)(*run)->signal(SIGKILL);
          return;
        }
        if (hooks.progress) hooks.progress(sum.moved_bytes);
      },
      deadline);
  if (!outcome) return Unexpected(outcome.error());
  if (!sink_error.empty()) return fail(sink_error);
  if (auto ok = exitedOk(*outcome, err, "packing " + dir); !ok) return Unexpected(ok.error());
  if (outcome->exited.stdout_truncated)
    return fail("the archive is larger than " + std::to_string(limits.max_bytes) + " bytes");
  if (auto r = readSummary(lastLine(err), sum); !r) return Unexpected(r.error());
  sum.sha256 = sha.hex();
  sum.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return sum;
}

ChunkSource fdChunks(int fd, std::string what) {
  return [fd, what = std::move(what)]() -> Result<std::string> {
    std::string buf(1 << 20, '\0');
    for (;;) {
      ssize_t n = ::read(fd, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return sysError("read", what);
      buf.resize(static_cast<size_t>(n));
      return buf;
    }
  };
}

}  // namespace airlock::sandbox
