/* Records every successful execve/execveat of an audited sandbox: the file, the head of argv, and
 * the pid as the sandbox sees it.
 *
 * Hook: the raw tracepoint sched_process_exec. It fires once per successful exec, after the new
 * image is in place (so argv can be read from the new stack), costs nothing for processes that do
 * not exec, and needs neither tracefs nor kprobes/fentry (refused on the development kernel, see
 * docs/audit.md). Arguments are read with CO-RE, so one object runs on every BTF kernel. */
#include "common.bpf.h"

#include <bpf/bpf_tracing.h>

SEC("raw_tp/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct* task, pid_t old_pid, struct linux_binprm* bprm) {
  __u32 slot = slot_of_current_task();
  if (slot == 0 || !(audit_flags_of(slot) & AIRLOCK_AUDIT_EXEC)) return 0;

  void* ring = ring_of(slot);
  struct airlock_exec_event* e = ring ? bpf_ringbuf_reserve(ring, sizeof *e, 0) : 0;
  if (!e) {
    count_drop(slot);
    return 0;
  }
  fill_header(&e->header, AIRLOCK_EVENT_EXEC, slot);

  /* The pid in the task's own (innermost) pid namespace: the sandbox's. After exec the thread is
   * its group's leader, so its thread pid is the process id. */
  struct pid* pid = BPF_CORE_READ(task, thread_pid);
  unsigned int level = BPF_CORE_READ(pid, level);
  int ns_pid = 0;
  bpf_core_read(&ns_pid, sizeof ns_pid, &pid->numbers[level & 31].nr);
  e->header.ns_pid = (__u32)ns_pid;
  e->ppid = (__u32)BPF_CORE_READ(task, real_parent, tgid);
  e->argc = (__u32)BPF_CORE_READ(bprm, argc);
  e->reserved = 0;

  const char* filename = BPF_CORE_READ(bprm, filename);
  long n = bpf_probe_read_kernel_str(e->path, sizeof e->path, filename);
  e->path_len = n > 0 ? (__u16)n : 0;
  if (n <= 0) e->path[0] = 0;

  /* argv: NUL-separated strings between mm->arg_start and arg_end of the new image. */
  struct mm_struct* mm = BPF_CORE_READ(task, mm);
  unsigned long start = BPF_CORE_READ(mm, arg_start);
  unsigned long end = BPF_CORE_READ(mm, arg_end);
  unsigned long len = end > start ? end - start : 0;
  if (len > sizeof e->argv) len = sizeof e->argv;
  if (bpf_probe_read_user(e->argv, len, (const void*)start) != 0) len = 0;
  e->argv_len = (__u16)len;
  if (len < sizeof e->argv) e->argv[len & (sizeof e->argv - 1)] = 0;

  bpf_ringbuf_submit(e, 0);
  return 0;
}
