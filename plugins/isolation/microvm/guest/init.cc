// airlock-vm-init: PID 1 of a microVM until it execs airlock-agent, which then is PID 1.
//
// The initramfs holds this program, the agent and the kernel modules the guest needs (virtio,
// erofs), with their load order in /lib/modules/order. The host's plugin passes everything
// else on the kernel command line (docs/microvm.md):
//   airlock.mounts=/usr        read-only images on vdb, vdc, ... and where they go (vda is /)
//   airlock.home=BYTES airlock.tmp=BYTES airlock.user=UID:GID
//   airlock.image   vdb is filesystem.image, beneath the root on vda (an overlay); images from vdc
//   airlock.workspace  the last disk is a persistent workspace (ext4) for /home/user
//   airlock.shares=N   N virtio-9p devices, share0..; the go line says where each goes
//   airlock.net     configure eth0 on QEMU's user-mode network (network.mode allowlist, open)
//   airlock.debug   report each step on the status port
//   airlock.marker  print a marker on the console and power off (the bare-boot floor)
// Steps: modules, the root (erofs on vda) with its images, tmpfs /home/user and /tmp, a minimal
// /dev, /proc, loopback (and eth0), the exec watch. Then the pause point: everything so far is the
// same for every sandbox of one boot configuration, so the host may snapshot the guest here and
// restore that snapshot for later sandboxes (docs/microvm.md, "Snapshots"). /init says "paused" on
// the status port and waits for the host's go line with what is each sandbox's own: the time, fresh
// entropy, the hostname and where the operator's shared directories go (mounted then). Then it
// opens the agent's virtio-serial port as fd 3 and execs the
// agent. A step that fails is reported on the status port (or the console before it exists) and the
// VM powers off, so the host sees the reason instead of a timeout.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/random.h>
#include <net/if.h>
#include <net/route.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "exec_watch.h"

namespace {

constexpr const char kAgentPort[] = "airlock.agent";
constexpr const char kStatusPort[] = "airlock.status";
constexpr const char kEventsPort[] = "airlock.events";
constexpr const char kNewRoot[] = "/newroot";
int status_fd = -1;  // the status port once open; the console before
bool debug = false;  // airlock.debug: say each step (docs/microvm.md, debugging a guest)

void say(const std::string& line) {
  std::string l = "airlock-vm-init: " + line + "\n";
  int fd = status_fd >= 0 ? status_fd : ::open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd >= 0) {
    (void)!::write(fd, l.data(), l.size());
    if (fd != status_fd) ::close(fd);
  }
}

[[noreturn]] void die(const std::string& what) {
  say("error: " + what + (errno != 0 ? std::string(": ") + std::strerror(errno) : ""));
  ::sync();
  // With panic=-1, reboot=t and QEMU's -no-reboot, a reboot ends QEMU.
  ::reboot(RB_AUTOBOOT);
  std::_Exit(1);
}

std::string readFile(const char* path) {
  std::string out;
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

std::string cmdline;
bool hasParam(const std::string& key) {
  size_t at = 0;
  while ((at = cmdline.find(key, at)) != std::string::npos) {
    const bool start = at == 0 || cmdline[at - 1] == ' ';
    const char end = at + key.size() < cmdline.size() ? cmdline[at + key.size()] : ' ';
    if (start && (end == ' ' || end == '\n' || end == '=')) return true;
    at += key.size();
  }
  return false;
}

std::string param(const std::string& key, const std::string& fallback = "") {
  const std::string k = key + "=";
  size_t at = 0;
  while ((at = cmdline.find(k, at)) != std::string::npos) {
    if (at == 0 || cmdline[at - 1] == ' ') {
      size_t from = at + k.size();
      return cmdline.substr(from, cmdline.find_first_of(" \n", from) - from);
    }
    at += k.size();
  }
  return fallback;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t from = 0;
  while (from <= s.size() && !s.empty()) {
    size_t to = s.find(sep, from);
    if (to == std::string::npos) to = s.size();
    if (to > from) out.push_back(s.substr(from, to - from));
    from = to + 1;
  }
  return out;
}

void step(const std::string& what) {
  if (debug) say(what);
}

void mountOrDie(const char* src, const std::string& target, const char* type, unsigned long flags,
                const std::string& data = "") {
  step(std::string("mount ") + (type != nullptr ? type : "(flags)") + " on " + target);
  if (::mount(src, target.c_str(), type, flags, data.empty() ? nullptr : data.c_str()) != 0)
    die(std::string("mount ") + type + " on " + target);
}

// /lib/modules/order: "<name>" or "<name> <flag>", dependencies first; a module with a flag is
// loaded only when the command line has it.
void loadModules() {
  for (const auto& line : split(readFile("/lib/modules/order"), '\n')) {
    const std::vector<std::string> f = split(line, ' ');
    if (f.empty() || (f.size() > 1 && !hasParam(f[1]))) continue;
    const std::string& name = f[0];
    const std::string path = "/lib/modules/" + name + ".ko";
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) die("open " + path);
    if (::syscall(SYS_finit_module, fd, "", 0) != 0 && errno != EEXIST) die("load module " + name);
    ::close(fd);
  }
}

