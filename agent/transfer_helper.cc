#include "transfer_helper.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace airlock::agent {
namespace {

namespace fs = std::filesystem;

struct Limits {
  uint64_t max_bytes = 1ull << 40;
  uint64_t max_files = 1000000;
  uint64_t max_depth = 64;
  double max_ratio = 1000;
};

struct Summary {
  uint64_t files = 0, dirs = 0, links = 0, bytes = 0, compressed_bytes = 0;
  std::string json() const {
    char out[256];
    std::snprintf(out, sizeof out,
                  "{\"files\":%llu,\"dirs\":%llu,\"links\":%llu,\"bytes\":%llu,"
                  "\"compressed_bytes\":%llu}\n",
                  static_cast<unsigned long long>(files), static_cast<unsigned long long>(dirs),
                  static_cast<unsigned long long>(links), static_cast<unsigned long long>(bytes),
                  static_cast<unsigned long long>(compressed_bytes));
    return out;
  }
};

// An error for stderr: what failed and, when there is one, the archive entry it was about.
struct Failure {
  std::string message;
};

void say(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

int fail(const std::string& message, int code = 1) {
  say(2, "airlock transfer: " + message + "\n");
  return code;
}

bool parseCount(const char* text, uint64_t& out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') return false;
  out = v;
  return true;
}

// The entry's path split into components, refused when it could leave the extraction root.
// Returns "" when fine, else why not.
std::string checkRelative(const std::string& path, std::vector<std::string>& parts) {
  parts.clear();
  if (path.empty()) return "an empty path";
  if (path[0] == '/') return "an absolute path";
  size_t from = 0;
  while (from <= path.size()) {
    size_t to = path.find('/', from);
    if (to == std::string::npos) to = path.size();
    std::string part = path.substr(from, to - from);
    if (part == "..") return "a '..' component";
    if (!part.empty() && part != ".") parts.push_back(part);
    from = to + 1;
  }
  return "";  // no parts: "./", the root itself
}

// Whether a symlink at `entry` (components) pointing to `target` stays inside the root, by
// resolving the target lexically from the link's directory.
bool linkStaysInside(const std::vector<std::string>& entry, const std::string& target) {
  if (target.empty() || target[0] == '/') return false;
  std::vector<std::string> at(entry.begin(), entry.end() - (entry.empty() ? 0 : 1));
  size_t from = 0;
  while (from <= target.size()) {
    size_t to = target.find('/', from);
    if (to == std::string::npos) to = target.size();
    std::string part = target.substr(from, to - from);
    if (part == "..") {
      if (at.empty()) return false;
      at.pop_back();
    } else if (!part.empty() && part != ".") {
      at.push_back(part);
    }
    from = to + 1;
  }
  return true;
}

// A name on one listing line: control bytes and backslashes as \xHH, so no name can start a
// line of its own or pass for the listing's end.
std::string listed(const std::string& name) {
  std::string out;
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f || c == '\\') {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// --listing: what the archive holds, for the review chain, before anything moves into place.
// Lines "L TYPE SIZE NAME" (a link's NAME is "name -> target"), at most `cap` bytes of them, then
// "L-END ENTRIES TRUNCATED(0|1)".
class Listing {
 public:
  explicit Listing(uint64_t cap) : cap_(cap) {}
  void add(const char* type, uint64_t size, const std::string& name, const char* to = nullptr) {
    ++entries_;
    if (truncated_) return;
    std::string line = std::string("L ") + type + " " + std::to_string(size) + " " + listed(name);
    if (to != nullptr) line += " -> " + listed(to);
    line += '\n';
    if (text_.size() + line.size() > cap_) {
      truncated_ = true;
      return;
    }
    text_ += line;
  }
  std::string text() const {
    return text_ + "L-END " + std::to_string(entries_) + " " + (truncated_ ? "1" : "0") + "\n";
  }

 private:
  uint64_t cap_;
  uint64_t entries_ = 0;
  bool truncated_ = false;
  std::string text_;
};

std::string entryName(archive_entry* e) {
  const char* p = archive_entry_pathname(e);
  return p != nullptr ? p : "(no name)";
}

// --framed input: the supervisor's stream is chunks, 'D' + 4-byte little-endian length +
// bytes, ended by 'E' (all of it arrived: commit) or 'A' (abort). Plain stdin could not tell a
// finished download from a cut one: an archive may parse cleanly up to where a failing source
// stopped. Without --framed, stdin's end is the end.
class Input {
 public:
  explicit Input(bool framed) : framed_(framed) {}
  // libarchive's read callback.
  static la_ssize_t read(archive*, void* ctx, const void** out) {
    return static_cast<Input*>(ctx)->next(out);
  }
  // Reads what is left after the archive's own end, up to the stream's end marker.
  void drain() {
    const void* ignored;
    while (next(&ignored) > 0) {
    }
  }
  bool complete() const { return !framed_ || ended_ok_; }
  bool aborted() const { return aborted_; }

 private:
  bool readExactly(void* to, size_t n) {
    auto* p = static_cast<char*>(to);
    while (n > 0) {
      ssize_t got = ::read(0, p, n);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      p += got;
      n -= static_cast<size_t>(got);
    }
    return true;
  }
  la_ssize_t next(const void** out) {
    *out = buf_;
    // Credit for the supervisor, which keeps at most a few MiB unacknowledged: the agent holds
    // only so much stdin the helper has not read yet.
    if (framed_ && consumed_ - credited_ >= kCreditEvery) {
      say(1, "C " + std::to_string(consumed_) + "\n");
      credited_ = consumed_;
    }
    if (!framed_) {
      ssize_t got;
      do {
        got = ::read(0, buf_, sizeof buf_);
      } while (got < 0 && errno == EINTR);
      return got < 0 ? 0 : got;
    }
    while (left_ == 0) {
      if (ended_ok_ || aborted_) return 0;
      unsigned char kind = 0;
      if (!readExactly(&kind, 1)) {
        aborted_ = true;  // the stream stopped without its end marker
        return 0;
      }
      if (kind == 'E') {
        ended_ok_ = true;
        return 0;
      }
      unsigned char len[4];
      if (kind != 'D' || !readExactly(len, 4)) {
        aborted_ = true;
        return 0;
      }
      left_ = len[0] | (len[1] << 8) | (len[2] << 16) | (static_cast<uint32_t>(len[3]) << 24);
    }
    const size_t want = std::min<size_t>(left_, sizeof buf_);
    if (!readExactly(buf_, want)) {
      aborted_ = true;
      return 0;
    }
    left_ -= static_cast<uint32_t>(want);
    consumed_ += want;
    return static_cast<la_ssize_t>(want);
  }

  static constexpr uint64_t kCreditEvery = 512 << 10;
  bool framed_;
  bool ended_ok_ = false, aborted_ = false;
  uint32_t left_ = 0;
  uint64_t consumed_ = 0, credited_ = 0;  // archive bytes read, and last said so
  char buf_[1 << 16];
};

// Moves the staged tree into place: the whole staging directory when the target did not exist,
// else each top-level entry, refusing to replace what the target already has.
std::string moveIntoPlace(const std::string& stage, const std::string& target, bool into) {
  if (!into) {
    if (::rename(stage.c_str(), target.c_str()) != 0)
      return "rename into " + target + ": " + std::strerror(errno);
    return "";
  }
  // All or nothing: a name the target has already refuses the whole archive before anything
  // moves.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(stage, ec)) {
    struct stat st {};
    const std::string name = e.path().filename().string();
    if (::lstat((target + "/" + name).c_str(), &st) == 0)
      return "'" + name + "' exists there already in " + target;
  }
  if (ec) return "listing the staged files: " + ec.message();
  for (const auto& e : fs::directory_iterator(stage, ec)) {
    const std::string to = target + "/" + e.path().filename().string();
    if (::syscall(SYS_renameat2, AT_FDCWD, e.path().c_str(), AT_FDCWD, to.c_str(),
                  RENAME_NOREPLACE) != 0)
      return "moving " + e.path().filename().string() + " into " + target + ": " +
             (errno == EEXIST ? std::string("it exists there already") : std::strerror(errno));
  }
  if (ec) return "listing the staged files: " + ec.message();
  ::rmdir(stage.c_str());
  return "";
}

// After the listing, the supervisor's one byte: 'C' commits, anything else (or its end) refuses.
bool reviewAllows() {
  unsigned char answer = 0;
  ssize_t got;
  do {
    got = ::read(0, &answer, 1);
  } while (got < 0 && errno == EINTR);
  return got == 1 && answer == 'C';
}

int unpack(const std::string& target, const Limits& limits, bool framed, uint64_t listing_cap) {
  if (target.empty() || target[0] != '/') return fail("the target must be an absolute path");
  struct stat st {};
  const bool into = ::lstat(target.c_str(), &st) == 0;
  if (into && !S_ISDIR(st.st_mode)) return fail(target + " exists and is not a directory");
  // The staging directory: inside an existing target (same file system, moved up at the end),
  // else beside it.
  std::string stage =
      (into ? target + "/" : target.substr(0, target.rfind('/') + 1)) + ".airlock-partial-XXXXXX";
  if (stage.size() < 23 || stage[0] != '/') return fail("bad target " + target);
  if (::mkdtemp(stage.data()) == nullptr)
    return fail("cannot make a staging directory for " + target + ": " + std::strerror(errno));
  auto cleanup = [&] {
    std::error_code ec;
    fs::remove_all(stage, ec);
  };
  if (::chdir(stage.c_str()) != 0) {
    cleanup();
    return fail("chdir " + stage + ": " + std::strerror(errno));
  }

  archive* in = archive_read_new();
  // Format by format: _all would link xar's reader and with it libxml2 and ICU.
  for (auto support : {archive_read_support_filter_gzip, archive_read_support_filter_bzip2,
                       archive_read_support_filter_xz, archive_read_support_filter_zstd,
                       archive_read_support_filter_lz4, archive_read_support_format_tar,
                       archive_read_support_format_cpio, archive_read_support_format_zip,
                       archive_read_support_format_7zip})
    support(in);
  archive* out = archive_write_disk_new();
  archive_write_disk_set_options(out,
                                 ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                     ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS | ARCHIVE_EXTRACT_PERM |
                                     ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_UNLINK);
  Summary sum;
  std::string error;
  std::unique_ptr<Listing> listing;
  if (listing_cap > 0) listing = std::make_unique<Listing>(listing_cap);
  auto input = std::make_unique<Input>(framed);
  if (archive_read_open(in, input.get(), nullptr, &Input::read, nullptr) != ARCHIVE_OK) {
    error = input->aborted() ? "the transfer was cut off before its end"
                             : std::string("not an archive: ") + archive_error_string(in);
  }
  std::vector<std::string> parts;
  while (error.empty()) {
    archive_entry* e = nullptr;
    int r = archive_read_next_header(in, &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) {
      error = std::string("reading the archive: ") + archive_error_string(in);
      break;
    }
    const std::string name = entryName(e);
    if (auto why = checkRelative(name, parts); !why.empty()) {
      error = "entry '" + name + "': " + why + " (it would leave the target)";
      break;
    }
    if (parts.empty()) continue;  // the root directory itself
    if (parts.size() > limits.max_depth) {
      error = "entry '" + name + "': deeper than " + std::to_string(limits.max_depth) + " levels";
      break;
    }
    const mode_t type = archive_entry_filetype(e);
    if (const char* hard = archive_entry_hardlink(e); hard != nullptr) {
      std::vector<std::string> target_parts;
      if (auto why = checkRelative(hard, target_parts); !why.empty() || target_parts.empty()) {
        error = "entry '" + name + "': a hard link to '" + hard + "', outside the target";
        break;
      }
      ++sum.links;
      if (listing) listing->add("hardlink", 0, name, hard);
    } else if (type == AE_IFLNK) {
      const char* to = archive_entry_symlink(e);
      if (to == nullptr || !linkStaysInside(parts, to)) {
        error = "entry '" + name + "': a symlink to '" + (to ? to : "") + "', outside the target";
        break;
      }
      ++sum.links;
      if (listing) listing->add("symlink", 0, name, to);
    } else if (type == AE_IFDIR) {
      ++sum.dirs;
      if (listing) listing->add("dir", 0, name);
    } else if (type == AE_IFREG) {
      ++sum.files;
      // The header's size: what the reviewer is told before the bytes are read.
      if (listing)
        listing->add("file", static_cast<uint64_t>(std::max<la_int64_t>(archive_entry_size(e), 0)),
                     name);
    } else {
      error = "entry '" + name + "': a " +
              (type == AE_IFCHR    ? "character device"
               : type == AE_IFBLK  ? "block device"
               : type == AE_IFIFO  ? "FIFO"
               : type == AE_IFSOCK ? "socket"
                                   : "special file") +
              ", which transfers never create";
      break;
    }
    if (sum.files + sum.links > limits.max_files) {
      error = "entry '" + name + "': more than " + std::to_string(limits.max_files) + " files";
      break;
    }
    // Permissions of the sandbox user's own files: no setuid, setgid or sticky bits.
    archive_entry_set_perm(e, archive_entry_perm(e) & 0777);
    if (archive_write_header(out, e) < ARCHIVE_WARN) {
      error = "entry '" + name + "': " + archive_error_string(out);
      break;
    }
    const void* buf = nullptr;
    size_t size = 0;
    la_int64_t offset = 0;
    for (;;) {
      r = archive_read_data_block(in, &buf, &size, &offset);
      if (r == ARCHIVE_EOF) break;
      if (r < ARCHIVE_WARN) {
        error = "entry '" + name + "': " + archive_error_string(in);
        break;
      }
      sum.bytes += size;
      sum.compressed_bytes = static_cast<uint64_t>(archive_filter_bytes(in, -1));
      if (sum.bytes > limits.max_bytes) {
        error = "entry '" + name + "': the archive holds more than " +
                std::to_string(limits.max_bytes) + " bytes";
        break;
      }
      // A bomb is stopped while it inflates: past 16 MiB, the output may be at most
      // max_ratio times what has been read so far.
      if (sum.bytes > (16u << 20) &&
          static_cast<double>(sum.bytes) >
              limits.max_ratio * static_cast<double>(std::max<uint64_t>(sum.compressed_bytes, 1))) {
        error = "entry '" + name + "': expands more than " +
                std::to_string(static_cast<int>(limits.max_ratio)) +
                " times (a decompression bomb?)";
        break;
      }
      if (archive_write_data_block(out, buf, size, offset) < ARCHIVE_WARN) {
        error = "entry '" + name + "': " + archive_error_string(out);
        break;
      }
    }
    if (error.empty() && archive_write_finish_entry(out) < ARCHIVE_WARN)
      error = "entry '" + name + "': " + archive_error_string(out);
  }
  if (error.empty() && archive_write_close(out) != ARCHIVE_OK)
    error = std::string("finishing: ") + archive_error_string(out);
  sum.compressed_bytes = static_cast<uint64_t>(archive_filter_bytes(in, -1));
  archive_write_free(out);
  archive_read_free(in);
  if (error.empty()) {
    input->drain();
    if (!input->complete()) error = "the transfer was cut off before its end";
  }
  (void)::chdir("/");
  // Staged, not yet in place: the review chain sees the listing and says whether it may move.
  if (error.empty() && listing) {
    say(1, listing->text());
    if (!reviewAllows()) error = "the review chain refused the archive";
  }
  if (error.empty()) error = moveIntoPlace(stage, target, into);
  if (!error.empty()) {
    cleanup();
    return fail(error);
  }
  say(1, sum.json());
  return 0;
}

int pack(const std::string& source, const std::string& format, const Limits& limits) {
  if (source.empty() || source[0] != '/') return fail("the source must be an absolute path");
  struct stat st {};
  if (::lstat(source.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return fail(source + " is not a directory");
  archive* out = archive_write_new();
  int r = ARCHIVE_OK;
  if (format == "tar" || format == "tar.gz" || format == "tar.zst") {
    r = archive_write_set_format_pax_restricted(out);
    if (r == ARCHIVE_OK && format == "tar.gz") r = archive_write_add_filter_gzip(out);
    if (r == ARCHIVE_OK && format == "tar.zst") r = archive_write_add_filter_zstd(out);
  } else if (format == "zip") {
    r = archive_write_set_format_zip(out);
  } else {
    archive_write_free(out);
    return fail("unknown format '" + format + "' (tar, tar.gz, tar.zst, zip)");
  }
  // No padding to tar's 10 KiB blocks: after a compressed stream, zeros are a broken frame.
  archive_write_set_bytes_in_last_block(out, 1);
  if (r != ARCHIVE_OK || archive_write_open_fd(out, 1) != ARCHIVE_OK) {
    std::string why = archive_error_string(out) ? archive_error_string(out) : "?";
    archive_write_free(out);
    return fail("cannot write " + format + ": " + why);
  }
  archive* disk = archive_read_disk_new();
  archive_read_disk_set_symlink_physical(disk);
  archive_read_disk_set_behavior(disk, ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS |
                                           ARCHIVE_READDISK_NO_XATTR | ARCHIVE_READDISK_NO_ACL |
                                           ARCHIVE_READDISK_NO_FFLAGS);
  Summary sum;
  std::string error;
  if (archive_read_disk_open(disk, source.c_str()) != ARCHIVE_OK)
    error = source + ": " + archive_error_string(disk);
  std::vector<char> buf(1 << 16);
  while (error.empty()) {
    archive_entry* e = archive_entry_new();
    r = archive_read_next_header2(disk, e);
    if (r == ARCHIVE_EOF) {
      archive_entry_free(e);
      break;
    }
    if (r < ARCHIVE_WARN) {
      error = std::string("reading ") + source + ": " + archive_error_string(disk);
      archive_entry_free(e);
      break;
    }
    archive_read_disk_descend(disk);
    const std::string path = archive_entry_sourcepath(e) ? archive_entry_sourcepath(e) : "";
    if (path == source) {  // the root: its contents are the archive's top level
      archive_entry_free(e);
      continue;
    }
    const std::string name = path.substr(source.size() + (source.back() == '/' ? 0 : 1));
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_uid(e, 0);
    archive_entry_set_gid(e, 0);
    archive_entry_set_uname(e, "");
    archive_entry_set_gname(e, "");
    const mode_t type = archive_entry_filetype(e);
    if (type == AE_IFDIR) {
      ++sum.dirs;
    } else if (type == AE_IFLNK) {
      ++sum.links;
    } else if (type == AE_IFREG) {
      ++sum.files;
    } else {
      archive_entry_free(e);
      continue;  // devices, FIFOs, sockets: never in a transfer
    }
    if (sum.files + sum.links > limits.max_files) {
      error = "'" + name + "': more than " + std::to_string(limits.max_files) + " files";
      archive_entry_free(e);
      break;
    }
    if (type == AE_IFREG) {
      sum.bytes += static_cast<uint64_t>(archive_entry_size(e));
      if (sum.bytes > limits.max_bytes) {
        error = "'" + name + "': more than " + std::to_string(limits.max_bytes) + " bytes";
        archive_entry_free(e);
        break;
      }
    }
    if (archive_write_header(out, e) < ARCHIVE_WARN) {
      error = "'" + name + "': " + archive_error_string(out);
      archive_entry_free(e);
      break;
    }
    if (type == AE_IFREG) {
      int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) {
        error = "'" + name + "': " + std::strerror(errno);
        archive_entry_free(e);
        break;
      }
      ssize_t n;
      while ((n = ::read(fd, buf.data(), buf.size())) > 0) {
        if (archive_write_data(out, buf.data(), static_cast<size_t>(n)) < 0) {
          error = "'" + name + "': " + archive_error_string(out);
          break;
        }
      }
      if (n < 0 && error.empty()) error = "'" + name + "': " + std::strerror(errno);
      ::close(fd);
    }
    archive_entry_free(e);
  }
  archive_read_free(disk);
  if (error.empty() && archive_write_close(out) != ARCHIVE_OK)
    error = std::string("finishing: ") + archive_error_string(out);
  sum.compressed_bytes = static_cast<uint64_t>(archive_filter_bytes(out, -1));
  archive_write_free(out);
  if (!error.empty()) return fail(error);
  say(2, sum.json());
  return 0;
}

}  // namespace

int transferHelperMain(int argc, char** argv) {
  // A file past the sandbox's RLIMIT_FSIZE fails its write (EFBIG, named with the entry)
  // instead of killing the helper without a word.
  ::signal(SIGXFSZ, SIG_IGN);
  const std::string mode = argv[1];
  if (argc < 3) return fail("usage: --unpack DIR | --pack DIR --format F [limits]", 2);
  std::string dir = argv[2], format;
  Limits limits;
  bool framed = false;
  uint64_t listing_cap = 0;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a != "--framed" && i + 1 >= argc) return fail("option " + a + " needs a value", 2);
    const char* v = argv[++i];
    uint64_t n = 0;
    if (a == "--format") {
      format = v;
    } else if (a == "--max-bytes" && parseCount(v, n)) {
      limits.max_bytes = n;
    } else if (a == "--max-files" && parseCount(v, n)) {
      limits.max_files = n;
    } else if (a == "--max-depth" && parseCount(v, n)) {
      limits.max_depth = n;
    } else if (a == "--framed") {
      framed = true;
      --i;  // a flag: no value
    } else if (a == "--listing" && parseCount(v, n) && n > 0) {
      listing_cap = n;
    } else if (a == "--max-ratio" && parseCount(v, n) && n > 0) {
      limits.max_ratio = static_cast<double>(n);
    } else {
      return fail("bad option " + a + " " + v, 2);
    }
  }
  if (listing_cap > 0 && !framed) return fail("--listing needs --framed", 2);
  if (mode == "--unpack") return unpack(dir, limits, framed, listing_cap);
  if (format.empty()) return fail("--pack needs --format", 2);
  return pack(dir, format, limits);
}

}  // namespace airlock::agent
