// airlock image prepare: prepares what microVM sandboxes boot (the guest kernel, the initramfs
// with the agent, the system view's images) before the first sandbox needs them, and removes
// what earlier builds left that nothing uses any more. The backend would build missing pieces
// at its first start, but the /usr image takes a minute or two: setup runs this instead.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "airlock/policy/policy.h"
#include "artifacts.h"
#include "supervisor/cli/cli.h"
#include "supervisor/cli/default_policy.h"
#include "supervisor/images/resolve.h"
#include "supervisor/plugin/registry.h"
#include "supervisor/sandbox/host/rootfs_view.h"
#include "supervisor/sandbox/run_result.h"

namespace airlock::cli {
namespace {

constexpr const char* kUsage =
    R"(Usage: airlock image prepare [--policy FILE] [--profile NAME]... [--keep-old]

Prepares what isolation = "microvm" boots, under each profile's microvm.cache_dir:
  the guest kernel      the host's newest /boot/vmlinuz-* (or microvm.kernel), unpacked
  the initramfs         airlock-vm-init, airlock-agent and the guest's virtio and erofs modules
  the system images     a read-only erofs image of /usr (and of each directory the profile
                        shows from the host outside /etc, and of its filesystem.image,
                        a directory or an image of the store)
Each piece is rebuilt when its inputs change (a new kernel, agent, or package in /usr); pieces
of earlier builds that nothing uses any more are removed unless --keep-old is given, and so
are the guest snapshots (each is made again by the first sandbox of its configuration).
Profiles: the ones named, else every profile that uses or offers microvm, else the defaults.
)";

bool usesMicrovm(const policy::Profile& p) {
  auto is = [](const std::string& name) {
    return name == "microvm" || name == "airlock.isolation.microvm";
  };
  if (is(p.isolation)) return true;
  for (const auto& c : p.isolation_choices)
    if (is(c)) return true;
  return false;
}

const char* const kDefaultPolicy = defaultPolicyPath();

}  // namespace

int imagePrepareCommand(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << kUsage;
    return 0;
  }
  std::string policy_file;
  std::vector<std::string> wanted;
  bool keep_old = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--policy" && i + 1 < args.size()) {
      policy_file = args[++i];
    } else if (args[i] == "--profile" && i + 1 < args.size()) {
      wanted.push_back(args[++i]);
    } else if (args[i] == "--keep-old") {
      keep_old = true;
    } else {
      printError("image prepare: unexpected argument '" + args[i] + "'\n" + kUsage);
      return sandbox::kExitAirlockError;
    }
  }
  if (policy_file.empty() && std::filesystem::exists(kDefaultPolicy)) policy_file = kDefaultPolicy;
  auto pol = policy_file.empty() ? Result<policy::Policy>(policy::builtinDefault())
                                 : policy::loadFile(policy_file);
  if (!pol) {
    printError("image prepare: " + pol.error().message());
    return sandbox::kExitAirlockError;
  }
  std::vector<const policy::Profile*> profiles;
  for (const auto& name : wanted) {
    auto it = pol->profiles.find(name);
    if (it == pol->profiles.end()) {
      printError("image prepare: no profile '" + name + "' in " + pol->source);
      return sandbox::kExitAirlockError;
    }
    profiles.push_back(&it->second);
  }
  if (wanted.empty())
    for (const auto& [name, p] : pol->profiles)
      if (usesMicrovm(p)) profiles.push_back(&p);
  const policy::Profile defaults;
  if (profiles.empty()) profiles.push_back(&defaults);

  const std::string agent = plugin::defaultAgentPath();
  auto progress = [](const std::string& line) { std::cerr << "airlock: image: " << line << "\n"; };
  std::map<std::string, std::set<std::string>> used;  // cache dir → artifacts in use
  const auto t0 = std::chrono::steady_clock::now();
  for (const policy::Profile* p : profiles) {
    const auto& m = p->microvm;
    auto kernel = isolation::microvm::prepareKernel(m.cache_dir, m.kernel, progress);
    if (!kernel) {
      printError("image prepare: microvm: " + kernel.error().message());
      return sandbox::kExitAirlockError;
    }
    auto initramfs = isolation::microvm::prepareInitramfs(
        m.cache_dir, *kernel, isolation::microvm::initBesideAgent(agent), agent, progress);
    if (!initramfs) {
      printError("image prepare: microvm: " + initramfs.error().message());
      return sandbox::kExitAirlockError;
    }
    auto& in_use = used[m.cache_dir];
    in_use.insert({kernel->vmlinux, kernel->vmlinux + ".release", *initramfs});
    // The directories the backend gives images of: the system view's, outside /etc. A store
    // image is a whole root (the sandbox gets no host /usr over it): only the profile's own
    // readonly_paths then.
    const bool store_image = !p->filesystem.image.empty() && p->filesystem.image.front() != '/';
    std::vector<std::string> dirs;
    for (const auto& e : sandbox::composeView({}, p->filesystem.readonly_paths)) {
      const bool listed =
          std::find(p->filesystem.readonly_paths.begin(), p->filesystem.readonly_paths.end(),
                    e.target) != p->filesystem.readonly_paths.end();
      if (!e.target.starts_with("/etc") && std::filesystem::is_directory(e.source) &&
          (!store_image || listed))
        dirs.push_back(e.source);
    }
    // filesystem.image: the operator's image, the layer beneath the guest's root.
    if (!p->filesystem.image.empty()) {
      auto image = images::imageRootDir(p->filesystem.image);
      if (!image) {
        printError("image prepare: profile '" + p->name + "': " + image.error().message());
        return sandbox::kExitAirlockError;
      }
      dirs.push_back(*image);
    }
    for (const auto& d : dirs) {
      auto image = isolation::microvm::prepareDirectoryImage(m.cache_dir, d, progress);
      if (!image) {
        printError("image prepare: microvm: " + image.error().message());
        return sandbox::kExitAirlockError;
      }
      in_use.insert(*image);
    }
    std::cerr << "airlock: image: profile '" << p->name << "': kernel " << kernel->version << ", "
              << dirs.size() << " system image(s) ready in " << m.cache_dir << "\n";
  }
  if (!keep_old) {
    for (const auto& [dir, keep] : used) {
      std::error_code ec;
      for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        const std::string path = e.path().string(), name = e.path().filename().string();
        // Snapshots go too: they are made again, one cold boot each, on the next start of
        // their configuration, and a stale one would only take space.
        const bool ours = name.starts_with("vmlinux-") || name.starts_with("initramfs-") ||
                          name.starts_with("image-") || name.starts_with("snapshot-");
        if (!ours || keep.contains(path) || name.ends_with(".lock")) continue;
        std::filesystem::remove(e.path(), ec);
        if (!ec) progress("removed " + path + " (an earlier build)");
      }
    }
  }
  std::cerr << "airlock: image: done in "
            << std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() -
                                                                t0)
                   .count()
            << " s\n";
  return 0;
}

}  // namespace airlock::cli
