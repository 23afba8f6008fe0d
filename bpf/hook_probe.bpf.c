/* Hooks airlock does not use, probed by `airlock doctor` so operators see what a host offers:
 * BPF LSM and fentry. Each program does nothing; doctor loads and attaches one at a time and
 * detaches it at once. */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

SEC("lsm/file_open")
int BPF_PROG(probe_lsm, struct file* file) { return 0; }

SEC("fentry/vfs_read")
int BPF_PROG(probe_fentry, struct file* file) { return 0; }
