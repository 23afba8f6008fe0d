// airlock.transfer.hostdir: directories the operator declared on the host, named
// `hostdir:NAME/sub/path`. In, the file or directory at sub/path is packed into a tar stream
// (a directory's contents, names relative to it; a file as one entry under its base name); out,
// the packed archive the sandbox sends is written as one file beneath a writable root.
//
// Every path is resolved with openat2(2) beneath an O_PATH fd of the root, with
// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV: `..`, an
// absolute path, a symlink anywhere on the way or a mount point makes the kernel refuse, so the
// location can never name anything outside its root, whatever the tree holds or how it changes
// meanwhile. The walk below a directory does the same one name at a time (openat with
// O_NOFOLLOW, never into another mount): a symlink in the tree is archived as a symlink, never
// followed, and the sandbox side refuses links that point outside.
//
// rules_json: {"roots": {"datasets": {"path": "/srv/data", "writable": false}, ...}}; no roots
// by default.
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <airlock/plugin.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using airlock::sdk::PluginBase;
using airlock::sdk::PluginError;
using airlock::sdk::TransferPlugin;

constexpr std::string_view kPrefix = "hostdir:";
constexpr const char* kRule = "transfer.hostdir.roots";
// One open directory per level: a bound on the fds a walk holds. The sandbox side refuses
// deeper archives long before this (docs/transfer.md, "Limits").
constexpr int kMaxDepth = 128;

std::string inQuotes(std::string_view s) { return "'" + std::string(s) + "'"; }

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

struct Root {
  std::string path;
  bool writable = false;
};

// The location, split: `hostdir:NAME/sub` → root NAME, sub "sub" (empty for the root itself;
// kept as written, so an absolute-looking `hostdir:NAME//etc` reaches openat2 as "/etc").
struct Location {
  std::string display;
  std::string root;
  std::string sub;
};

Location parseLocation(std::string_view location) {
  Location loc;
  loc.display = std::string(location);
  if (!location.starts_with(kPrefix))
    throw PluginError(EINVAL, inQuotes(location) + ": not a hostdir: location");
  const std::string_view rest = location.substr(kPrefix.size());
  const size_t slash = rest.find('/');
  loc.root = std::string(rest.substr(0, slash));
  if (slash != std::string_view::npos) loc.sub = std::string(rest.substr(slash + 1));
  if (loc.root.empty())
    throw PluginError(EINVAL, inQuotes(location) + ": names no root (hostdir:NAME/path)");
  // openat2 refuses a `..` that leaves the root; refusing every `..` first keeps that true even
  // if the kernel's check were ever bypassed, and a location never needs one.
  size_t start = 0;
  while (start <= loc.sub.size()) {
    const size_t end = std::min(loc.sub.find('/', start), loc.sub.size());
    if (std::string_view(loc.sub).substr(start, end - start) == "..")
      throw PluginError(EXDEV, inQuotes(location) + ": escapes its root (a '..' component)");
    start = end + 1;
  }
  return loc;
}

std::map<std::string, Root> parseRoots(const Location& loc, std::string_view rules_json) {
  const std::string who = inQuotes(loc.display) + ": ";
  nlohmann::json rules;
  try {
    rules = nlohmann::json::parse(rules_json);
  } catch (const nlohmann::json::exception& e) {
    throw PluginError(EINVAL, who + "the transfer.hostdir rules are not valid JSON: " + e.what());
  }
  std::map<std::string, Root> roots;
  if (!rules.is_object() || !rules.contains("roots")) return roots;
  const auto& table = rules["roots"];
  if (!table.is_object()) throw PluginError(EINVAL, who + kRule + " is not a table");
  for (const auto& [name, value] : table.items()) {
    const std::string key = std::string(kRule) + "." + name;
    if (!value.is_object()) throw PluginError(EINVAL, who + key + " is not a table");
    Root r;
    if (!value.contains("path") || !value["path"].is_string())
      throw PluginError(EINVAL, who + key + ".path is missing or not a string");
    r.path = value["path"].get<std::string>();
    if (value.contains("writable")) {
      if (!value["writable"].is_boolean())
        throw PluginError(EINVAL, who + key + ".writable is not a boolean");
      r.writable = value["writable"].get<bool>();
    }
    roots.emplace(name, std::move(r));
  }
  return roots;
}

