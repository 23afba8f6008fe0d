# Kernel-surface probe for the hostile tests: runs each named probe in a forked child and prints
# one JSON object {probe: "OK" | "<ERRNO>" | "SIG<NAME>" | "SKIP:<why>"}.
# Every probe uses arguments that are harmless when the call succeeds (bad magic numbers, bad
# flags, a scratch path, our own child), so the tests can run it bare as a positive control.
# Usage: kernel_surface.py [--scratch DIR] PROBE...
import ctypes
import errno
import json
import mmap
import os
import select
import signal
import socket
import struct
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_void_p]

NR = {
    "io_uring_setup": 425, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
    "kexec_load": 246, "kexec_file_load": 320, "reboot": 169, "init_module": 175,
    "finit_module": 313, "delete_module": 176, "unshare": 272, "setns": 308,
    "pivot_root": 155, "ptrace": 101, "process_vm_readv": 310, "open_by_handle_at": 304,
    "name_to_handle_at": 303, "keyctl": 250, "add_key": 248, "mknodat": 259, "chroot": 161,
    "fsopen": 430, "open_tree": 428, "clone": 56, "clone3": 435, "getpid": 39,
}
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
AT_FDCWD = -100
SCRATCH = "/tmp"


def sc(name, *args):
    cargs = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    r = libc.syscall(ctypes.c_long(NR[name]), *cargs)
    if r < 0:
        raise OSError(ctypes.get_errno(), name)
    return r


def closing(fd):
    os.close(fd)
    return 0


def sleeper():
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    time.sleep(0.05)
    return pid


def reap(pid):
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def p_ptrace_child():
    pid = sleeper()
    try:
        return sc("ptrace", 0x4206, pid, 0, 0)  # PTRACE_SEIZE: attaches without stopping
    finally:
        reap(pid)


def p_ptrace_pid1():
    return sc("ptrace", 0x4206, 1, 0, 0)  # PTRACE_SEIZE of the sandbox init


def p_process_vm_readv():
    pid = sleeper()
    try:
        buf = ctypes.create_string_buffer(8)
        local = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 8)
        remote = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 8)
        return sc("process_vm_readv", pid, local, 1, remote, 1, 0)
    finally:
        reap(pid)


def p_setns(pid, kind):
    def probe():
        fd = os.open("/proc/%s/ns/%s" % (pid, kind), os.O_RDONLY)
        return sc("setns", fd, 0)
    return probe


def private_mount_ns():
    # Keeps a successful mount or pivot_root away from the caller's view; fails silently when
    # unshare is refused (the probe then reports the mount call's own verdict).
    try:
        sc("unshare", CLONE_NEWNS)
    except OSError:
        pass


def p_mount_tmpfs():
    private_mount_ns()
    r = libc.mount(b"none", SCRATCH.encode(), b"tmpfs", 0, None)
    if r < 0:
        raise OSError(ctypes.get_errno(), "mount")
    return 0


def p_clone_newuser():
    r = sc("clone", CLONE_NEWUSER | signal.SIGCHLD, 0, 0, 0, 0)
    if r == 0:
        os._exit(0)
    os.waitpid(r, 0)
    return 0


def p_clone3_newuser():
    args = struct.pack("=11Q", CLONE_NEWUSER, 0, 0, 0, signal.SIGCHLD, 0, 0, 0, 0, 0, 0)
    buf = ctypes.create_string_buffer(args, len(args))
    r = sc("clone3", buf, len(args))
    if r == 0:
        os._exit(0)
    os.waitpid(r, 0)
    return 0


def p_io_uring():
    params = ctypes.create_string_buffer(120)
    return closing(sc("io_uring_setup", 1, params))


def p_bpf():
    # BPF_MAP_CREATE of a one-entry array map.
    attr = ctypes.create_string_buffer(struct.pack("=IIII", 2, 4, 4, 1), 128)
    return closing(sc("bpf", 0, attr, 128))


def p_perf_event_open():
    # PERF_TYPE_SOFTWARE / PERF_COUNT_SW_CPU_CLOCK on ourselves, any cpu.
    attr = ctypes.create_string_buffer(struct.pack("=IIQ", 1, 128, 0), 128)
    return closing(sc("perf_event_open", attr, 0, -1, -1, 0))


def p_userfaultfd(flags):
    return lambda: closing(sc("userfaultfd", flags))


def p_add_key():
    return sc("add_key", b"user", b"airlock-probe", b"x", 1, -2)  # KEY_SPEC_PROCESS_KEYRING


def p_keyctl():
    return sc("keyctl", 0, -3, 0)  # KEYCTL_GET_KEYRING_ID of the session keyring


def p_open_by_handle_at():
    handle = ctypes.create_string_buffer(struct.pack("=Ii", 128, 0), 8 + 128)
    mount_id = ctypes.c_int()
    sc("name_to_handle_at", AT_FDCWD, b"/usr/bin", handle, ctypes.byref(mount_id), 0)
    mfd = os.open("/usr", os.O_RDONLY | os.O_DIRECTORY)
    return closing(sc("open_by_handle_at", mfd, handle, os.O_RDONLY))


def p_kexec_load():
    return sc("kexec_load", 0, 0, 0, 0xDEAD0000)  # invalid flags: EINVAL past the cap check


def p_kexec_file_load():
    return sc("kexec_file_load", -1, -1, 0, 0, 0xDEAD0000)


def p_reboot():
    return sc("reboot", 0xDEADBEEF, 0, 0, 0)  # bad magic: EINVAL past the cap check


def p_init_module():
    return sc("init_module", 0, 0, b"")


