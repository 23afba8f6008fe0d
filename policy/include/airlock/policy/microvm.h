// The microvm backend's table of a profile, [profiles.<name>.microvm] (docs/microvm.md): how
// QEMU boots each sandbox as a small virtual machine. Header-only, like gvisor.h: the microvm
// plugin and the supervisor resolve the zero defaults with the same functions.
#pragma once

#include <cstdint>
#include <string>

namespace airlock::policy {

struct Microvm {
  // Absolute path: the supervisor runs it as root, so never a PATH lookup.
  std::string qemu = "/usr/bin/qemu-system-x86_64";
  // "kvm", "tcg" or "auto" (kvm where the host has it, else tcg): TCG emulates the CPU, so it
  // works without /dev/kvm (containers, some cloud VMs) but is many times slower.
  std::string accel = "auto";
  // The guest's CPUs. 0: limits.cpu_percent rounded up to whole CPUs, at least 1, so the guest
  // sees about what the cgroup lets it use.
  uint32_t vcpus = 0;
  // The guest's RAM, MiB. 0: limits.memory_mb, so the guest kernel sees the profile's limit as
  // its memory; QEMU's own overhead comes on top of it.
  uint64_t memory_mb = 0;
  // "": the host's newest /boot/vmlinuz-*, so a host needs no kernel of its own for guests;
  // else the absolute path of a vmlinuz to boot (e.g. a smaller one built for guests).
  std::string kernel;
  // Where the kernel, initramfs and root images are prepared once and reused: building them
  // per sandbox would cost seconds.
  std::string cache_dir = "/var/cache/airlock/microvm";
  // Seconds from QEMU's start to the agent's handshake, per try: a boot that hangs (no KVM, a
  // kernel without virtio) fails instead of blocking the sandbox's creation.
  uint32_t boot_timeout_s = 60;
  // Resume later sandboxes from a snapshot of the first one's guest, taken before anything of
  // that sandbox's own ran (docs/microvm.md, "Snapshots"): a fraction of a second instead of a
  // boot. Each resumed guest gets its own time, entropy and hostname at once; what it shares
  // with its siblings is the address layout of its /init and agent. false: every sandbox boots.
  bool snapshots = true;

  // vcpus, or limits.cpu_percent (percent of one CPU) in whole CPUs, at least 1.
  uint32_t vcpusFor(uint32_t cpu_percent) const {
    if (vcpus != 0) return vcpus;
    const uint32_t cpus = cpu_percent / 100 + (cpu_percent % 100 != 0 ? 1 : 0);
    return cpus == 0 ? 1 : cpus;
  }
  // The least a guest boots with: Debian's kernel, the initramfs and the agent.
  static constexpr uint64_t kMinGuestMemoryMb = 128;
  // memory_mb, or limits.memory_mb but at least kMinGuestMemoryMb: a smaller limit is then kept
  // by the host's cgroup around QEMU, which ends the whole VM past it (the run says
  // memory_limit, as when a gVisor sentry is killed).
  uint64_t memoryMbFor(uint64_t limits_memory_mb) const {
    if (memory_mb != 0) return memory_mb;
    return limits_memory_mb < kMinGuestMemoryMb ? kMinGuestMemoryMb : limits_memory_mb;
  }
};

}  // namespace airlock::policy