// The /dev node of the virtio-serial port the host named `name`; "" until the port shows up.
std::string portDevice(const char* name) {
  DIR* d = ::opendir("/sys/class/virtio-ports");
  if (d == nullptr) return "";
  std::string found;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string port = e->d_name;
    std::string n = readFile(("/sys/class/virtio-ports/" + port + "/name").c_str());
    while (!n.empty() && n.back() == '\n') n.pop_back();
    if (n == name) found = "/dev/" + port;
  }
  ::closedir(d);
  return found;
}

// The port the host named `name`, opened with `flags`. Ports appear when the virtio_console
// driver has probed them and devtmpfs made the node.
int openPort(const char* name, int flags) {
  for (int i = 0; i < 2000; ++i) {  // 10 s
    std::string dev = portDevice(name);
    if (!dev.empty()) {
      int fd = ::open(dev.c_str(), flags);
      if (fd >= 0) return fd;
    }
    ::usleep(5000);
  }
  errno = ENODEV;
  die(std::string("no virtio-serial port named ") + name);
}

// `fd` moved out of the way of fd 3, which the agent's channel takes.
int above3(int fd, const std::string& what) {
  int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  if (high < 0) die("fcntl " + what);
  ::close(fd);
  return high;
}

int openPortAbove3(const char* name, int flags) { return above3(openPort(name, flags), name); }

void makeDev(const std::string& dev) {
  mountOrDie("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755");
  struct Node {
    const char* name;
    unsigned major, minor;
  };
  for (const Node& n : {Node{"null", 1, 3}, Node{"zero", 1, 5}, Node{"full", 1, 7},
                        Node{"random", 1, 8}, Node{"urandom", 1, 9}, Node{"tty", 5, 0}}) {
    const std::string path = dev + "/" + n.name;
    if (::mknod(path.c_str(), S_IFCHR | 0666, makedev(n.major, n.minor)) != 0) die("mknod " + path);
    ::chmod(path.c_str(), 0666);  // past the umask
  }
  for (const char* d : {"/pts", "/shm"})
    if (::mkdir((dev + d).c_str(), 0755) != 0) die("mkdir " + dev + d);
  mountOrDie("devpts", dev + "/pts", "devpts", MS_NOSUID | MS_NOEXEC,
             "newinstance,ptmxmode=0666,mode=0620");
  mountOrDie("tmpfs", dev + "/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777");
  const std::pair<const char*, const char*> links[] = {{"pts/ptmx", "/ptmx"},
                                                       {"/proc/self/fd", "/fd"},
                                                       {"/proc/self/fd/0", "/stdin"},
                                                       {"/proc/self/fd/1", "/stdout"},
                                                       {"/proc/self/fd/2", "/stderr"}};
  for (const auto& [to, at] : links)
    if (::symlink(to, (dev + at).c_str()) != 0) die("symlink " + dev + at);
  mountOrDie(nullptr, dev, nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC);
}

