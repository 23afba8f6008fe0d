#include "supervisor/packages/disk_cache.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "airlock/whole_file.h"

namespace airlock::packages {
namespace {

bool isSha256Hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

Result<> makeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return sysError("mkdir", path);
  return {};
}

Result<> writeAll(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sysError("write", path);
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

// Pages (packuments run to tens of MiB) and URL index entries.
std::optional<std::string> readCached(const std::string& path) {
  auto text = readWholeFile(path, 256u << 20);
  if (!text) return std::nullopt;
  return std::move(*text);
}

}  // namespace

std::string sha256Hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

Result<DiskCache> DiskCache::open(const std::string& dir) {
  if (dir.empty() || dir.front() != '/') return fail("packages: cache_dir must be absolute", dir);
  // mkdir -p of the cache directory itself, then its fixed subdirectories.
  for (size_t slash = dir.find('/', 1); slash != std::string::npos;
       slash = dir.find('/', slash + 1))
    if (auto r = makeDir(dir.substr(0, slash)); !r) return Unexpected(r.error());
  for (const char* sub : {"", "/blobs", "/urls", "/pages", "/tmp"})
    if (auto r = makeDir(dir + sub); !r) return Unexpected(std::move(r.error()).wrap("packages"));
  return DiskCache(dir);
}

std::optional<std::pair<std::string, uint64_t>> DiskCache::blob(const std::string& sha256) const {
  if (!isSha256Hex(sha256)) return std::nullopt;
  std::string path = dir_ + "/blobs/" + sha256;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return std::pair{std::move(path), static_cast<uint64_t>(st.st_size)};
}

std::optional<std::string> DiskCache::blobOfUrl(const std::string& url) const {
  auto text = readCached(dir_ + "/urls/" + sha256Hex(url));
  if (!text) return std::nullopt;
  std::string sha = text->substr(0, text->find('\n'));
  if (!blob(sha)) return std::nullopt;
  return sha;
}

Result<> DiskCache::writeAtomically(const std::string& path, std::string_view bytes) const {
  auto in = incoming();
  if (!in) return Unexpected(in.error());
  if (auto r = in->write(bytes); !r) return r;
  if (::rename(in->path_.c_str(), path.c_str()) != 0) return sysError("rename", path);
  in->path_.clear();  // landed: nothing to remove
  return {};
}

std::optional<std::string> DiskCache::page(std::string_view key) const {
  return readCached(dir_ + "/pages/" + sha256Hex(key));
}

void DiskCache::storePage(std::string_view key, std::string_view body) const {
  (void)writeAtomically(dir_ + "/pages/" + sha256Hex(key), body);
}

Result<DiskCache::Incoming> DiskCache::incoming() const {
  std::string path = dir_ + "/tmp/in-XXXXXX";
  UniqueFd fd(::mkostemp(path.data(), O_CLOEXEC));
  if (!fd) return sysError("mkostemp", path);
  return Incoming(this, std::move(fd), std::move(path));
}

DiskCache::Incoming::Incoming(const DiskCache* cache, UniqueFd fd, std::string path)
    : cache_(cache), fd_(std::move(fd)), path_(std::move(path)) {}

DiskCache::Incoming::Incoming(Incoming&& o) noexcept
    : cache_(o.cache_), fd_(std::move(o.fd_)), path_(std::exchange(o.path_, {})) {}

DiskCache::Incoming::~Incoming() {
  if (!path_.empty()) ::unlink(path_.c_str());
}

Result<> DiskCache::Incoming::write(std::string_view bytes) {
  return writeAll(fd_.get(), bytes, path_);
}

Result<std::string> DiskCache::Incoming::commit(const std::string& sha256, const std::string& url) {
  if (!isSha256Hex(sha256)) return fail("packages: not a sha256", sha256);
  if (::fsync(fd_.get()) != 0) return sysError("fsync", path_);
  fd_.reset();
  std::string blob_path = cache_->dir_ + "/blobs/" + sha256;
  if (::rename(path_.c_str(), blob_path.c_str()) != 0) return sysError("rename", blob_path);
  path_.clear();
  if (!url.empty())
    (void)cache_->writeAtomically(cache_->dir_ + "/urls/" + sha256Hex(url), sha256 + "\n");
  return blob_path;
}

}  // namespace airlock::packages
