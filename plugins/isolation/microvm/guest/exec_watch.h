// The guest's exec audit: a process that airlock-vm-init forks before it execs the agent,
// listening to the guest kernel's process events connector (every exec in the guest) and
// writing one record per exec to the `airlock.events` virtio-serial port, where the host's
// backend turns them into the audit's exec events (plugins/isolation/microvm/exec_records.h has
// the record format). The host's own exec hooks see only QEMU.
#pragma once

namespace airlock::isolation::microvm {

// Subscribes to exec events (so none is missed once this returns) and forks the watcher, which
// writes to `port_fd` for the guest's life. Returns false when the connector is unavailable.
bool startExecWatch(int port_fd);

}  // namespace airlock::isolation::microvm
