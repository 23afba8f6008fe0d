#include "supervisor/images/store.h"

#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "airlock/policy/image_name.h"
#include "airlock/whole_file.h"

namespace airlock::images {
namespace fs = std::filesystem;

namespace {

constexpr const char* kDefaultRoot = "/var/lib/airlock/images";

Result<> checkName(const std::string& name) {
  if (auto why = policy::imageNameProblem(name)) return fail("image name: " + *why, name);
  return {};
}

Result<> makeDir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return sysError("mkdir", path);
  // mkdir's mode goes through the umask; the store's directories must be searchable by all.
  if (::chmod(path.c_str(), mode) != 0) return sysError("chmod", path);
  return {};
}

// Renames `path` into tmp/ and removes it there: a blob disappears from blobs/ at once, and a
// removal cut short is finished by the next lock.
Result<> discard(const std::string& root, const std::string& path) {
  char tmpl[4096];
  std::snprintf(tmpl, sizeof tmpl, "%s/tmp/gone-XXXXXX", root.c_str());
  if (::mkdtemp(tmpl) == nullptr) return sysError("mkdtemp", root + "/tmp");
  const std::string dest = std::string(tmpl) + "/blob";
  if (::rename(path.c_str(), dest.c_str()) != 0) return sysError("rename", path);
  std::error_code ec;
  fs::remove_all(tmpl, ec);
  if (ec) return Unexpected(Error("remove", tmpl, ec.value()));
  return {};
}

}  // namespace

std::string defaultStoreRoot() {
  const char* env = std::getenv("AIRLOCK_IMAGE_STORE");
  return env != nullptr && env[0] == '/' ? env : kDefaultRoot;
}

Staging::~Staging() {
  if (path_.empty()) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

Result<> checkDigest(const std::string& digest) {
  const bool ok = digest.size() == 71 && digest.starts_with("sha256:") &&
                  std::all_of(digest.begin() + 7, digest.end(), [](char c) {
                    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                  });
  if (!ok) return fail("not a sha256 digest (sha256:<64 hex digits>)", digest);
  return {};
}

uint64_t treeBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) total += st.st_size;
  }
  return total;
}

Result<Store> Store::open(std::string root, bool create) {
  if (root.empty() || root.front() != '/') return fail("image store: not an absolute path", root);
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  if (create) {
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec) return Unexpected(Error("image store: mkdir", root, ec.value()));
    for (const char* sub : {"", "/blobs", "/names"})
      if (auto r = makeDir(root + sub, 0755); !r) return Unexpected(r.error());
    // Staging trees are the builder's: 0711 keeps half-made images from listings, yet lets
    // apt's unprivileged _apt user reach the tree mmdebstrap downloads into.
    if (auto r = makeDir(root + "/tmp", 0711); !r) return Unexpected(r.error());
  }
  return Store(std::move(root));
}

std::string Store::blobDir(const std::string& digest) const {
  return root_ + "/blobs/" + digest.substr(7);
}

Result<std::string> Store::digestOf(const std::string& name) const {
  if (auto r = checkName(name); !r) return Unexpected(r.error());
  auto text = readWholeFile(root_ + "/names/" + name, 4096);
  if (!text) {
    if (text.error().errnum() == ENOENT)
      return fail("no image named '" + name + "' in the image store " + root_ +
                  " (`airlock image ls` lists them)");
    return Unexpected(text.error());
  }
  std::string digest = *text;
  while (!digest.empty() && (digest.back() == '\n' || digest.back() == ' ')) digest.pop_back();
  if (auto r = checkDigest(digest); !r)
    return Unexpected(std::move(r.error()).wrap("image store: names/" + name));
  return digest;
}