const Root& findRoot(const Location& loc, const std::map<std::string, Root>& roots) {
  if (auto it = roots.find(loc.root); it != roots.end()) return it->second;
  std::string declared;
  for (const auto& [name, root] : roots) declared += (declared.empty() ? "" : ", ") + name;
  throw PluginError(ENOENT, inQuotes(loc.display) + ": no root " + inQuotes(loc.root) + " (" +
                                (declared.empty() ? "none declared" : "declared: " + declared) +
                                ")");
}

Fd openRoot(const Location& loc, const Root& root) {
  if (!root.path.starts_with('/'))
    throw PluginError(EINVAL, inQuotes(loc.display) + ": " + kRule + "." + loc.root +
                                  ".path is not an absolute path: " + inQuotes(root.path));
  Fd fd(::open(root.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    const int e = errno;
    throw PluginError(e, inQuotes(loc.display) + ": root " + inQuotes(loc.root) + " (" + root.path +
                             "): " + std::strerror(e));
  }
  return fd;
}

// `path` beneath the root fd, or a PluginError saying plainly why the kernel refused it.
Fd openBeneath(const Location& loc, int root_fd, const std::string& path, uint64_t flags) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  const std::string& p = path.empty() ? std::string(".") : path;
  for (int attempt = 0;; ++attempt) {
    const long fd = ::syscall(SYS_openat2, root_fd, p.c_str(), &how, sizeof how);
    if (fd >= 0) return Fd(static_cast<int>(fd));
    const int e = errno;
    // EAGAIN: a rename or mount elsewhere raced the lookup; the kernel asks for a retry.
    if ((e == EAGAIN || e == EINTR) && attempt < 16) continue;
    const std::string who = inQuotes(loc.display) + ": ";
    switch (e) {
      case EXDEV:  // RESOLVE_BENEATH (an absolute path, a `..` out) or RESOLVE_NO_XDEV
        throw PluginError(e, who + "escapes its root (or crosses a mount point)");
      case ELOOP:  // RESOLVE_NO_SYMLINKS: a symlink as any component, the last one included
        throw PluginError(e, who + "a symlink on the way (symlinks are never followed)");
      case ENOENT:
        throw PluginError(e, who + inQuotes(p) + " does not exist in root " + inQuotes(loc.root));
      case ENOTDIR:
        throw PluginError(e, who + "a component of " + inQuotes(p) + " is not a directory");
      case ENOSYS:
        throw PluginError(e, who + "openat2(2) is not available (Linux 5.6 or later needed)");
      default:
        throw PluginError(e, who + inQuotes(p) + ": " + std::strerror(e));
    }
  }
}

// What the walk needs of an inode, from statx: its attributes also tell a mount point that
// st_dev alone misses (a bind mount of the same file system).
struct Meta {
  mode_t mode = 0;
  uint64_t size = 0, ino = 0;
  dev_t dev = 0;
  bool mount_root = false;
  int64_t mtime = 0;
  uint32_t mtime_ns = 0;
};

