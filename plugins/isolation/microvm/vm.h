// One microVM: QEMU's command line, its launch into the sandbox's cgroup, and the boot up to
// the agent's ready line.
//
// QEMU (`-M microvm`, no firmware tables beyond ACPI, no PCI) gets the agent's channel, a
// status port and the exec records' port as virtio-serial ports on pre-connected sockets, a
// monitor (QMP) for snapshots, the read-only images as
// virtio-blk disks, operators' live directories as virtio-9p devices, and the guest console and its
// own output in size-capped files. The guest's /init reports its progress and errors on the status
// port, then the agent writes its ready line there.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include <airlock/plugin_abi_v1.h>
#include <airlock/result.h>
#include <airlock/unique_fd.h>

#include "config.h"

namespace airlock::isolation::microvm {

// An operator's directory the guest sees live, over virtio-9p: QEMU's own 9p server opens
// `path` (the supervisor's staging point) at start and serves it as `as` in the guest.
struct Share {
  std::string path;
  std::string as;
  bool writable = false;
};

struct Boot {
  std::string qemu;
  std::string accel;  // "kvm" or "tcg": resolved
  uint32_t vcpus = 1;
  uint64_t memory_mb = 256;
  std::string vmlinux, initramfs;
  std::string root_image;       // vda
  std::string image_layer;      // filesystem.image's erofs, beneath the root (vdb); "": none
  std::string workspace_image;  // a persistent workspace's ext4, read-write, the last disk
  std::vector<std::pair<std::string, std::string>> images;  // (image, mount point): vdb, ...
  // Devices share0, share1, ... in the command line; where each goes is in the go line (per
  // sandbox, after any snapshot), so sandboxes of one configuration share one snapshot.
  std::vector<Share> shares;
  std::string hostname = "sandbox";  // in the go line, not on the command line: per sandbox
  uint32_t reattach_grace_ms = 0;    // the go line's too: the agent's wait for a new supervisor
  // Where QEMU's monitor listens (a socket the plugin binds and QEMU inherits): per sandbox, so
  // a supervisor that adopts the VM reaches the monitor the dead one used. "": a socket pair.
  std::string qmp_socket;
  uint32_t uid = 1000, gid = 1000;
  uint64_t home_bytes = 256ull << 20, tmp_bytes = 256ull << 20;
  std::string console_log;  // the guest's serial console, capped
  // QEMU's own stdout and stderr, capped like the console: a file rather than a pipe, which a
  // QEMU warning repeated by the guest could fill until QEMU blocks. "": /dev/null.
  std::string qemu_log;
  bool network = false;  // eth0 on QEMU's user-mode network, in QEMU's network namespace
  bool marker = false;   // boot to the init's first instruction and power off (B7's floor)
  int runas_uid = -1, runas_gid = -1;  // QEMU drops to these after opening its files
  // The largest file the guest may write into a writable share (limits.file_size_mb).
  uint64_t share_file_bytes = 256ull << 20;
};

// The fds QEMU is started with: the ports' sockets, its monitor (QMP: a listening socket, so that
// every supervisor in turn can connect), and the snapshot it resumes from.
inline constexpr int kAgentFd = 3, kStatusFd = 4, kEventsFd = 5, kQmpFd = 6, kIncomingFd = 7;

// QEMU's argv, booting `boot` (without -incoming).
std::vector<std::string> qemuArgv(const Boot& boot);

struct Launch {
  int agent_channel_fd = -1;  // the sandbox's end of the agent channel
  int cgroup_v2_fd = -1;
  int (*attach_cgroups)(void* ctx, pid_t pid, airlock_error_v1* err) = nullptr;
  void* attach_ctx = nullptr;
  int netns_fd = -1;
  std::chrono::steady_clock::time_point deadline;
  // snapshot.h: resume this snapshot instead of booting; or, booting, save the guest into
  // `snapshot_to` at its pause point. "": neither.
  std::string restore_from, snapshot_to;
};

struct Running {
  pid_t pid = -1;
  UniqueFd pidfd;
  UniqueFd events;   // the guest's exec records (exec_records.h), non-blocking
  std::string said;  // what the guest's init said before the agent was ready
  // Saving the snapshot: its size, or why it failed (the sandbox runs on either way).
  uint64_t snapshot_bytes = 0;
  std::string snapshot_error;
};

// Starts QEMU (booting, or resuming launch.restore_from), answers the guest's pause point with
// the go line (time, entropy, boot.hostname) and waits for the agent's ready line. On failure
// QEMU is killed and reaped, and the error says why: QEMU's own message, the init's, or a
// timeout (errnum ETIMEDOUT), with the console's tail.
Result<Running> bootVm(const Boot& boot, const Launch& launch);

// Boots `boot`'s kernel and initramfs to the first instruction of the guest's /init, which
// prints a marker and powers off: proof that this accelerator runs a guest (a /dev/kvm that
// opens may still fail every guest), and the floor a microVM's boot is measured against.
// Returns the seconds from QEMU's start to its exit.
Result<double> probeBoot(const Boot& boot, std::chrono::milliseconds limit);

// The host's TSC frequency in kHz (/proc/cpuinfo), for tsc_early_khz: without it a TCG guest
// calibrates against an emulated PIT and can hang or run its clock slow. 0 when unknown.
unsigned long hostTscKhz();

// For a supervisor that adopts the VM of one that died: connects to its monitor, passes it new
// sockets for the agent's port and the exec records' port (QMP getfd, chardev-change; the guest
// sees its host reopen the ports), and returns the supervisor's ends: the agent's channel and
// the records, non-blocking.
struct Reconnected {
  UniqueFd agent_channel;
  UniqueFd events;
};
Result<Reconnected> reconnectPorts(const std::string& qmp_socket,
                                   std::chrono::steady_clock::time_point deadline);

// The last `lines` lines of a file (the guest console), joined with "; ".
std::string fileTail(const std::string& path, size_t lines);

}  // namespace airlock::isolation::microvm
