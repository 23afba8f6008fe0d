// airlock files put|get|ls: files streamed into and out of a sandbox of a running `airlock serve`,
// with progress, and directory listings.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "airlock/unique_fd.h"
#include "supervisor/cli/cli.h"
#include "supervisor/cli/client_support.h"

namespace po = boost::program_options;

namespace airlock::cli {

namespace {

using client::percentEncode;
using Clock = std::chrono::steady_clock;

constexpr const char* kFilesUsage = R"(Usage:
  airlock files put SB LOCAL SANDBOX_PATH [--mode OCTAL] [--progress]
  airlock files get SB SANDBOX_PATH LOCAL [--progress]
  airlock files ls SB [SANDBOX_PATH] [--json]

Copies files into and out of sandbox SB, streaming them (any size). Relative sandbox paths are
under /home/user; a SANDBOX_PATH ending in '/' (put) or a LOCAL directory (get) keeps the file's
name; LOCAL '-' (get) writes to stdout. Progress goes to stderr when it is a terminal or with
--progress.

Exit code: 0 on success; 125 when the transfer failed.
)";

std::string humanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

// Relative sandbox paths are under /home/user, as in `airlock run --file`.
std::string sandboxPath(const std::string& p) { return p.starts_with('/') ? p : "/home/user/" + p; }

// Progress of one transfer on stderr: a live line once it has taken over half a second, and
// the size and rate at the end.
class TransferProgress {
 public:
  TransferProgress(bool enabled, std::string verb) : enabled_(enabled), verb_(std::move(verb)) {}

  void update(uint64_t done, std::optional<uint64_t> total) {
    if (!enabled_) return;
    auto now = Clock::now();
    if (now - start_ < std::chrono::milliseconds(500) ||
        now - last_ < std::chrono::milliseconds(100))
      return;
    last_ = now;
    std::string line = "\r" + verb_ + " " + humanBytes(static_cast<double>(done));
    if (total && *total > 0)
      line += " / " + humanBytes(static_cast<double>(*total)) + " (" +
              std::to_string(done * 100 / *total) + "%)";
    line += "  " + humanBytes(rate(done)) + "/s   ";
    std::cerr << line << std::flush;
    shown_ = true;
  }

  void finish(uint64_t bytes) {
    if (!enabled_) return;
    double secs = std::chrono::duration<double>(Clock::now() - start_).count();
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s %s (%llu bytes) in %.2f s, %s/s", verb_.c_str(),
                  humanBytes(static_cast<double>(bytes)).c_str(),
                  static_cast<unsigned long long>(bytes), secs, humanBytes(rate(bytes)).c_str());
    std::cerr << (shown_ ? "\r\033[K" : "") << buf << "\n";
  }

 private:
  double rate(uint64_t bytes) const {
    double secs = std::chrono::duration<double>(Clock::now() - start_).count();
    return secs > 0 ? static_cast<double>(bytes) / secs : 0;
  }

  bool enabled_;
  std::string verb_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_{};
  bool shown_ = false;
};

std::string filesTarget(const std::string& sb, const std::string& route, const std::string& path) {
  return sandboxTarget(sb) + "/files" + route + "?path=" + percentEncode(path);
}