bool statMeta(int dirfd, const char* name, int flags, Meta& m) {
  struct statx x {};
  if (::statx(dirfd, name, flags | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_BASIC_STATS, &x) !=
      0)
    return false;
  m.mode = x.stx_mode;
  m.size = x.stx_size;
  m.ino = x.stx_ino;
  m.dev = makedev(x.stx_dev_major, x.stx_dev_minor);
  m.mount_root = (x.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0 &&
                 (x.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
  m.mtime = x.stx_mtime.tv_sec;
  m.mtime_ns = x.stx_mtime.tv_nsec;
  return true;
}

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};
using ArchivePtr = std::unique_ptr<archive, decltype(&archive_write_free)>;
using EntryPtr = std::unique_ptr<archive_entry, decltype(&archive_entry_free)>;

// Walks a directory (or takes one file) and writes it to `a`; with no archive it only sums the
// sizes, for Opened.size and an early refusal past max_bytes. Devices, FIFOs, sockets and
// mount points are skipped (logged on the writing pass); anything else unreadable fails.
class Packer {
 public:
  Packer(const PluginBase& plugin, const std::string& display, uint64_t max_bytes,
         const std::atomic<bool>& stop, archive* a)
      : plugin_(plugin), display_(display), max_bytes_(max_bytes), stop_(stop), a_(a) {}

  // The contents of the directory `dir_path_fd` (O_PATH), names relative to it.
  void tree(int dir_path_fd) {
    Meta top;
    if (!statMeta(dir_path_fd, "", AT_EMPTY_PATH, top)) sysFail("the directory");
    dev_ = top.dev;
    Fd dir(::openat(dir_path_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir) sysFail("the directory");
    directory(std::move(dir), "", 0);
  }

  // One regular file as the entry `name`, read from `fd` from its start.
  void single(int fd, const std::string& name) {
    Meta m;
    if (!statMeta(fd, "", AT_EMPTY_PATH, m)) sysFail(name);
    file(fd, m, name);
  }

  uint64_t bytes() const { return bytes_; }

 private:
  [[noreturn]] void sysFail(const std::string& rel) const {
    const int e = errno;
    throw PluginError(e, inQuotes(display_) + ": " + inQuotes(rel) + ": " + std::strerror(e));
  }
  [[noreturn]] void archiveFail(const std::string& rel) const {
    const int e = archive_errno(a_);
    const char* why = archive_error_string(a_);
    throw PluginError(e > 0 ? e : EIO, inQuotes(display_) + ": " + inQuotes(rel) + ": " +
                                           (why != nullptr ? why : "libarchive failed"));
  }
  void skip(const std::string& rel, const char* what) const {
    if (a_ != nullptr)
      plugin_.log(2, inQuotes(display_) + ": skipped " + inQuotes(rel) + ", " + what);
  }

  void directory(Fd dir, const std::string& prefix, int depth) {
    if (depth >= kMaxDepth)
      throw PluginError(ELOOP, inQuotes(display_) + ": " + inQuotes(prefix) + " is more than " +
                                   std::to_string(kMaxDepth) + " levels deep");
    const int fd = dir.get();
    std::unique_ptr<DIR, DirCloser> d(::fdopendir(fd));
    if (!d) sysFail(prefix.empty() ? "." : prefix);
    dir.release();  // closedir closes it
    std::vector<std::string> names;
    errno = 0;
    while (const dirent* e = ::readdir(d.get())) {
      const std::string_view n = e->d_name;
      if (n != "." && n != "..") names.emplace_back(n);
      errno = 0;
    }
    if (errno != 0) sysFail(prefix.empty() ? "." : prefix);
    std::sort(names.begin(), names.end());  // the same tree packs to the same archive
    for (const auto& name : names) {
      if (stop_.load()) throw PluginError(ECANCELED, inQuotes(display_) + ": cancelled");
      entry(fd, name, prefix + name, depth);
    }
  }

  void entry(int parent, const std::string& name, const std::string& rel, int depth) {
    Meta m;
    if (!statMeta(parent, name.c_str(), 0, m)) {
      if (errno == ENOENT) return;  // removed since the listing: as if never there
      sysFail(rel);
    }
    const mode_t type = m.mode & S_IFMT;
    if (type == S_IFLNK) return symlink(parent, name, m, rel);
    if (type != S_IFREG && type != S_IFDIR) {
      const char* what = type == S_IFIFO    ? "a FIFO"
                         : type == S_IFSOCK ? "a socket"
                         : type == S_IFCHR  ? "a character device"
                         : type == S_IFBLK  ? "a block device"
                                            : "not a file, directory or symlink";
      return skip(rel, what);
    }
    if (m.dev != dev_ || m.mount_root) return skip(rel, "a mount point (never crossed)");
    // O_NOFOLLOW: a symlink swapped in since the stat fails here rather than being followed;
    // O_NONBLOCK: a FIFO swapped in cannot hang the open.
    const int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC |
                      (type == S_IFDIR ? O_DIRECTORY : 0);
    Fd fd(::openat(parent, name.c_str(), flags));
    if (!fd) sysFail(rel);
    Meta now;
    if (!statMeta(fd.get(), "", AT_EMPTY_PATH, now)) sysFail(rel);
    if (now.ino != m.ino || now.dev != m.dev || (now.mode & S_IFMT) != type || now.mount_root)
      throw PluginError(EAGAIN,
                        inQuotes(display_) + ": " + inQuotes(rel) + " changed while it was packed");
    if (type == S_IFREG) return file(fd.get(), now, rel);
    header(rel, now, AE_IFDIR, 0, nullptr);
    directory(std::move(fd), rel + "/", depth + 1);
  }

  void symlink(int parent, const std::string& name, const Meta& m, const std::string& rel) {
    std::string target(std::max<uint64_t>(m.size, 1) + 1, '\0');
    const ssize_t n = ::readlinkat(parent, name.c_str(), target.data(), target.size());
    if (n < 0) sysFail(rel);
    if (static_cast<size_t>(n) >= target.size())
      throw PluginError(EAGAIN,
                        inQuotes(display_) + ": " + inQuotes(rel) + " changed while it was packed");
    target.resize(static_cast<size_t>(n));
    header(rel, m, AE_IFLNK, 0, target.c_str());
  }

  void file(int fd, const Meta& m, const std::string& rel) {
    if (max_bytes_ != 0 && bytes_ + m.size > max_bytes_)
      throw PluginError(EFBIG, inQuotes(display_) + ": more than the transfer limit of " +
                                   std::to_string(max_bytes_) + " bytes (at " + inQuotes(rel) +
                                   ")");
    bytes_ += m.size;
    if (a_ == nullptr) return;
    header(rel, m, AE_IFREG, m.size, nullptr);
    std::vector<char> buf(64 * 1024);
    uint64_t left = m.size;
    while (left > 0) {
      const ssize_t n = ::read(fd, buf.data(), std::min<uint64_t>(left, buf.size()));
      if (n < 0) {
        if (errno == EINTR) continue;
        sysFail(rel);
      }
      // The header promised m.size bytes; libarchive would pad a short file with zeros.
      if (n == 0)
        throw PluginError(
            EAGAIN, inQuotes(display_) + ": " + inQuotes(rel) + " shrank while it was packed");
      if (archive_write_data(a_, buf.data(), static_cast<size_t>(n)) != n) archiveFail(rel);
      left -= static_cast<uint64_t>(n);
      if (stop_.load()) throw PluginError(ECANCELED, inQuotes(display_) + ": cancelled");
    }
  }

  void header(const std::string& rel, const Meta& m, unsigned type, uint64_t size,
              const char* link) {
    if (a_ == nullptr) return;
    EntryPtr e(archive_entry_new(), &archive_entry_free);
    if (!e) throw std::bad_alloc();
    archive_entry_copy_pathname(e.get(), rel.c_str());
    archive_entry_set_filetype(e.get(), type);
    // Permission bits and sticky; never setuid/setgid, and never the host's owners: the
    // sandbox user owns what it unpacks.
    archive_entry_set_perm(e.get(), type == AE_IFLNK ? 0777 : (m.mode & 01777));
    archive_entry_set_size(e.get(), static_cast<la_int64_t>(size));
    archive_entry_set_mtime(e.get(), m.mtime, m.mtime_ns);
    archive_entry_set_uid(e.get(), 0);
    archive_entry_set_gid(e.get(), 0);
    if (link != nullptr) archive_entry_copy_symlink(e.get(), link);
    if (archive_write_header(a_, e.get()) < ARCHIVE_WARN) archiveFail(rel);
  }

  const PluginBase& plugin_;
  const std::string& display_;
  uint64_t max_bytes_;
  const std::atomic<bool>& stop_;
  archive* a_;
  dev_t dev_ = 0;
  uint64_t bytes_ = 0;
};

// IN: a thread packs the source into its end of a socketpair; the host reads the other end.
class Source final : public TransferPlugin::Stream {
 public:
  // `top` is an O_PATH fd of the directory, or a readable fd of the file named `file_name`.
  Source(const PluginBase& plugin, std::string display, Fd top, std::string file_name,
         uint64_t max_bytes, Fd sock)
      : plugin_(plugin),
        display_(std::move(display)),
        top_(std::move(top)),
        file_name_(std::move(file_name)),
        max_bytes_(max_bytes),
        sock_(std::move(sock)) {
    thread_ = std::thread([this] { run(); });
  }
  ~Source() override { stopAndJoin(); }

  void finish(bool ok) override {
    if (!ok) return stopAndJoin();
    // The host has closed its end: the thread is done, or about to fail on EPIPE.
    if (thread_.joinable()) thread_.join();
    if (error_code_ != 0) throw PluginError(error_code_, error_);
  }

 private:
  void stopAndJoin() {
    stop_.store(true);
    ::shutdown(sock_.get(), SHUT_RDWR);  // wakes a send() blocked on a full socket
    if (thread_.joinable()) thread_.join();
  }

  // Never fails towards libarchive: a failed archive (ARCHIVE_STATE_FATAL) is freed without
  // its close, and libarchive 3.6 then leaks the client's block buffer. A send that fails
  // instead stops the walk (stop_) and turns the rest of the stream into a sink.
  static la_ssize_t writeTo(archive* /*a*/, void* self, const void* buffer, size_t length) {
    auto* s = static_cast<Source*>(self);
    const char* p = static_cast<const char*>(buffer);
    size_t done = 0;
    while (done < length && !s->sink_) {
      if (s->stop_.load()) {
        s->sink_ = true;
        break;
      }
      const ssize_t n = ::send(s->sock_.get(), p + done, length - done, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        s->send_errno_ = errno;  // EPIPE: the host closed its end early
        s->sink_ = true;
        s->stop_.store(true);
        break;
      }
      done += static_cast<size_t>(n);
    }
    return static_cast<la_ssize_t>(length);
  }

  void run() noexcept {
    ArchivePtr a(archive_write_new(), &archive_write_free);
    try {
      if (!a) throw std::bad_alloc();
      // pax_restricted: plain ustar, with pax headers only for what ustar cannot say (long
      // names, big files).
      if (archive_write_set_format_pax_restricted(a.get()) != ARCHIVE_OK ||
          archive_write_open(a.get(), this, nullptr, &Source::writeTo, nullptr) != ARCHIVE_OK)
        throw PluginError(EIO, inQuotes(display_) + ": " + archive_error_string(a.get()));
      Packer packer(plugin_, display_, max_bytes_, stop_, a.get());
      if (file_name_.empty())
        packer.tree(top_.get());
      else
        packer.single(top_.get(), file_name_);
    } catch (const PluginError& e) {
      fail(e.code(), e.what());
    } catch (const std::bad_alloc&) {
      fail(ENOMEM, inQuotes(display_) + ": out of memory");
    } catch (const std::exception& e) {
      fail(EIO, inQuotes(display_) + ": " + e.what());
    }
    if (a) {
      // A failed stream must end short of tar's end marker, so that nobody takes it for the
      // whole tree: what libarchive still writes (padding, the marker) goes to the sink. The
      // close runs anyway, as it frees libarchive's buffers.
      if (error_code_ != 0) sink_ = true;
      if (archive_write_close(a.get()) != ARCHIVE_OK && error_code_ == 0)
        fail(EIO, inQuotes(display_) + ": " + archive_error_string(a.get()));
    }
    if (send_errno_ != 0) {  // the cause of whatever stopped the walk
      error_code_ = send_errno_;
      error_ = inQuotes(display_) + ": the host stopped reading: " + std::strerror(send_errno_);
    }
    ::shutdown(sock_.get(), SHUT_WR);  // EOF for the host
  }

  void fail(int code, std::string message) {
    if (error_code_ != 0) return;  // the first error is the one to tell
    error_code_ = code != 0 ? code : EIO;
    error_ = std::move(message);
  }

  const PluginBase& plugin_;
  const std::string display_;
  Fd top_;
  const std::string file_name_;
  const uint64_t max_bytes_;
  Fd sock_;
  std::atomic<bool> stop_{false};  // finish(false), or the host gone: the walk ends
  // The thread's own, read by others only after join().
  bool sink_ = false;
  int send_errno_ = 0;
  int error_code_ = 0;
  std::string error_;
  std::thread thread_;
};

// Names are matched case-insensitively from the end: "results.TAR.GZ" is a tar.gz.
std::string formatOf(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::pair<const char*, const char*> kinds[] = {
      {".tar.gz", "tar.gz"}, {".tgz", "tar.gz"}, {".tar.zst", "tar.zst"},
      {".tzst", "tar.zst"},  {".tar", "tar"},    {".zip", "zip"}};
  for (const auto& [suffix, format] : kinds)
    if (lower.ends_with(suffix) && lower.size() > std::strlen(suffix)) return format;
  return "";
}

// OUT: the archive is an unnamed file (O_TMPFILE) in its directory until finish(true) links it
// there under its name, replacing any old file in one rename; anything else leaves nothing.
class Destination final : public TransferPlugin::Stream {
 public:
  Destination(std::string display, Fd parent, std::string name, Fd file)
      : display_(std::move(display)),
        parent_(std::move(parent)),
        name_(std::move(name)),
        file_(std::move(file)) {}

  void finish(bool ok) override {
    if (!ok) return;  // the unnamed file goes with its last fd
    const std::string who = inQuotes(display_) + ": ";
    if (::fsync(file_.get()) != 0) sysFail("writing the archive");
    // linkat cannot replace a name: link under a temporary one, then rename over the old file.
    // The link goes through /proc, as linkat(AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH.
    static std::atomic<unsigned> counter{0};
    const std::string self = "/proc/self/fd/" + std::to_string(file_.get());
    std::string tmp;
    for (int attempt = 0;; ++attempt) {
      tmp = "." + name_ + ".airlock-" + std::to_string(::getpid()) + "-" +
            std::to_string(counter.fetch_add(1));
      if (::linkat(AT_FDCWD, self.c_str(), parent_.get(), tmp.c_str(), AT_SYMLINK_FOLLOW) == 0)
        break;
      if (errno != EEXIST || attempt >= 8) sysFail("linking the archive into its directory");
    }
    if (::renameat(parent_.get(), tmp.c_str(), parent_.get(), name_.c_str()) != 0) {
      const int e = errno;
      ::unlinkat(parent_.get(), tmp.c_str(), 0);
      errno = e;
      sysFail("renaming the archive into place");
    }
  }

 private:
  [[noreturn]] void sysFail(const char* what) const {
    const int e = errno;
    throw PluginError(e, inQuotes(display_) + ": " + what + ": " + std::strerror(e));
  }

  std::string display_;
  Fd parent_;
  std::string name_;
  Fd file_;
};

class HostDir final : public TransferPlugin {
 public:
  using TransferPlugin::TransferPlugin;
  static constexpr const char* kPrefixes[] = {"hostdir:", nullptr};

  Opened open(const Request& r) override {
    const Location loc = parseLocation(r.location);
    const auto roots = parseRoots(loc, r.rules_json);
    const Root& root = findRoot(loc, roots);
    return r.direction == Direction::kIn ? openIn(loc, root, r.max_bytes) : openOut(loc, root);
  }

 private:
  Opened openIn(const Location& loc, const Root& root, uint64_t max_bytes) {
    const Fd root_fd = openRoot(loc, root);
    Fd path = openBeneath(loc, root_fd.get(), loc.sub, O_PATH);
    struct stat st {};
    if (::fstat(path.get(), &st) != 0) {
      const int e = errno;
      throw PluginError(e, inQuotes(loc.display) + ": " + std::strerror(e));
    }
    Opened o;
    o.display = loc.display;
    Fd top;
    std::string file_name;
    if (S_ISDIR(st.st_mode)) {
      top = std::move(path);
    } else if (S_ISREG(st.st_mode)) {
      // Reopened for reading by the same checked lookup (O_PATH cannot read), and held to be
      // the same file.
      top = openBeneath(loc, root_fd.get(), loc.sub, O_RDONLY | O_NONBLOCK | O_NOCTTY);
      struct stat again {};
      if (::fstat(top.get(), &again) != 0 || again.st_ino != st.st_ino || again.st_dev != st.st_dev)
        throw PluginError(EAGAIN, inQuotes(loc.display) + ": changed while it was opened");
      const std::string_view sub = loc.sub;
      file_name = std::string(sub.substr(sub.rfind('/') + 1));
    } else {
      throw PluginError(EINVAL, inQuotes(loc.display) + ": not a directory or a regular file");
    }
    // A first pass over the metadata: the size for review, and a refusal now rather than
    // after streaming most of a tree that is too big. The writing pass counts again, as files
    // may grow in between.
    const std::atomic<bool> no_stop{false};
    Packer count(*this, loc.display, max_bytes, no_stop, nullptr);
    if (file_name.empty())
      count.tree(top.get());
    else
      count.single(top.get(), file_name);
    o.size = count.bytes();

    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
      const int e = errno;
      throw PluginError(e, inQuotes(loc.display) + ": socketpair: " + std::strerror(e));
    }
    Fd ours(pair[0]), theirs(pair[1]);
    o.stream = std::make_unique<Source>(*this, loc.display, std::move(top), std::move(file_name),
                                        max_bytes, std::move(ours));
    o.fd = theirs.release();
    return o;
  }

  Opened openOut(const Location& loc, const Root& root) {
    const std::string who = inQuotes(loc.display) + ": ";
    if (!root.writable)
      throw PluginError(EROFS, who + "root " + inQuotes(loc.root) + " is read-only");
    const size_t slash = loc.sub.rfind('/');
    const std::string name = slash == std::string::npos ? loc.sub : loc.sub.substr(slash + 1);
    const std::string dir = slash == std::string::npos ? "" : loc.sub.substr(0, slash);
    Opened o;
    o.display = loc.display;
    o.format = formatOf(name);
    if (o.format.empty())
      throw PluginError(EINVAL, who +
                                    "not an archive file name (.tar, .tar.gz, .tgz, "
                                    ".tar.zst, .tzst, .zip)");
    const Fd root_fd = openRoot(loc, root);
    Fd parent = openBeneath(loc, root_fd.get(), dir, O_PATH | O_DIRECTORY);
    struct stat st {};
    // Replacing a regular file is the point; a directory, a symlink or a device of that name is
    // more likely a mistyped location than something to rename over.
    if (::fstatat(parent.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        !S_ISREG(st.st_mode))
      throw PluginError(EEXIST, who + "exists and is not a regular file");
    Fd file(::openat(parent.get(), ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644));
    if (!file) {
      const int e = errno;
      throw PluginError(e, who + "creating the archive's file: " + std::strerror(e));
    }
    // The host gets a copy; ours stays open to link the file at the end.
    const int host_fd = ::fcntl(file.get(), F_DUPFD_CLOEXEC, 0);
    if (host_fd < 0) {
      const int e = errno;
      throw PluginError(e, who + "dup: " + std::strerror(e));
    }
    Fd theirs(host_fd);
    o.stream = std::make_unique<Destination>(loc.display, std::move(parent), name, std::move(file));
    o.fd = theirs.release();
    return o;
  }
};

}  // namespace

AIRLOCK_TRANSFER_PLUGIN(HostDir, "airlock.transfer.hostdir", "1.0.0")