void loopbackUp() {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) die("socket");
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(s, SIOCGIFFLAGS, &ifr) != 0) die("SIOCGIFFLAGS lo");
  ifr.ifr_flags |= IFF_UP;
  if (::ioctl(s, SIOCSIFFLAGS, &ifr) != 0) die("SIOCSIFFLAGS lo");
  ::close(s);
}

// airlock.net: eth0 is QEMU's user-mode network (slirp), whose fixed plan is 10.0.2.0/24 and
// fd00:a1::/64 with the gateway at .2 and ::2; QEMU turns the guest's connections into its own
// sockets in the sandbox's network namespace, where the host's policy applies to them
// (docs/microvm.md).
void ethernetUp() {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) die("socket");
  auto addr = [](const char* text) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, text, &a.sin_addr);
    return a;
  };
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "eth0", IFNAMSIZ - 1);
  sockaddr_in a = addr("10.0.2.15");
  std::memcpy(&ifr.ifr_addr, &a, sizeof a);
  if (::ioctl(s, SIOCSIFADDR, &ifr) != 0) die("SIOCSIFADDR eth0");
  a = addr("255.255.255.0");
  std::memcpy(&ifr.ifr_netmask, &a, sizeof a);
  if (::ioctl(s, SIOCSIFNETMASK, &ifr) != 0) die("SIOCSIFNETMASK eth0");
  if (::ioctl(s, SIOCGIFFLAGS, &ifr) != 0) die("SIOCGIFFLAGS eth0");
  ifr.ifr_flags |= IFF_UP;
  if (::ioctl(s, SIOCSIFFLAGS, &ifr) != 0) die("SIOCSIFFLAGS eth0");
  rtentry rt{};
  a = addr("0.0.0.0");
  std::memcpy(&rt.rt_dst, &a, sizeof a);
  std::memcpy(&rt.rt_genmask, &a, sizeof a);
  a = addr("10.0.2.2");
  std::memcpy(&rt.rt_gateway, &a, sizeof a);
  rt.rt_flags = RTF_UP | RTF_GATEWAY;
  char dev[] = "eth0";
  rt.rt_dev = dev;
  if (::ioctl(s, SIOCADDRT, &rt) != 0) die("SIOCADDRT default via 10.0.2.2");
  ::close(s);

  // IPv6: fd00:a1::15/64 via fd00:a1::2, without duplicate address detection (nothing else is
  // on this link) or router advertisements, so it is usable at once.
  for (const char* knob : {"accept_dad", "accept_ra", "autoconf"}) {
    const std::string path = std::string("/proc/sys/net/ipv6/conf/eth0/") + knob;
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, "0", 1) != 1) die("write " + path);
    ::close(fd);
  }
  int s6 = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s6 < 0) die("socket(AF_INET6)");
  struct {
    in6_addr addr;
    uint32_t prefixlen;
    int ifindex;
  } ifr6{};  // the kernel's struct in6_ifreq
  const int eth0 = static_cast<int>(::if_nametoindex("eth0"));
  ::inet_pton(AF_INET6, "fd00:a1::15", &ifr6.addr);
  ifr6.prefixlen = 64;
  ifr6.ifindex = eth0;
  if (::ioctl(s6, SIOCSIFADDR, &ifr6) != 0) die("SIOCSIFADDR eth0 fd00:a1::15/64");
  in6_rtmsg rt6{};
  ::inet_pton(AF_INET6, "fd00:a1::2", &rt6.rtmsg_gateway);
  rt6.rtmsg_flags = RTF_UP | RTF_GATEWAY;
  rt6.rtmsg_metric = 1;
  rt6.rtmsg_ifindex = eth0;
  if (::ioctl(s6, SIOCADDRT, &rt6) != 0) die("SIOCADDRT default via fd00:a1::2");
  ::close(s6);
}

// The pause point. The host answers "paused" with
//   go <unix seconds> <nanoseconds> <hostname> <64 hex digits of entropy> <reattach grace ms>\n
// A guest restored from a snapshot shares the snapshot's clock and random state with every
// other guest restored from it: the time is set, and the entropy is mixed into the kernel's
// pool and the CRNG reseeded at once, before the agent or any program of the sandbox runs.
// An operator's directory on a 9p device (shareN, in order): where it goes, and whether the
// guest may write.
struct Share {
  std::string at;
  bool writable = false;
};

