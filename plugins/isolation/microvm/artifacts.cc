#include "artifacts.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <lzma.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include <airlock/run_bounded.h>
#include <airlock/unique_fd.h>
#include <airlock/whole_file.h>

namespace airlock::isolation::microvm {
namespace {

namespace fs = std::filesystem;

// What the guest needs beyond the kernel's built-ins: the virtio transport and devices the
// backend gives it, and erofs (whose checksums want crc32c, which the kernel would otherwise
// ask a modprobe the initramfs does not have for).
constexpr const char* kGuestModules[] = {"virtio_mmio",    "virtio_console", "virtio_blk",
                                         "crc32c_generic", "erofs",          "virtio_net"};
// Loaded only when the command line has the flag (each module costs boot time under TCG):
// overlay puts an operator's image (filesystem.image) beneath the sandbox's own root; ext4 is
// a persistent workspace's filesystem; 9p over virtio shares an operator's live directory.
constexpr std::pair<const char*, const char*> kOptionalModules[] = {
    {"overlay", "airlock.image"},
    {"ext4", "airlock.workspace"},
    {"9pnet_virtio", "airlock.shares"},
    {"9p", "airlock.shares"}};

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

Result<> ensureCacheDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail("cannot create the cache directory " + dir + ": " + ec.message());
  ::chmod(dir.c_str(), 0700);
  return {};
}

// Serializes the builders of one artifact (two starts at once, a pool, `airlock image prepare`).
class BuildLock {
 public:
  static Result<BuildLock> take(const std::string& path) {
    UniqueFd fd(::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!fd) return sysError("open", path + ".lock");
    while (::flock(fd.get(), LOCK_EX) != 0) {
      if (errno != EINTR) return sysError("flock", path + ".lock");
    }
    BuildLock l;
    l.fd_ = std::move(fd);
    return l;
  }

 private:
  UniqueFd fd_;
};

Result<std::string> readWhole(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sysError("open", path);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sysError("read", path);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Result<> writeWhole(const std::string& path, const std::string& data, mode_t mode) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
  if (!fd) return sysError("open", path);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return sysError("write", path);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return sysError("fsync", path);
  return {};
}

// Writes `data` to `path` through a temporary file, so a reader sees all of it or nothing.
Result<> publish(const std::string& path, const std::string& data, mode_t mode) {
  const std::string tmp = path + ".tmp";
  if (auto r = writeWhole(tmp, data, mode); !r) return r;
  if (::rename(tmp.c_str(), path.c_str()) != 0) return sysError("rename", tmp);
  return {};
}

// One xz stream starting at `from`; what follows the stream (a bzImage's trailer) is ignored.
Result<std::string> unxz(std::string_view data, const std::string& what) {
  lzma_stream s = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&s, UINT64_MAX, 0) != LZMA_OK) return fail("xz decoder init", what);
  std::string out;
  s.next_in = reinterpret_cast<const uint8_t*>(data.data());
  s.avail_in = data.size();
  char buf[1 << 16];
  lzma_ret ret = LZMA_OK;
  while (ret == LZMA_OK) {
    s.next_out = reinterpret_cast<uint8_t*>(buf);
    s.avail_out = sizeof buf;
    ret = lzma_code(&s, LZMA_FINISH);
    out.append(buf, sizeof buf - s.avail_out);
  }
  lzma_end(&s);
  if (ret != LZMA_STREAM_END)
    return fail("xz data is corrupt (lzma error " + std::to_string(ret) + ")", what);
  return out;
}

bool isElf(std::string_view d) {
  return d.size() > 4 && d.substr(0, 4) ==
                             "\x7f"
                             "ELF";
}

// "Linux version 6.1.0-56-amd64 (...)": the release that names the kernel's modules.
std::string releaseIn(std::string_view image) {
  // A bzImage says it in its setup header (kernel_version, offset 0x20e, relative to 0x200).
  if (image.size() > 0x210 && image.substr(0x202, 4) == "HdrS") {
    uint16_t off = 0;
    std::memcpy(&off, image.data() + 0x20e, sizeof off);
    size_t at = 0x200 + off;
    if (at < image.size()) {
      std::string_view v = image.substr(at, std::min<size_t>(256, image.size() - at));
      return std::string(v.substr(0, v.find_first_of(" \0", 0, 2)));
    }
  }
  const std::string_view tag = "Linux version ";
  size_t at = image.find(tag);
  if (at == std::string_view::npos) return "";
  std::string_view v = image.substr(at + tag.size(), 128);
  return std::string(v.substr(0, v.find(' ')));
}

