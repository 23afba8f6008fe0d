// airlock.transfer.archive: local archive files, for `airlock run --in ./repo.tar.gz:DIR` and
// `--out DIR:./results.tar.zst`. In, it opens the file for the host to stream; out, it gives the
// host an unnamed file (O_TMPFILE) beside the destination and links it into place only when the
// packing succeeded, so a failed or cut transfer never leaves a half-written archive behind, and
// a destination that exists is replaced in one rename.
//
// Local paths name the supervisor's own files, so the supervisor lets only `airlock run` (whose
// caller already has them) use this plugin, never an API client.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <airlock/plugin.hpp>

#include <cstring>
#include <string>

namespace {

using airlock::sdk::PluginError;

// Names are matched case-insensitively from the end: "results.TAR.GZ" is a tar.gz.
std::string formatOf(std::string_view path) {
  std::string lower(path);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::pair<const char*, const char*> kinds[] = {
      {".tar.gz", "tar.gz"}, {".tgz", "tar.gz"}, {".tar.zst", "tar.zst"},
      {".tzst", "tar.zst"},  {".tar", "tar"},    {".zip", "zip"}};
  for (const auto& [suffix, format] : kinds)
    if (lower.ends_with(suffix)) return format;
  return "";
}

std::string named(std::string_view path) { return "'" + std::string(path) + "'"; }

[[noreturn]] void sysFail(std::string_view path, const char* what) {
  const int e = errno;
  throw PluginError(e, named(path) + ": " + what + ": " + std::strerror(e));
}

// The packed archive, unnamed until finish(true) links it as `dest`.
class Destination final : public airlock::sdk::TransferPlugin::Stream {
 public:
  Destination(int fd, std::string dest) : fd_(fd), dest_(std::move(dest)) {}
  ~Destination() override { ::close(fd_); }

  void finish(bool ok) override {
    if (!ok) return;  // the unnamed file goes with its last fd
    // linkat cannot replace a name: link under a temporary one, then rename over the old file.
    const std::string tmp = dest_ + ".airlock-" + std::to_string(::getpid()) + "-" +
                            std::to_string(reinterpret_cast<uintptr_t>(this) & 0xffffff);
    const std::string self = "/proc/self/fd/" + std::to_string(fd_);
    if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) != 0)
      sysFail(dest_, "linking the packed archive");
    if (::rename(tmp.c_str(), dest_.c_str()) != 0) {
      const int e = errno;
      ::unlink(tmp.c_str());
      errno = e;
      sysFail(dest_, "renaming the packed archive into place");
    }
  }

 private:
  int fd_;
  std::string dest_;
};

class Archive final : public airlock::sdk::TransferPlugin {
 public:
  using TransferPlugin::TransferPlugin;
  static constexpr const char* kPrefixes[] = {"", "file://", nullptr};

  Opened open(const Request& r) override {
    std::string path(r.location);
    if (path.starts_with("file://")) path = path.substr(7);
    if (path.empty()) throw PluginError(EINVAL, "an empty archive path");
    Opened o;
    o.display = path;
    if (r.direction == Direction::kIn) {
      o.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
      if (o.fd < 0) sysFail(path, "opening the archive");
      struct stat st {};
      if (::fstat(o.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(o.fd);
        throw PluginError(EINVAL, named(path) + ": not a regular file");
      }
      ::fcntl(o.fd, F_SETFL, 0);  // O_NONBLOCK only so a FIFO cannot hang the open
      if (r.max_bytes != 0 && static_cast<uint64_t>(st.st_size) > r.max_bytes) {
        ::close(o.fd);
        throw PluginError(EFBIG, named(path) + ": " + std::to_string(st.st_size) +
                                     " bytes, more than the transfer limit of " +
                                     std::to_string(r.max_bytes));
      }
      o.size = static_cast<uint64_t>(st.st_size);
      return o;
    }
    o.format = formatOf(path);
    if (o.format.empty())
      throw PluginError(
          EINVAL, named(path) + ": not an archive name (.tar, .tar.gz, .tgz, .tar.zst, .zip)");
    const size_t slash = path.rfind('/');
    const std::string dir =
        slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
    const int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) sysFail(dir, "creating the archive's file in its directory");
    o.fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);  // the host's copy; ours links the file at the end
    if (o.fd < 0) {
      ::close(fd);
      sysFail(path, "dup");
    }
    o.stream = std::make_unique<Destination>(fd, path);
    return o;
  }
};

}  // namespace

AIRLOCK_TRANSFER_PLUGIN(Archive, "airlock.transfer.archive", "1.0.0")