struct Go {
  std::vector<Share> shares;
  std::string reattach_grace_ms;  // digits: how long the agent waits for a supervisor that died
};

// Waits for the host's go line, "go SEC NSEC HOSTNAME SEED GRACE [SHARE...]": each share is 'r'
// or 'w' and its place in hex. Sets the clock, entropy and hostname.
Go awaitGo() {
  say("paused");
  std::string line;
  char c;
  // 16 shares of a 4 KiB path each, in hex, and the rest.
  while (line.size() < 160 * 1024) {
    ssize_t n = ::read(status_fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) die("the status port closed before the host's go line");
    if (c == '\n') break;
    line.push_back(c);
  }
  const std::vector<std::string> f = split(line, ' ');
  errno = 0;
  if (f.size() < 6 || f[0] != "go" || f[4].size() != 64 || f[5].empty() || f[5].size() > 8 ||
      f[5].find_first_not_of("0123456789") != std::string::npos ||
      f[4].find_first_not_of("0123456789abcdef") != std::string::npos || f[3].empty() ||
      f[3].size() > 63 ||
      f[3].find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") !=
          std::string::npos)
    die("bad go line from the host: " + line.substr(0, 120));
  timespec now{};
  now.tv_sec = static_cast<time_t>(std::strtoll(f[1].c_str(), nullptr, 10));
  now.tv_nsec = std::strtol(f[2].c_str(), nullptr, 10);
  if (now.tv_nsec < 0 || now.tv_nsec >= 1000000000L || ::clock_settime(CLOCK_REALTIME, &now) != 0)
    die("clock_settime");
  constexpr size_t kSeedBytes = 32;
  alignas(rand_pool_info) unsigned char seed[sizeof(rand_pool_info) + kSeedBytes] = {};
  auto* pool = reinterpret_cast<rand_pool_info*>(seed);
  pool->entropy_count = kSeedBytes * 8;
  pool->buf_size = kSeedBytes;
  for (size_t i = 0; i < kSeedBytes; ++i)
    seed[sizeof(rand_pool_info) + i] =
        static_cast<unsigned char>(std::stoul(f[4].substr(2 * i, 2), nullptr, 16));
  int random = ::open("/dev/urandom", O_RDWR | O_CLOEXEC);
  if (random < 0) die("open /dev/urandom");
  if (::ioctl(random, RNDADDENTROPY, pool) != 0) die("RNDADDENTROPY");
  if (::ioctl(random, RNDRESEEDCRNG) != 0) die("RNDRESEEDCRNG");
  ::close(random);
  if (::sethostname(f[3].data(), f[3].size()) != 0) die("sethostname");
  std::vector<Share> shares;
  for (size_t i = 6; i < f.size(); ++i) {
    const std::string& hex = f[i];
    if (hex.size() < 3 || hex.size() % 2 != 1 || (hex[0] != 'r' && hex[0] != 'w') ||
        hex.find_first_not_of("0123456789abcdef", 1) != std::string::npos)
      die("bad share in the go line: " + hex.substr(0, 120));
    Share s{.at = "", .writable = hex[0] == 'w'};
    for (size_t j = 1; j < hex.size(); j += 2)
      s.at.push_back(static_cast<char>(std::stoul(hex.substr(j, 2), nullptr, 16)));
    if (s.at[0] != '/' || s.at.find('\0') != std::string::npos) die("bad share path " + s.at);
    shares.push_back(std::move(s));
  }
  if (shares.size() != std::strtoul(param("airlock.shares", "0").c_str(), nullptr, 10))
    die("the go line names " + std::to_string(shares.size()) + " shares, the command line " +
        param("airlock.shares", "0"));
  return {std::move(shares), f[5]};
}

// mkdir -p, as root, for a share's mount point.
void makeDirs(const std::string& path) {
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/') continue;
    const std::string prefix = path.substr(0, at);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) die("mkdir " + prefix);
  }
}