std::string newestVmlinuz() {
  std::vector<std::string> found;
  if (DIR* d = ::opendir("/boot")) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.starts_with("vmlinuz-")) found.push_back("/boot/" + n);
    }
    ::closedir(d);
  }
  // Version order, so 6.1.0-56 sorts after 6.1.0-9.
  std::sort(found.begin(), found.end(), [](const std::string& a, const std::string& b) {
    return ::strverscmp(a.c_str(), b.c_str()) < 0;
  });
  return found.empty() ? "" : found.back();
}

std::string canonicalModuleName(std::string file) {
  file = file.substr(file.rfind('/') + 1);
  file = file.substr(0, file.find(".ko"));
  std::replace(file.begin(), file.end(), '-', '_');
  return file;
}

Result<> runMkfsErofs(const std::string& image, const std::string& source) {
  const std::string mkfs =
      exists("/usr/bin/mkfs.erofs") ? "/usr/bin/mkfs.erofs" : "/sbin/mkfs.erofs";
  if (!exists(mkfs)) return fail("mkfs.erofs is not installed (Debian: apt install erofs-utils)");
  const std::string tmp = image + ".tmp";
  ::unlink(tmp.c_str());
  // Every file root's, every time 0: the image depends on the tree alone.
  auto r = runBounded({mkfs, "--quiet", "--all-root", "-T0", tmp, source}, std::chrono::hours(2));
  if (!r) return Unexpected(r.error());
  if (r->status != 0) {
    ::unlink(tmp.c_str());
    std::string out = r->out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return fail("mkfs.erofs " + source + " failed (status " + std::to_string(r->status) +
                (r->timed_out ? ", timed out" : "") + "): " + out.substr(0, 2000));
  }
  if (::rename(tmp.c_str(), image.c_str()) != 0) return sysError("rename", tmp);
  return {};
}

void say(const Progress& progress, const std::string& line) {
  if (progress) progress(line);
}

}  // namespace