def p_finit_module():
    return sc("finit_module", -1, b"", 0)


def p_delete_module():
    return sc("delete_module", b"airlock_no_such_module", os.O_NONBLOCK)


def p_mknod():
    path = os.path.join(SCRATCH, "airlock-probe-node-%d" % os.getpid())
    os.mknod(path, 0o600 | 0o020000, os.makedev(1, 3))
    os.unlink(path)
    return 0


def p_chroot():
    return sc("chroot", SCRATCH.encode())


def p_pivot_root():
    private_mount_ns()
    return sc("pivot_root", SCRATCH.encode(), SCRATCH.encode())


def p_fsopen():
    return closing(sc("fsopen", b"tmpfs", 1))


def p_open_tree():
    return closing(sc("open_tree", AT_FDCWD, b"/", 1 | 0o2000000 | 0x8000))  # CLONE|CLOEXEC|AT_RECURSIVE


def p_unshare(flags):
    return lambda: sc("unshare", flags)


def p_socket(family, kind, proto):
    return lambda: closing(socket.socket(family, kind, proto).detach())


def p_open(path, flags):
    return lambda: closing(os.open(path, flags))


def p_i386_getpid():
    # mov eax, 20 (i386 getpid); int 0x80; ret -- the 32-bit entry point.
    code = b"\xb8\x14\x00\x00\x00\xcd\x80\xc3"
    m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(code)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    r = ctypes.CFUNCTYPE(ctypes.c_int)(addr)()
    if r < 0:
        raise OSError(-r, "int 0x80")
    return r


def p_x32_getpid():
    r = libc.syscall(ctypes.c_long(39 | 0x40000000))
    if r < 0:
        raise OSError(ctypes.get_errno(), "x32 getpid")
    return r


PROBES = {
    "unshare_user": p_unshare(CLONE_NEWUSER),
    "unshare_mount": p_unshare(CLONE_NEWNS),
    "unshare_net": p_unshare(CLONE_NEWNET),
    "clone_newuser": p_clone_newuser,
    "clone3_newuser": p_clone3_newuser,
    "mount_tmpfs": p_mount_tmpfs,
    "fsopen": p_fsopen,
    "open_tree": p_open_tree,
    "pivot_root": p_pivot_root,
    "chroot": p_chroot,
    "ptrace_child": p_ptrace_child,
    "ptrace_pid1": p_ptrace_pid1,
    "process_vm_readv": p_process_vm_readv,
    "io_uring_setup": p_io_uring,
    "bpf": p_bpf,
    "perf_event_open": p_perf_event_open,
    "userfaultfd": p_userfaultfd(0o2000000),
    "userfaultfd_user_mode": p_userfaultfd(0o2000000 | 1),
    "add_key": p_add_key,
    "keyctl": p_keyctl,
    "open_by_handle_at": p_open_by_handle_at,
    "kexec_load": p_kexec_load,
    "kexec_file_load": p_kexec_file_load,
    "reboot": p_reboot,
    "init_module": p_init_module,
    "finit_module": p_finit_module,
    "delete_module": p_delete_module,
    "mknod_char": p_mknod,
    "socket_packet": p_socket(17, socket.SOCK_RAW, 0x0300),  # AF_PACKET, ETH_P_ALL
    "socket_raw_inet": p_socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
    "socket_raw_inet6": p_socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6),
    "socket_netlink_route": p_socket(16, socket.SOCK_RAW, 0),
    "socket_netlink_audit": p_socket(16, socket.SOCK_RAW, 9),
    "open_dev_mem": p_open("/dev/mem", os.O_RDONLY),
    "open_dev_kmem": p_open("/dev/kmem", os.O_RDONLY),
    "open_dev_kvm": p_open("/dev/kvm", os.O_RDWR),
    "open_dev_fuse": p_open("/dev/fuse", os.O_RDWR),
    "open_dev_port": p_open("/dev/port", os.O_RDONLY),
    "i386_getpid": p_i386_getpid,
    "x32_getpid": p_x32_getpid,
}
for ns in ("mnt", "pid", "net", "user", "uts", "ipc", "cgroup"):
    PROBES["setns_pid1_" + ns] = p_setns(1, ns)
    PROBES["setns_self_" + ns] = p_setns("self", ns)


def run_one(name):
    if name.startswith("open_wr:"):
        fn = p_open(name[len("open_wr:"):], os.O_WRONLY)  # opened for writing, nothing written
    elif name.startswith("open_rd:"):
        fn = p_open(name[len("open_rd:"):], os.O_RDONLY)
    elif name in PROBES:
        fn = PROBES[name]
    else:
        return "SKIP:unknown probe"
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            fn()
            out = "OK"
        except OSError as e:
            out = errno.errorcode.get(e.errno, str(e.errno))
        except Exception as e:  # a bug in the probe, not a verdict
            out = "SKIP:" + type(e).__name__ + ":" + str(e)
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    data = b""
    deadline = time.monotonic() + 10
    while True:
        ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            data = b"TIMEOUT"
            break
        chunk = os.read(r, 4096)
        if not chunk:
            break
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if data == b"TIMEOUT":
        return "TIMEOUT"
    if os.WIFSIGNALED(status):
        return "SIG" + signal.Signals(os.WTERMSIG(status)).name[3:]
    return data.decode() or "SKIP:no report"


def main(argv):
    global SCRATCH
    if len(argv) >= 2 and argv[0] == "--scratch":
        SCRATCH = argv[1]
        argv = argv[2:]
    names = list(PROBES) if argv == ["all"] else argv
    print(json.dumps({n: run_one(n) for n in names}, sort_keys=True))


main(sys.argv[1:])
