#include "bundle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include <airlock/unique_fd.h>
#include <nlohmann/json.hpp>

#include "common/sandbox_etc.h"

namespace airlock::isolation::gvisor {
namespace {

using Json = nlohmann::json;

// The host's top-level system directories: symlinks into /usr on merged-/usr hosts.
constexpr const char* kCompatDirs[] = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};

// The agent is root inside gVisor's kernel and drops to the sandbox user for every execution
// (keeping only the profile's capabilities), as in the namespaces backend's user namespace.
constexpr const char* kCapabilities[] = {
    "CAP_CHOWN",           "CAP_DAC_OVERRIDE",     "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",          "CAP_FSETID",           "CAP_KILL",
    "CAP_SETGID",          "CAP_SETUID",           "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",       "CAP_IPC_LOCK",         "CAP_IPC_OWNER",
    "CAP_SYS_CHROOT",      "CAP_SYS_PTRACE",       "CAP_SYS_ADMIN",
    "CAP_SYS_NICE",        "CAP_SYS_RESOURCE",     "CAP_MKNOD",
    "CAP_LEASE",           "CAP_AUDIT_WRITE",      "CAP_SETFCAP",
};

bool isUnder(const std::string& path, const std::string& dir) {
  return path == dir || path.starts_with(dir + "/");
}

Result<> checkTarget(const std::string& target) {
  if (!target.starts_with('/') || target.find("/../") != std::string::npos ||
      target.ends_with("/..") || target.find("//") != std::string::npos)
    return fail("mount target is not a clean absolute path", target);
  if (target == "/" || isUnder(target, "/proc") || isUnder(target, "/dev") ||
      isUnder(target, "/.airlock"))
    return fail("mount target is reserved by the sandbox (/, /proc, /dev, /.airlock)", target);
  return {};
}

// A symlink's target, recreated in the root instead of binding what it points at.
Result<std::string> readLink(const std::string& path) {
  char buf[4096];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
  if (n <= 0 || static_cast<size_t>(n) == sizeof buf) return sysError("readlink", path);
  return std::string(buf, static_cast<size_t>(n));
}

Result<> mkdirs(const std::string& root, const std::string& path) {
  std::string at = root;
  size_t pos = 1;
  while (pos <= path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    at += "/" + path.substr(pos, next - pos);
    if (::mkdir(at.c_str(), 0755) != 0 && errno != EEXIST) return sysError("mkdir", at);
    pos = next + 1;
  }
  return {};
}

Result<> writeFile(const std::string& path, const std::string& contents, mode_t mode) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd) return sysError("open", path);
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd.get(), contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sysError("write", path);
    done += static_cast<size_t>(n);
  }
  return {};
}

// A mount point in the root for a bind of `source`: a directory, or an empty file for a file.
Result<> makeMountPoint(const std::string& root, const std::string& target, bool directory) {
  if (directory) return mkdirs(root, target);
  auto parent = target.substr(0, target.rfind('/'));
  if (!parent.empty())
    if (auto r = mkdirs(root, parent); !r) return r;
  std::string at = root + target;
  struct stat st;
  if (::lstat(at.c_str(), &st) == 0) return {};
  return writeFile(at, "", 0644);
}

// The namespaces backend's /etc files, plus the statx shim's preload line.
std::vector<std::pair<std::string, std::string>> etcFiles(const BundleInputs& in) {
  auto files = sandboxEtcFiles(*in.spec);
  if (!in.statx_compat_host_path.empty())
    files.emplace_back("ld.so.preload", std::string(kStatxCompatPath) + "\n");
  return files;
}

struct Layout {
  Json mounts = Json::array();
  // Mount points to create in rootfs (target, is a directory) and symlinks (path, target).
  std::vector<std::pair<std::string, bool>> points;
  std::vector<std::pair<std::string, std::string>> links;
  // The /etc files written into rootfs (name → contents).
  std::vector<std::pair<std::string, std::string>> etc;
};