// A name for a set of inputs: FNV-1a, 64 bits. The cache is root's own directory; the key only
// has to change when an input does.
std::string cacheKey(const std::vector<std::string>& parts) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& p : parts) {
    for (unsigned char c : p) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

// A file's identity: where it lives and when it last changed.
std::string fileIdentity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return path + ":missing";
  return path + ":" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
         std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

std::string initBesideAgent(const std::string& agent_path) {
  return agent_path.substr(0, agent_path.rfind('/') + 1) + "airlock-vm-init";
}

Result<Kernel> prepareKernel(const std::string& cache_dir, const std::string& vmlinuz,
                             const Progress& progress) {
  Kernel k;
  k.source = vmlinuz.empty() ? newestVmlinuz() : vmlinuz;
  if (k.source.empty())
    return fail(
        "no guest kernel: /boot has no vmlinuz-* (Debian: apt install linux-image-amd64) and "
        "microvm.kernel is not set");
  if (!exists(k.source)) return sysError("stat", "guest kernel " + k.source);
  if (auto r_ = ensureCacheDir(cache_dir); !r_) return Unexpected(r_.error());
  const std::string key = cacheKey({"kernel-v1", fileIdentity(k.source)});
  k.vmlinux = cache_dir + "/vmlinux-" + key;
  const std::string release_file = k.vmlinux + ".release";
  auto cached = [&]() -> bool {
    if (!exists(k.vmlinux)) return false;
    auto rel = readWhole(release_file);
    if (!rel || rel->empty()) return false;
    k.version = *rel;
    return true;
  };
  if (cached()) return k;
  auto lock = BuildLock::take(k.vmlinux);
  if (!lock) return Unexpected(lock.error());
  if (cached()) return k;
  say(progress, "guest kernel: unpacking " + k.source);
  auto image = readWhole(k.source);
  if (!image) return Unexpected(image.error());
  k.version = releaseIn(*image);
  std::string elf;
  if (isElf(*image)) {
    elf = std::move(*image);
  } else {
    // Debian compresses with xz; the payload starts at the stream's magic.
    static constexpr char kXzMagic[] =
        "\xfd"
        "7zXZ";
    size_t at = image->find(std::string_view(kXzMagic, 6));
    if (at == std::string::npos)
      return fail(
          "guest kernel " + k.source +
          " is neither an ELF vmlinux nor an xz-compressed bzImage; set microvm.kernel to one");
    auto out = unxz(std::string_view(*image).substr(at), k.source);
    if (!out) return Unexpected(out.error());
    elf = std::move(*out);
  }
  if (!isElf(elf)) return fail("guest kernel " + k.source + " did not unpack to an ELF vmlinux");
  if (k.version.empty()) k.version = releaseIn(elf);
  if (k.version.empty()) return fail("cannot find the release of guest kernel " + k.source);
  if (auto r_ = publish(k.vmlinux, elf, 0600); !r_) return Unexpected(r_.error());
  if (auto r_ = publish(release_file, k.version, 0600); !r_) return Unexpected(r_.error());
  return k;
}

Result<std::vector<GuestModule>> guestModules(const std::string& version) {
  const std::string base = "/lib/modules/" + version;
  AIRLOCK_TRY_CTX(
      dep, readWhole(base + "/modules.dep"),
      "the guest kernel's modules (install the linux-image package of " + version + ")");
  std::map<std::string, std::pair<std::string, std::vector<std::string>>> modules;
  size_t from = 0;
  while (from < dep.size()) {
    size_t eol = dep.find('\n', from);
    if (eol == std::string::npos) eol = dep.size();
    std::string line = dep.substr(from, eol - from);
    from = eol + 1;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string file = line.substr(0, colon);
    std::vector<std::string> deps;
    size_t p = colon + 1;
    while (p < line.size()) {
      while (p < line.size() && line[p] == ' ') ++p;
      size_t q = line.find(' ', p);
      if (q == std::string::npos) q = line.size();
      if (q > p) deps.push_back(canonicalModuleName(line.substr(p, q - p)));
      p = q;
    }
    modules[canonicalModuleName(file)] = {base + "/" + file, std::move(deps)};
  }
  std::string builtin;
  if (auto b = readWhole(base + "/modules.builtin")) builtin = *b;
  std::vector<GuestModule> order;
  std::set<std::string> added;
  std::string needs;  // the flag of the module being added, for it and what it needs
  std::function<Result<>(const std::string&)> add = [&](const std::string& name) -> Result<> {
    if (added.contains(name)) return {};
    auto it = modules.find(name);
    if (it == modules.end()) {
      // modules.builtin lists paths with dashes or underscores as the source tree has them.
      std::string dashed = name;
      std::replace(dashed.begin(), dashed.end(), '_', '-');
      if (builtin.find("/" + name + ".ko") != std::string::npos ||
          builtin.find("/" + dashed + ".ko") != std::string::npos)
        return {};
      return fail("the guest kernel " + version + " has no module " + name);
    }
    added.insert(name);
    // modules.dep lists every module this one needs, directly or not: each before it.
    for (const auto& d : it->second.second)
      if (auto r = add(d); !r) return r;
    order.push_back({name, it->second.first, needs});
    return {};
  };
  for (const char* m : kGuestModules)
    if (auto r = add(m); !r) return Unexpected(r.error());
  for (const auto& [m, flag] : kOptionalModules) {
    needs = flag;
    if (auto r = add(m); !r) return Unexpected(r.error());
  }
  return order;
}

Result<std::string> prepareInitramfs(const std::string& cache_dir, const Kernel& kernel,
                                     const std::string& init, const std::string& agent,
                                     const Progress& progress) {
  if (!exists(init))
    return fail("airlock-vm-init is missing beside the agent (" + init + "); reinstall airlock");
  auto modules = guestModules(kernel.version);
  if (!modules) return Unexpected(modules.error());
  std::vector<std::string> inputs = {"initramfs-v1", kernel.version, fileIdentity(init),
                                     fileIdentity(agent)};
  for (const auto& m : *modules) inputs.push_back(fileIdentity(m.path) + ":" + m.needs);
  if (auto r_ = ensureCacheDir(cache_dir); !r_) return Unexpected(r_.error());
  const std::string out = cache_dir + "/initramfs-" + cacheKey(inputs) + ".cpio";
  if (exists(out)) return out;
  auto lock = BuildLock::take(out);
  if (!lock) return Unexpected(lock.error());
  if (exists(out)) return out;
  say(progress, "initramfs: airlock-vm-init, airlock-agent and " + std::to_string(modules->size()) +
                    " modules of " + kernel.version);

  std::string cpio;
  archive* a = archive_write_new();
  archive_write_set_format_cpio_newc(a);
  auto sink = [](archive*, void* ctx, const void* buf, size_t n) -> la_ssize_t {
    static_cast<std::string*>(ctx)->append(static_cast<const char*>(buf), n);
    return static_cast<la_ssize_t>(n);
  };
  archive_write_set_bytes_in_last_block(a, 1);
  if (archive_write_open(a, &cpio, nullptr, sink, nullptr) != ARCHIVE_OK) {
    std::string why = archive_error_string(a) ? archive_error_string(a) : "?";
    archive_write_free(a);
    return fail("initramfs: " + why);
  }
  Result<> status;
  auto put = [&](const std::string& name, mode_t type, mode_t mode, const std::string& data) {
    if (!status) return;
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, mode);
    archive_entry_set_size(e, type == AE_IFREG ? static_cast<la_int64_t>(data.size()) : 0);
    archive_entry_set_nlink(e, type == AE_IFDIR ? 2 : 1);
    if (archive_write_header(a, e) != ARCHIVE_OK ||
        (type == AE_IFREG && !data.empty() &&
         archive_write_data(a, data.data(), data.size()) != static_cast<la_ssize_t>(data.size())))
      status = fail("initramfs entry " + name + ": " +
                    (archive_error_string(a) ? archive_error_string(a) : "?"));
    archive_entry_free(e);
  };
  for (const char* d : {"dev", "proc", "sys", "newroot", "lib", "lib/modules"})
    put(d, AE_IFDIR, 0755, "");
  auto file = [&](const std::string& name, const std::string& host) {
    auto data = readWhole(host);
    if (!data) {
      if (status) status = Unexpected(data.error());
      return;
    }
    put(name, AE_IFREG, 0755, *data);
  };
  file("init", init);
  file("airlock-agent", agent);
  std::string order;
  for (const auto& [name, path, needs] : *modules) {
    auto data = readWhole(path);
    if (!data) {
      if (status) status = Unexpected(data.error());
      break;
    }
    if (path.ends_with(".xz")) {
      auto plain = unxz(*data, path);
      if (!plain) {
        status = Unexpected(plain.error());
        break;
      }
      data = std::move(*plain);
    } else if (!path.ends_with(".ko")) {
      status = fail("guest module " + path + " is compressed in a way the backend cannot read");
      break;
    }
    put("lib/modules/" + name + ".ko", AE_IFREG, 0644, *data);
    order += name + (needs.empty() ? "" : " " + needs) + "\n";
  }
  put("lib/modules/order", AE_IFREG, 0644, order);
  if (archive_write_close(a) != ARCHIVE_OK && status)
    status =
        fail("initramfs: " + std::string(archive_error_string(a) ? archive_error_string(a) : "?"));
  archive_write_free(a);
  if (!status) return Unexpected(status.error());
  if (auto r_ = publish(out, cpio, 0600); !r_) return Unexpected(r_.error());
  return out;
}

