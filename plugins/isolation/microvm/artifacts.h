// What a microVM boots, prepared on the host and cached under the backend's cache_dir:
//   vmlinux-<key>      the guest kernel, uncompressed (QEMU loads it directly: decompressing a
//                      bzImage under TCG costs a second per boot)
//   initramfs-<key>    airlock-vm-init as /init, the static airlock-agent, the virtio and erofs
//                      modules the guest needs and their load order
//   image-<key>.erofs  a read-only image of a host directory (/usr: the system view)
//   root-<key>.erofs   the root: the view's /etc entries, the synthesized /etc files, mount
//                      points, the merged-/usr symlinks
// Each name carries a key over its inputs, so changed inputs give a new file and never an
// update in place; a build writes a temporary file and renames it, under a lock per artifact,
// so concurrent starts build once. Linked into the plugin, `airlock image prepare` and
// `airlock doctor`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <airlock/result.h>

namespace airlock::isolation::microvm {

using Progress = std::function<void(const std::string&)>;

struct Kernel {
  std::string vmlinux;  // the cached uncompressed kernel
  std::string version;  // its release ("6.1.0-56-amd64"), which names /lib/modules/<version>
  std::string source;   // the vmlinuz it came from
};

// The newest /boot/vmlinuz-* when `vmlinuz` is empty. Kernels compressed with xz (Debian's)
// and uncompressed ELF kernels are accepted.
Result<Kernel> prepareKernel(const std::string& cache_dir, const std::string& vmlinuz,
                             const Progress& progress = nullptr);

// `init` and `agent` are host paths of the static airlock-vm-init and airlock-agent.
Result<std::string> prepareInitramfs(const std::string& cache_dir, const Kernel& kernel,
                                     const std::string& init, const std::string& agent,
                                     const Progress& progress = nullptr);

// An erofs image of the host directory `source`. Its key covers the directory's identity and,
// for system directories, dpkg's status: installing a package makes a new image.
Result<std::string> prepareDirectoryImage(const std::string& cache_dir, const std::string& source,
                                          const Progress& progress = nullptr);

// Where prepareDirectoryImage puts (or has put) the image of `source`; it may not exist yet.
std::string directoryImagePath(const std::string& cache_dir, const std::string& source);

struct RootSpec {
  // Host paths (files or small directories) copied into the root at the same place.
  std::vector<std::string> copied;
  // Files written into /etc: (name, contents).
  std::vector<std::pair<std::string, std::string>> etc_files;
  // Directories the guest mounts something on (/usr, /home/user, /tmp, /dev, /proc).
  std::vector<std::string> mount_points;
  // The host's merged-/usr links (/bin -> usr/bin, ...). Not over an operator's image, which
  // has its own layout beneath this root.
  bool usr_links = true;
};
Result<std::string> prepareRootImage(const std::string& cache_dir, const RootSpec& spec,
                                     const Progress& progress = nullptr);

// A name for a set of inputs (FNV-1a, 64 bits, in hex). The cache is root's own directory: the
// key only has to change when an input does.
std::string cacheKey(const std::vector<std::string>& parts);

// A file's identity for a key: where it lives and when it last changed.
std::string fileIdentity(const std::string& path);

// The host paths of the guest's helpers beside the agent: <libexec>/airlock-vm-init.
std::string initBesideAgent(const std::string& agent_path);

// A module the guest loads: its name, its host path, and the kernel command line flag that
// asks for it ("" for every boot: the others load only for the sandboxes that use them).
struct GuestModule {
  std::string name, path, needs;
};

// The modules the guest loads, in load order (dependencies first), found through
// /lib/modules/<version>/modules.dep; built-in ones are left out.
Result<std::vector<GuestModule>> guestModules(const std::string& version);

}  // namespace airlock::isolation::microvm
