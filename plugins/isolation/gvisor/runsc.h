// Running runsc: the command lines the backend uses, and the `runsc run` process that is the
// sandbox's monitor (the pid the supervisor holds).
//
// `runsc run` stays in the foreground for the sandbox's whole life: it starts the sentry and the
// gofer as its children and exits with the container's status. Its stdin and stdout are the
// agent's channel (gVisor passes only fds 0-2 into the sandbox); its stderr is a pipe on which
// runsc's own errors arrive, then the agent's ready line (agent --announce-ready).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include <airlock/plugin_abi_v1.h>
#include <airlock/result.h>
#include <airlock/unique_fd.h>

#include "config.h"
#include "monitor.h"

namespace airlock::isolation::gvisor {

// Flags before the subcommand: state root, platform, network, overlay, the operator's extras.
// `network_sandbox`: the sandbox's netstack gets the interfaces of runsc's network namespace
// (--network=sandbox); otherwise loopback only (--network=none).
std::vector<std::string> globalFlags(const Config& config, const std::string& state_root,
                                     bool network_sandbox, const std::string& overlay_dir);

struct Monitor {
  pid_t pid = -1;
  UniqueFd pidfd;
  UniqueFd stderr_read;  // runsc's stderr (and the agent's until its ready line)
};

struct SpawnOptions {
  std::vector<std::string> argv;  // runsc's full command line; argv[0] is the binary's path
  int channel_fd = -1;            // becomes stdin and stdout (-1: /dev/null)
  // Stdin only; stdout is /dev/null. gVisor imports each host fd of a process's stdio as its
  // own socket endpoint and shuts the host socket down when one is closed: a short-lived
  // process (runsc exec) must hold the channel once, or its exit would end the channel for the
  // process it handed it to.
  bool channel_stdin_only = false;
  int cgroup_v2_fd = -1;  // the child joins it before exec, or -1
  // v1 hierarchies, called with the child's pid while it waits (airlock_sandbox_spec_v1).
  int (*attach_cgroups)(void* ctx, pid_t pid, airlock_error_v1* err) = nullptr;
  void* attach_ctx = nullptr;
  // The linked network namespace to run runsc in (--network=sandbox), or -1.
  int netns_fd = -1;
};

// Forks runsc in its own session, inside the sandbox's cgroup from its first instruction. With a
// netns_fd the child joins that namespace and a private mount namespace whose /proc/sys/net is an
// empty tmpfs: runsc's --network=sandbox takes "/proc/sys/net/core/rmem_default exists" to mean
// "this is the host's namespace" and refuses, but on recent kernels every namespace has that
// file. The mount namespace ends with runsc; nothing of it reaches the host.
Result<Monitor> spawn(const SpawnOptions& options);

// Reads the monitor's stderr until the agent's ready line (true) or EOF (false: runsc failed),
// at most until `deadline`. `text` gets what came before the line: runsc's error messages.
// Meanwhile runsc connects to the monitoring sink and waits for its handshake: answered here.
Result<bool> awaitReady(int stderr_fd, std::chrono::steady_clock::time_point deadline,
                        std::string& text, MonitorSink& sink);

// Runs a short runsc command (exec, trace create) to its end, at most until `deadline` (then it
// is killed): fails with its exit status and its cleaned stderr unless it exits 0. With a sink,
// answers the monitoring handshake runsc makes meanwhile (trace create).
Result<> runToEnd(const SpawnOptions& options, std::chrono::steady_clock::time_point deadline,
                  MonitorSink* sink = nullptr);

// runsc's stderr made readable: its log prefixes ("W1126 20:24:44.912559 23097 util.go:64] ")
// dropped, repeated lines once, lines joined with "; ".
std::string cleanRunscText(const std::string& text);

}  // namespace airlock::isolation::gvisor