Result<std::string> Store::rootfsFor(const std::string& name) const {
  auto digest = digestOf(name);  // its error names the image and the store
  if (!digest) return Unexpected(digest.error());
  std::string rootfs = blobDir(*digest) + "/rootfs";
  struct stat st {};
  if (::stat(rootfs.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return fail("image '" + name + "': its blob " + *digest + " has no rootfs directory", rootfs);
  return rootfs;
}

Result<ImageInfo> Store::inspect(const std::string& name) const {
  auto digest = digestOf(name);
  if (!digest) return Unexpected(digest.error());
  ImageInfo info{.name = name, .digest = *digest, .meta = nlohmann::json::object()};
  if (auto text = readWholeFile(blobDir(*digest) + "/image.json"); text) {
    info.meta = nlohmann::json::parse(*text, nullptr, false);
    if (info.meta.is_discarded()) info.meta = nlohmann::json::object();
  }
  return info;
}

Result<std::vector<ImageInfo>> Store::list() const {
  std::vector<ImageInfo> out;
  std::set<std::string> named;
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(root_ + "/names", ec))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    auto info = inspect(name);
    if (!info) continue;  // a name being written, or not one of ours
    named.insert(info->digest);
    out.push_back(std::move(*info));
  }
  for (const auto& e : fs::directory_iterator(root_ + "/blobs", ec)) {
    const std::string digest = "sha256:" + e.path().filename().string();
    if (!checkDigest(digest) || named.contains(digest)) continue;
    ImageInfo info{.digest = digest, .meta = nlohmann::json::object()};
    if (auto text = readWholeFile(e.path().string() + "/image.json"); text)
      info.meta = nlohmann::json::parse(*text, nullptr, false);
    out.push_back(std::move(info));
  }
  return out;
}

Result<Store::Lock> Store::lock(const std::function<void(const std::string&)>& waiting) const {
  const std::string path = root_ + "/lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) return sysError("open", path);
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return sysError("flock", path);
    if (waiting) waiting("waiting for another build, import or rm of " + root_);
    while (::flock(fd.get(), LOCK_EX) != 0)
      if (errno != EINTR) return sysError("flock", path);
  }
  // Whoever held the lock before us is done or dead: what is left in tmp/ is debris.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root_ + "/tmp", ec)) {
    std::error_code rm;
    fs::remove_all(e.path(), rm);
  }
  return Lock(std::move(fd));
}

Result<Staging> Store::stage() const {
  char tmpl[4096];
  std::snprintf(tmpl, sizeof tmpl, "%s/tmp/new-XXXXXX", root_.c_str());
  if (::mkdtemp(tmpl) == nullptr) return sysError("mkdtemp", root_ + "/tmp");
  Staging staging(tmpl);
  // It becomes blobs/<hex>: searchable by the sandbox's uid once published.
  if (::chmod(tmpl, 0755) != 0) return sysError("chmod", tmpl);
  return staging;
}

Result<> Store::publish(Staging& staging, const std::string& name, const std::string& digest,
                        nlohmann::json meta) const {
  if (auto r = checkName(name); !r) return Unexpected(r.error());
  if (auto r = checkDigest(digest); !r) return Unexpected(r.error());
  std::string previous;
  if (auto d = digestOf(name); d) previous = *d;

  const std::string blob = blobDir(digest);
  struct stat st {};
  if (::stat(blob.c_str(), &st) == 0) {
    // The same content is there already (a rebuild that resolved to the same packages, an
    // archive imported twice): keep the published tree, drop ours.
    std::error_code ec;
    fs::remove_all(staging.path(), ec);
    staging.release();
  } else {
    meta["digest"] = digest;
    if (auto r = writeWholeFile(staging.path() + "/image.json", meta.dump(2) + "\n"); !r)
      return Unexpected(r.error());
    if (auto r = writeWholeFile(staging.path() + "/digest", digest + "\n"); !r)
      return Unexpected(r.error());
    if (::rename(staging.path().c_str(), blob.c_str()) != 0) return sysError("rename", blob);
    staging.release();
  }
  // The name last, by rename: a reader sees the old image or the new one, never neither.
  const std::string link = root_ + "/names/" + name, tmp = root_ + "/tmp/name-" + name;
  if (auto r = writeWholeFile(tmp, digest + "\n"); !r) return Unexpected(r.error());
  if (::rename(tmp.c_str(), link.c_str()) != 0) return sysError("rename", link);
  if (!previous.empty() && previous != digest) return removeBlobIfUnnamed(previous);
  return {};
}

Result<> Store::remove(const std::string& name) const {
  auto digest = digestOf(name);
  if (!digest) return Unexpected(std::move(digest.error()).wrap("image rm"));
  const std::string link = root_ + "/names/" + name;
  if (::unlink(link.c_str()) != 0) return sysError("unlink", link);
  return removeBlobIfUnnamed(*digest);
}

Result<> Store::removeBlobIfUnnamed(const std::string& digest) const {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root_ + "/names", ec)) {
    auto other = digestOf(e.path().filename().string());
    if (other && *other == digest) return {};
  }
  const std::string blob = blobDir(digest);
  if (!fs::exists(blob, ec)) return {};
  return discard(root_, blob);
}

}  // namespace airlock::images