int filesPut(const Client& c, const std::vector<std::string>& positional, uint32_t mode,
             bool has_mode, bool progress) {
  if (positional.size() != 3)
    return report("files put: expected SB LOCAL SANDBOX_PATH"), kExitFailed;
  const std::string& local = positional[1];
  std::string dest = sandboxPath(positional[2]);
  if (dest.ends_with('/')) dest += std::filesystem::path(local).filename().string();
  UniqueFd fd(::open(local.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return report("files put: " + sysError("open", local).error().message()), kExitFailed;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return report("files put: " + sysError("fstat", local).error().message()), kExitFailed;
  if (!S_ISREG(st.st_mode))
    return report("files put: '" + local + "' is not a regular file"), kExitFailed;
  char mode_text[16];
  std::snprintf(mode_text, sizeof mode_text, "%04o", has_mode ? mode : (st.st_mode & 07777));
  std::string target = filesTarget(positional[0], "", dest) + "&mode=" + mode_text;
  TransferProgress p(progress, "sent");
  auto r = c.upload(target, fd.get(), static_cast<uint64_t>(st.st_size),
                    [&](uint64_t done, std::optional<uint64_t> total) { p.update(done, total); });
  if (!r) return report(r.error().message()), kExitFailed;
  p.finish(static_cast<uint64_t>(st.st_size));
  return 0;
}

int filesGet(const Client& c, const std::vector<std::string>& positional, bool progress) {
  if (positional.size() != 3)
    return report("files get: expected SB SANDBOX_PATH LOCAL"), kExitFailed;
  std::string src = sandboxPath(positional[1]);
  std::string local = positional[2];
  std::string target = filesTarget(positional[0], "", src);
  TransferProgress p(progress, "received");
  auto on_progress = [&](uint64_t done, std::optional<uint64_t> total) { p.update(done, total); };
  if (local == "-") {
    auto r = c.download(target, STDOUT_FILENO, on_progress);
    if (!r) return report(r.error().message()), kExitFailed;
    p.finish(*r);
    return 0;
  }
  std::error_code ec;
  if (std::filesystem::is_directory(local, ec))
    local = (std::filesystem::path(local) / std::filesystem::path(src).filename()).string();
  // Written beside the destination and renamed at the end, so a failed transfer leaves no
  // half file under the final name.
  std::string partial = local + ".airlock-partial-" + std::to_string(::getpid());
  UniqueFd fd(::open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
  if (!fd) return report("files get: " + sysError("open", partial).error().message()), kExitFailed;
  auto r = c.download(target, fd.get(), on_progress);
  if (r && ::fsync(fd.get()) != 0) r = sysError("fsync", partial);
  fd.reset();
  if (r && ::rename(partial.c_str(), local.c_str()) != 0) r = sysError("rename", local);
  if (!r) {
    ::unlink(partial.c_str());
    std::string m = r.error().message();
    report(m.starts_with("write") || m.starts_with("fsync") || m.starts_with("rename")
               ? "files get: " + m
               : m);
    return kExitFailed;
  }
  p.finish(*r);
  return 0;
}

std::string modeText(const std::string& type, uint32_t mode) {
  std::string s = type == "dir" ? "d" : type == "symlink" ? "l" : type == "file" ? "-" : "?";
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) s += (mode & (0400u >> i)) ? rwx[i] : '-';
  return s;
}

std::string timeText(int64_t ms) {
  if (ms <= 0) return "-";
  time_t t = static_cast<time_t>(ms / 1000);
  struct tm tm {};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

int filesList(const Client& c, const std::vector<std::string>& positional, bool json) {
  if (positional.empty() || positional.size() > 2)
    return report("files ls: expected SB [SANDBOX_PATH]"), kExitFailed;
  std::string path = sandboxPath(positional.size() == 2 ? positional[1] : "/home/user");
  return orFail(c.call("GET", filesTarget(positional[0], "/list", path)), [&](const Json& answer) {
    if (json) {
      std::cout << answer.dump(2) << "\n";
      return 0;
    }
    std::vector<std::vector<std::string>> rows;
    if (answer.contains("entries") && answer["entries"].is_array())
      for (const auto& e : answer["entries"]) {
        std::string type = str(e, "type");
        std::string suffix = type == "dir" ? "/" : type == "symlink" ? "@" : "";
        rows.push_back({modeText(type, static_cast<uint32_t>(num(e, "mode"))),
                        std::to_string(num(e, "size")), timeText(num(e, "mtime_ms")),
                        str(e, "name") + suffix});
      }
    printTable(rows);
    return 0;
  });
}

}  // namespace

int filesCommand(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kFilesUsage;
    return args.empty() ? kExitFailed : 0;
  }
  const std::string verb = args[0];
  if (verb != "put" && verb != "get" && verb != "ls") {
    report("files: unknown subcommand '" + verb + "'\n" + kFilesUsage);
    return kExitFailed;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end()), positional;
  std::string mode_text;
  bool progress = false, json = false;
  po::options_description opts(std::string(kFilesUsage) + "\nOptions");
  opts.add_options()("mode", po::value(&mode_text),
                     "put: permission bits, octal (default: LOCAL's)")(
      "progress", po::bool_switch(&progress), "show progress even when stderr is not a terminal")(
      "json", po::bool_switch(&json), "ls: print the answer as JSON");
  po::variables_map vm;
  if (auto exit = parseArgs("files " + verb, rest, opts, vm, positional)) return *exit;
  uint32_t mode = 0;
  if (vm.count("mode")) {
    char* end = nullptr;
    unsigned long m = std::strtoul(mode_text.c_str(), &end, 8);
    if (mode_text.empty() || *end != '\0' || m > 07777)
      return report("files put: --mode '" + mode_text + "': expected octal bits like 0644"),
             kExitFailed;
    mode = static_cast<uint32_t>(m);
  }
  progress = progress || isatty(STDERR_FILENO);
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;
  if (verb == "put") return filesPut(*c, positional, mode, vm.count("mode") > 0, progress);
  if (verb == "get") return filesGet(*c, positional, progress);
  return filesList(*c, positional, json);
}

}  // namespace airlock::cli