std::string directoryImagePath(const std::string& cache_dir, const std::string& source) {
  // An image of the store (supervisor/images/store.h: <blob>/rootfs beside <blob>/digest) never
  // changes once published: its digest says what it holds, without walking the tree, and the
  // same image in another store (or rebuilt to the same packages) shares the erofs.
  std::string digest;
  if (source.ends_with("/rootfs")) {
    if (auto text = readWholeFile(source.substr(0, source.size() - 7) + "/digest", 128); text)
      digest = text->substr(0, text->find('\n'));
  }
  if (digest.size() == 71 && digest.starts_with("sha256:"))
    return cache_dir + "/image-" + cacheKey({"store-image-v1", digest}) + ".erofs";
  std::vector<std::string> inputs = {"dir-v1", fileIdentity(source)};
  if (source == "/usr" || source.starts_with("/usr/")) {
    // Packages change files deep inside /usr without touching /usr itself; dpkg's database
    // says when. (Walking /usr's hundreds of thousands of entries per start would cost seconds.)
    inputs.push_back(fileIdentity("/var/lib/dpkg/status"));
  } else {
    // Any other directory (an operator's image, a models directory): a change anywhere in the
    // tree changes some entry's identity.
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(source, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      struct stat st {};
      if (::lstat(it->path().c_str(), &st) != 0) continue;
      inputs.push_back(it->path().string() + ":" + std::to_string(st.st_ino) + ":" +
                       std::to_string(st.st_size) + ":" + std::to_string(st.st_mode) + ":" +
                       std::to_string(st.st_mtim.tv_sec) + "." +
                       std::to_string(st.st_mtim.tv_nsec));
    }
  }
  return cache_dir + "/image-" + cacheKey(inputs) + ".erofs";
}