// The operator's image (filesystem.image), or "" for the host's system view.
std::string imageOf(const airlock_sandbox_spec_v1& spec) {
  return spec.image_dir != nullptr ? spec.image_dir : "";
}

// What of an image's top level the sandbox's own root provides instead.
bool providedByTheRoot(const std::string& name) {
  static const std::set<std::string> kOwn = {"proc", "dev",      "tmp", "home",
                                             "sys",  ".airlock", "etc"};
  return kOwn.contains(name);
}

// The entries of a directory of the image, sorted (a stable bundle for one image).
Result<std::vector<std::string>> entriesOf(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out.push_back(it->path().filename().string());
  if (ec) return Unexpected(Error("read the image directory", dir, ec.value()));
  std::sort(out.begin(), out.end());
  return out;
}

// An image's path must be reached without symlinks: runsc resolves a mount's destination, and
// creates what is missing, on the host, inside the root it was given.
Result<bool> existsInImage(const std::string& image, const std::string& target, bool directory) {
  std::string at = image;
  size_t pos = 1;
  while (pos <= target.size()) {
    size_t next = target.find('/', pos);
    if (next == std::string::npos) next = target.size();
    at += "/" + target.substr(pos, next - pos);
    struct stat st;
    if (::lstat(at.c_str(), &st) != 0) return false;
    if (S_ISLNK(st.st_mode))
      return fail("a mount target in the image goes through a symlink", target);
    if (next == target.size()) return directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode);
    if (!S_ISDIR(st.st_mode)) return false;
    pos = next + 1;
  }
  return false;
}

