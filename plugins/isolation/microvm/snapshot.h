// Snapshots of a guest at its pause point (guest/init.cc), so a sandbox resumes in a fraction
// of a second instead of booting for seconds.
//
// The first sandbox of a boot configuration boots cold; at the pause point the plugin stops
// it, has QEMU migrate its whole state into snapshot-<key>.vmstate in the cache, and lets it
// go on. Later sandboxes of that configuration start QEMU with `-incoming` from that file.
// Every guest, booted or restored, then gets the host's go line (time, entropy, hostname), so
// no two share a clock or a random state.
//
// The key covers QEMU's command line with the per-sandbox parts (log files, host uid) left out
// and QEMU's binary: the kernel, initramfs and images are named by their own keys there, so
// any change of input, memory size, CPUs or devices names another snapshot.
#pragma once

#include <chrono>
#include <string>

#include <airlock/result.h>
#include <airlock/unique_fd.h>

#include "vm.h"

namespace airlock::isolation::microvm {

// Where the snapshot of `boot`'s configuration lives in `cache_dir`; it may not exist.
std::string snapshotPath(const std::string& cache_dir, const Boot& boot);

// A QEMU machine protocol (QMP) client on a connected socket: one command at a time.
class Qmp {
 public:
  explicit Qmp(int fd) : fd_(fd) {}
  // Reads QEMU's greeting and enters command mode.
  Result<> handshake(std::chrono::steady_clock::time_point deadline);
  // Runs `command` (a JSON object text with "execute") and returns the "return" member's text;
  // `pass_fd` >= 0 goes along as SCM_RIGHTS (for getfd).
  Result<std::string> execute(const std::string& command,
                              std::chrono::steady_clock::time_point deadline, int pass_fd = -1);

 private:
  Result<std::string> readLine(std::chrono::steady_clock::time_point deadline);
  int fd_;
  std::string buffer_;
};

// Waits until a QEMU started with -incoming has loaded its snapshot and runs the guest.
Result<> awaitRunning(Qmp& qmp, std::chrono::steady_clock::time_point deadline);

// Stops the guest, migrates its state into `path` (through a temporary file and a rename) and
// lets it run on. Returns the snapshot's size in bytes.
Result<uint64_t> saveSnapshot(Qmp& qmp, const std::string& path,
                              std::chrono::steady_clock::time_point deadline);

}  // namespace airlock::isolation::microvm