Result<std::string> prepareDirectoryImage(const std::string& cache_dir, const std::string& source,
                                          const Progress& progress) {
  struct stat st {};
  if (::stat(source.c_str(), &st) != 0) return sysError("stat", source);
  if (!S_ISDIR(st.st_mode)) return fail("not a directory", source);
  if (auto r_ = ensureCacheDir(cache_dir); !r_) return Unexpected(r_.error());
  const std::string out = directoryImagePath(cache_dir, source);
  if (exists(out)) return out;
  auto lock = BuildLock::take(out);
  if (!lock) return Unexpected(lock.error());
  if (exists(out)) return out;
  say(progress, "image of " + source + ": mkfs.erofs (a minute or two for /usr)");
  const auto t0 = std::chrono::steady_clock::now();
  if (auto r_ = runMkfsErofs(out, source); !r_) return Unexpected(r_.error());
  struct stat img {};
  ::stat(out.c_str(), &img);
  say(progress, "image of " + source + ": " + std::to_string(img.st_size >> 20) + " MiB in " +
                    std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                       std::chrono::steady_clock::now() - t0)
                                       .count()) +
                    " s");
  return out;
}

Result<std::string> prepareRootImage(const std::string& cache_dir, const RootSpec& spec,
                                     const Progress& progress) {
  std::vector<std::string> inputs = {"root-v2", spec.usr_links ? "usr-links" : "no-usr-links"};
  for (const auto& p : spec.copied) inputs.push_back(fileIdentity(p));
  for (const auto& [name, text] : spec.etc_files) inputs.push_back("etc/" + name + "=" + text);
  for (const auto& m : spec.mount_points) inputs.push_back("mnt:" + m);
  if (auto r_ = ensureCacheDir(cache_dir); !r_) return Unexpected(r_.error());
  const std::string out = cache_dir + "/root-" + cacheKey(inputs) + ".erofs";
  if (exists(out)) return out;
  auto lock = BuildLock::take(out);
  if (!lock) return Unexpected(lock.error());
  if (exists(out)) return out;
  say(progress, "root image: " + std::to_string(spec.copied.size()) + " host entries");

  char tmpl[4096];
  std::snprintf(tmpl, sizeof tmpl, "%s/tmp-root-XXXXXX", cache_dir.c_str());
  if (::mkdtemp(tmpl) == nullptr) return sysError("mkdtemp", cache_dir);
  const fs::path tree = tmpl;
  std::error_code ec;
  auto cleanup = [&] { fs::remove_all(tree, ec); };
  auto build = [&]() -> Result<> {
    // mkdtemp made it 0700: it becomes the guest's /.
    fs::permissions(tree, fs::perms(0755), ec);
    // Merged /usr: /bin, /lib, ... are links into /usr on the host; the same in the guest.
    for (const char* top : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}) {
      const fs::path host = fs::path("/") / top;
      if (spec.usr_links && fs::is_symlink(host, ec))
        fs::create_symlink(fs::read_symlink(host, ec), tree / top, ec);
    }
    for (const auto& m : spec.mount_points) {
      fs::create_directories(tree / fs::path(m).relative_path(), ec);
      if (ec) return fail("root image: mkdir " + m + ": " + ec.message());
    }
    fs::permissions(tree / "tmp", fs::perms(01777), ec);
    for (const auto& p : spec.copied) {
      if (!fs::exists(fs::symlink_status(p, ec))) continue;  // optional entries
      const fs::path to = tree / fs::path(p).relative_path();
      fs::create_directories(to.parent_path(), ec);
      fs::copy(p, to,
               fs::copy_options::recursive | fs::copy_options::copy_symlinks |
                   fs::copy_options::overwrite_existing,
               ec);
      if (ec) return fail("root image: copying " + p + ": " + ec.message());
    }
    fs::create_directories(tree / "etc", ec);
    for (const auto& [name, text] : spec.etc_files) {
      const std::string path = (tree / "etc" / name).string();
      ::unlink(path.c_str());
      if (auto r = writeWhole(path, text, 0644); !r) return r;
    }
    return runMkfsErofs(out, tree.string());
  };
  auto r = build();
  cleanup();
  if (!r) return Unexpected(r.error());
  return out;
}

}  // namespace airlock::isolation::microvm