Result<Layout> layoutFor(const BundleInputs& in) {
  const airlock_sandbox_spec_v1& spec = *in.spec;
  Layout l;
  auto bind = [&](const std::string& source, const std::string& target, bool readonly) {
    Json options = {"rbind", "nosuid", "nodev"};
    options.push_back(readonly ? "ro" : "rw");
    l.mounts.push_back(
        {{"destination", target}, {"type", "bind"}, {"source", source}, {"options", options}});
  };
  l.mounts.push_back({{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}});
  l.etc = etcFiles(in);
  bool home_bound = false;
  std::set<std::string> targets;
  // With an image the root stays the backend's own (runsc would create missing mount points in
  // a root it was given, on the host: in the operator's image). The image's top-level entries
  // are bound into it one by one, read-only, and so are the entries of its /etc beside the
  // sandbox's generated files. Nothing is ever created inside an image directory.
  const std::string image = imageOf(spec);
  std::set<std::string> image_dirs;  // top-level names bound from the image
  std::vector<std::pair<std::string, std::string>> image_binds;  // (source, target), after mounts
  if (!image.empty()) {
    auto bindEntry = [&](const std::string& source, const std::string& target) -> Result<> {
      struct stat st;
      if (::lstat(source.c_str(), &st) != 0) return sysError("lstat", source);
      if (S_ISLNK(st.st_mode)) {
        auto link = readLink(source);
        if (!link) return Unexpected(link.error());
        l.links.emplace_back(target, std::move(*link));
      } else if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) {
        l.points.emplace_back(target, S_ISDIR(st.st_mode));
        image_binds.emplace_back(source, target);
      }
      return {};
    };
    AIRLOCK_TRY_CTX(top, entriesOf(image), "filesystem.image");
    for (const auto& name : top) {
      if (providedByTheRoot(name)) continue;
      if (auto r = bindEntry(image + "/" + name, "/" + name); !r) return Unexpected(r.error());
      image_dirs.insert(name);
    }
    struct stat st;
    if (::lstat((image + "/etc").c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      std::set<std::string> generated;
      for (const auto& [name, contents] : l.etc) generated.insert(name);
      AIRLOCK_TRY_CTX(etc, entriesOf(image + "/etc"), "filesystem.image");
      for (const auto& name : etc)
        if (!generated.contains(name))
          if (auto r = bindEntry(image + "/etc/" + name, "/etc/" + name); !r)
            return Unexpected(r.error());
    }
  }
  for (const auto& [source, target] : image_binds) {
    targets.insert(target);
    bind(source, target, true);
  }
  // A spec mount under an image directory goes onto what the image has, or nowhere.
  auto underImage = [&](const std::string& target) {
    const std::string top = target.substr(1, target.find('/', 1) - 1);
    return image_dirs.contains(top) && target != "/" + top;
  };
  for (size_t i = 0; i < spec.mounts_len; ++i) {
    const airlock_mount_v1& m = spec.mounts[i];
    if (m.source == nullptr || m.target == nullptr) return fail("mount with a NULL path");
    std::string source = m.source, target = m.target;
    if (!source.starts_with('/')) return fail("mount source is not an absolute path", source);
    if (auto r = checkTarget(target); !r) return Unexpected(r.error());
    struct stat st;
    if (::stat(source.c_str(), &st) != 0) {
      if (errno == ENOENT && (m.flags & AIRLOCK_MOUNT_OPTIONAL) != 0) continue;
      return sysError("stat(mount source)", source);
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
      return fail("mount source is neither a directory nor a regular file", source);
    if (!image.empty() && underImage(target)) {
      auto there = existsInImage(image, target, S_ISDIR(st.st_mode));
      if (!there) return Unexpected(there.error());
      if (!*there) {
        if ((m.flags & AIRLOCK_MOUNT_OPTIONAL) != 0) continue;
        return fail("mount target does not exist in the image as a " +
                        std::string(S_ISDIR(st.st_mode) ? "directory" : "file") +
                        " (the gvisor backend never creates paths in an image)",
                    target);
      }
      bind(source, target, (m.flags & AIRLOCK_MOUNT_READONLY) != 0);  // onto the image's own
      continue;
    }
    // Over an image's entry of the same name (the system view's /usr, an /etc file): on top,
    // as the namespaces backend binds it over its image.
    const bool over_image_entry = std::any_of(image_binds.begin(), image_binds.end(),
                                              [&](const auto& b) { return b.second == target; });
    if (!targets.insert(target).second && !over_image_entry)
      return fail("two mounts at one target", target);
    if (target == "/home/user") home_bound = true;
    l.points.emplace_back(target, S_ISDIR(st.st_mode));
    bind(source, target, (m.flags & AIRLOCK_MOUNT_READONLY) != 0);
  }
  for (const char* dir : kCompatDirs) {
    if (!image.empty()) break;  // the image has its own
    struct stat st;
    if (::lstat(dir, &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      auto link = readLink(dir);
      if (!link) return Unexpected(link.error());
      l.links.emplace_back(dir, std::move(*link));
    } else if (S_ISDIR(st.st_mode) && targets.insert(dir).second) {
      l.points.emplace_back(dir, true);
      bind(dir, dir, true);
    }
  }
  if (!home_bound) {
    l.mounts.push_back(
        {{"destination", "/home/user"},
         {"type", "tmpfs"},
         {"source", "tmpfs"},
         {"options",
          {"nosuid", "nodev", "size=" + std::to_string(spec.workspace_bytes), "mode=0700",
           "uid=" + std::to_string(spec.user_uid), "gid=" + std::to_string(spec.user_gid)}}});
    l.points.emplace_back("/home/user", true);
  }
  l.mounts.push_back(
      {{"destination", "/tmp"},
       {"type", "tmpfs"},
       {"source", "tmpfs"},
       {"options", {"nosuid", "nodev", "size=" + std::to_string(spec.tmp_bytes), "mode=1777"}}});
  l.points.emplace_back("/tmp", true);
  l.mounts.push_back(
      {{"destination", "/dev/shm"},
       {"type", "tmpfs"},
       {"source", "tmpfs"},
       {"options",
        {"nosuid", "nodev", "noexec", "size=" + std::to_string(spec.tmp_bytes), "mode=1777"}}});
  l.points.emplace_back("/dev", true);
  l.points.emplace_back("/proc", true);
  bind(in.agent_host_path, kAgentPath, true);
  l.points.emplace_back(kAgentPath, false);
  if (!in.statx_compat_host_path.empty()) {
    bind(in.statx_compat_host_path, kStatxCompatPath, true);
    l.points.emplace_back(kStatxCompatPath, false);
  }
  return l;
}

Json specJson(const BundleInputs& in, const Layout& layout) {
  const airlock_sandbox_spec_v1& spec = *in.spec;
  // No host process can take a channel from the agent here: a helper brings the next (adopt()).
  Json args = {kAgentPath, "--channel-stdio", "--announce-ready", "--reattach-by-helper"};
  for (const auto& a : in.agent_args) args.push_back(a);
  Json caps = Json::array();
  for (const char* c : kCapabilities) caps.push_back(c);
  Json ns = Json::array();
  for (const char* t : {"pid", "ipc", "uts", "mount"}) ns.push_back({{"type", t}});
  if (in.netns_path.empty())
    ns.push_back({{"type", "network"}});
  else
    ns.push_back({{"type", "network"}, {"path", in.netns_path}});
  return {
      {"ociVersion", "1.0.2"},
      {"process",
       {{"terminal", false},
        {"user", {{"uid", 0}, {"gid", 0}}},
        {"args", args},
        {"env", {"PATH=/usr/bin:/bin"}},
        {"cwd", "/"},
        {"capabilities",
         {{"bounding", caps}, {"effective", caps}, {"permitted", caps}, {"inheritable", caps}}},
        {"noNewPrivileges", false}}},
      {"root", {{"path", "rootfs"}, {"readonly", true}}},
      {"hostname", spec.hostname},
      {"mounts", layout.mounts},
      {"linux", {{"namespaces", ns}}},
  };
}

Result<> checkSpec(const airlock_sandbox_spec_v1& spec) {
  if (spec.hostname == nullptr || spec.hostname[0] == '\0' || std::strlen(spec.hostname) > 64 ||
      std::strchr(spec.hostname, '\n') != nullptr)
    return fail("hostname must be 1 to 64 characters without newlines");
  if (spec.workspace_bytes == 0) return fail("workspace_bytes is 0");
  if (spec.tmp_bytes == 0) return fail("tmp_bytes is 0");
  if (spec.image_dir != nullptr && spec.image_dir[0] != '\0') {
    const std::string image = spec.image_dir;
    if (!image.starts_with('/') || image == "/" || image.find("/../") != std::string::npos ||
        image.ends_with("/..") || image.find("//") != std::string::npos || image.ends_with('/'))
      return fail("filesystem.image is not a clean absolute path (not /)", image);
    struct stat st;
    if (::stat(image.c_str(), &st) != 0) return sysError("stat(filesystem.image)", image);
    if (!S_ISDIR(st.st_mode)) return fail("filesystem.image is not a directory", image);
  }
  return {};
}

}  // namespace

Result<std::string> runtimeSpec(const BundleInputs& in) {
  if (auto r = checkSpec(*in.spec); !r) return Unexpected(r.error());
  AIRLOCK_TRY_CTX(layout, layoutFor(in), "bundle");
  return specJson(in, layout).dump(2);
}

Result<> writeBundle(const BundleInputs& in, const std::string& dir) {
  if (auto r = checkSpec(*in.spec); !r) return Unexpected(r.error());
  AIRLOCK_TRY_CTX(layout, layoutFor(in), "bundle");
  const std::string root = dir + "/rootfs";
  if (::mkdir(root.c_str(), 0755) != 0) return sysError("mkdir", root);
  if (auto r = mkdirs(root, "/etc"); !r) return r;
  for (const auto& [name, contents] : layout.etc)
    if (auto r = writeFile(root + "/etc/" + name, contents, 0644); !r) return r;
  for (const auto& [path, target] : layout.links)
    if (::symlink(target.c_str(), (root + path).c_str()) != 0) return sysError("symlink", path);
  for (const auto& [target, directory] : layout.points)
    if (auto r = makeMountPoint(root, target, directory); !r) return r;
  return writeFile(dir + "/config.json", specJson(in, layout).dump(), 0600);
}

}  // namespace airlock::isolation::gvisor