// The shares, after the go line (a 9p mount blocks QEMU's migration, so none exists when the
// host snapshots the guest): a small tmpfs on /mnt holds their mount points, and each device is
// mounted where the host said, parents before children, never with set-id or device files.
void mountShares(std::vector<std::pair<size_t, Share>> shares) {
  if (shares.empty()) return;
  mountOrDie("tmpfs", "/mnt", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
             "size=1048576,nr_inodes=1024,mode=0755");
  std::sort(shares.begin(), shares.end(),
            [](const auto& a, const auto& b) { return a.second.at < b.second.at; });
  for (const auto& [device, share] : shares) {
    makeDirs(share.at);
    // msize: 9p's largest message, at virtio's limit in this kernel (125 pages). access=user: each
    // guest user attaches as itself, so the server records who created what.
    mountOrDie(("share" + std::to_string(device)).c_str(), share.at, "9p",
               MS_NOSUID | MS_NODEV | (share.writable ? 0 : MS_RDONLY),
               "trans=virtio,version=9p2000.L,msize=512000,access=user");
  }
}

}  // namespace

int main() {
  ::umask(022);
  ::mkdir("/dev", 0755);
  ::mkdir("/proc", 0555);
  ::mkdir("/sys", 0555);
  if (::mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755") != 0 && errno != EBUSY)
    die("mount devtmpfs on /dev");
  // The kernel starts /init with no fds when the initramfs has no /dev/console: hold 0-2, so
  // the ports opened below never land on them and get replaced by the stdio set up last.
  for (int fd = ::open("/dev/null", O_RDWR); fd >= 0; fd = ::open("/dev/null", O_RDWR)) {
    if (fd > 2) {
      ::close(fd);
      break;
    }
  }
  mountOrDie("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC);
  mountOrDie("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC);
  cmdline = readFile("/proc/cmdline");
  debug = hasParam("airlock.debug");

  if (hasParam("airlock.marker")) {
    // The floor B7 compares against: the same kernel and initramfs, to the first instruction
    // of PID 1.
    status_fd = -1;
    say("marker");
    ::reboot(RB_POWER_OFF);
    return 0;
  }

  loadModules();
  status_fd = openPortAbove3(kStatusPort, O_RDWR | O_NOCTTY | O_CLOEXEC);

  // The root: the system view's image on vda (with airlock.image, an overlay of it over the
  // operator's image on vdb), then each further image where the host said.
  if (::mkdir(kNewRoot, 0755) != 0 && errno != EEXIST) die("mkdir /newroot");
  const bool image = hasParam("airlock.image");
  if (image) {
    for (const char* d : {"/layers", "/layers/root", "/layers/image"})
      if (::mkdir(d, 0755) != 0 && errno != EEXIST) die(std::string("mkdir ") + d);
    mountOrDie("/dev/vda", "/layers/root", "erofs", MS_RDONLY | MS_NODEV | MS_NOSUID);
    mountOrDie("/dev/vdb", "/layers/image", "erofs", MS_RDONLY | MS_NODEV | MS_NOSUID);
    mountOrDie("overlay", kNewRoot, "overlay", MS_RDONLY | MS_NODEV | MS_NOSUID,
               "lowerdir=/layers/root:/layers/image");
  } else {
    mountOrDie("/dev/vda", kNewRoot, "erofs", MS_RDONLY | MS_NODEV | MS_NOSUID);
  }
  const std::vector<std::string> mounts = split(param("airlock.mounts"), ',');
  for (size_t i = 0; i < mounts.size(); ++i) {
    if (mounts[i].empty() || mounts[i][0] != '/' || i >= 23) die("bad airlock.mounts");
    const std::string disk = std::string("/dev/vd") + static_cast<char>((image ? 'c' : 'b') + i);
    mountOrDie(disk.c_str(), kNewRoot + mounts[i], "erofs", MS_RDONLY | MS_NODEV | MS_NOSUID);
  }
  const std::string root = kNewRoot;
  const std::string user = param("airlock.user", "1000:1000");
  // One inode per 4 KiB of the size: a fill with empty files ends in ENOSPC at once instead of
  // at the guest's default (half its RAM in pages), which an emulated guest takes minutes to
  // reach.
  auto sized = [](const std::string& bytes) {
    const unsigned long long n = std::strtoull(bytes.c_str(), nullptr, 10);
    return "size=" + std::to_string(n) +
           ",nr_inodes=" + std::to_string(std::max(n / 4096, 1024ull));
  };
  if (hasParam("airlock.workspace")) {
    // A persistent workspace: the disk after the images, its files already the user's.
    const std::string disk =
        std::string("/dev/vd") + static_cast<char>((image ? 'c' : 'b') + mounts.size());
    mountOrDie(disk.c_str(), root + "/home/user", "ext4", MS_NOSUID | MS_NODEV);
  } else {
    mountOrDie("tmpfs", root + "/home/user", "tmpfs", MS_NOSUID | MS_NODEV,
               sized(param("airlock.home", "268435456")) + ",mode=0755,uid=" +
                   user.substr(0, user.find(':')) + ",gid=" + user.substr(user.find(':') + 1));
  }
  mountOrDie("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
             sized(param("airlock.tmp", "268435456")) + ",mode=1777");
  makeDev(root + "/dev");
  mountOrDie("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC);

  step("loopback");
  loopbackUp();
  if (hasParam("airlock.net")) {
    step("eth0");
    ethernetUp();
  }

  // The agent's port is found now (its sysfs is out of sight after the switch) but opened only
  // after the go line: until the guest opens it, QEMU leaves what the supervisor sent (the
  // sandbox's Configure, sent ahead) in the host's socket, so a snapshot never holds one
  // sandbox's frames for another. Its binary stays reachable through an fd too.
  int events = openPortAbove3(kEventsPort, O_RDWR | O_NOCTTY | O_CLOEXEC);
  step("agent port");
  int agent_port = openPortAbove3(kAgentPort, O_PATH | O_CLOEXEC);
  int agent = ::open("/airlock-agent", O_PATH | O_CLOEXEC);
  if (agent < 0) die("open /airlock-agent");
  agent = above3(agent, "/airlock-agent");

  step("switch root and exec the agent");
  if (::chdir(kNewRoot) != 0) die("chdir /newroot");
  mountOrDie(".", "/", nullptr, MS_MOVE);
  if (::chroot(".") != 0) die("chroot");
  if (::chdir("/") != 0) die("chdir /");

  // The exec audit, from the new root (where the paths it checks are) and before the agent.
  step("exec watch");
  if (!airlock::isolation::microvm::startExecWatch(events)) die("process events connector");
  ::close(events);

  Go go = awaitGo();
  std::vector<std::pair<size_t, Share>> shares;
  for (auto& s : go.shares) shares.emplace_back(shares.size(), std::move(s));
  mountShares(std::move(shares));

  // The agent's channel becomes fd 3.
  const std::string reopen = "/proc/self/fd/" + std::to_string(agent_port);
  int channel = ::open(reopen.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (channel < 0) die("open the agent's port");
  ::close(agent_port);
  if (channel != 3) {
    if (::dup3(channel, 3, 0) != 3) die("dup3 channel");
    ::close(channel);
  } else if (::fcntl(3, F_SETFD, 0) != 0) {
    die("fcntl channel");
  }

  // stderr is the status port until the agent's ready line; stdin and stdout are nothing.
  int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0) die("open /dev/null");
  if (::dup3(null, 0, 0) != 0 || ::dup3(null, 1, 0) != 1 || ::dup3(status_fd, 2, 0) != 2)
    die("dup3 stdio");
  // When the supervisor dies, the agent keeps the port: the next one connects QEMU's end of it
  // to a new socket (QMP chardev-change), which the guest sees as the host reopening the port.
  const char* argv[] = {"airlock-agent",
                        "--channel-fd",
                        "3",
                        "--announce-ready",
                        "--own-kernel",
                        "--reattach-grace-ms",
                        go.reattach_grace_ms.c_str(),
                        "--reattach-in-place",
                        nullptr};
  const char* envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin", nullptr};
  ::syscall(SYS_execveat, agent, "", argv, envp, AT_EMPTY_PATH);
  die("exec airlock-agent");
}
