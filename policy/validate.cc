// Cross-field checks of profiles, [server] and [tenants.*]. Each message names the key and says
// what is allowed.
#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <set>

#include "airlock/policy/image_name.h"
#include "airlock/policy/keys.h"
#include "airlock/policy/net_rule.h"
#include "airlock/policy/policy.h"
#include "check.h"
#include "schema.h"

namespace airlock::policy {
namespace {

// Linux capabilities by number (include/uapi/linux/capability.h, 0 .. CAP_LAST_CAP).
constexpr std::array<std::string_view, 41> kCapabilities = {
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
};

// Variables the dynamic loader acts on: they would inject host-chosen code into every
// interpreter the sandbox starts.
constexpr std::array<std::string_view, 3> kRefusedEnv = {"LD_PRELOAD", "LD_LIBRARY_PATH",
                                                         "LD_AUDIT"};

constexpr uint64_t kMaxMiB = uint64_t{1} << 24;  // 16 TiB: MiB → bytes never overflows
constexpr uint64_t kMaxLifetimeS = 365 * 86400;  // a year; ms timestamps stay far from overflow
constexpr uint64_t kMaxPoolSize = 1000;
constexpr size_t kMaxPreload = 64;
constexpr uint64_t kMaxSandboxes = 100000;
constexpr size_t kMaxSocketPath = 107;  // sun_path holds 108 bytes with the final NUL

using detail::Problem;
using detail::q;
using detail::range;
using Check = std::optional<Problem>;

bool allChars(std::string_view s, auto pred) {
  return std::ranges::all_of(s, [&](char c) { return pred(static_cast<unsigned char>(c)); });
}

bool isLowerNameChar(unsigned char c) {
  return std::islower(c) || std::isdigit(c) || c == '_' || c == '-' || c == '.';
}

bool isSyscallChar(unsigned char c) { return std::islower(c) || std::isdigit(c) || c == '_'; }

std::string suggestCapability(std::string_view name) {
  std::string norm;
  for (char c : name) norm += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!norm.starts_with("CAP_")) norm = "CAP_" + norm;
  std::string_view best;
  size_t best_d = 3;
  for (std::string_view cap : kCapabilities) {
    if (size_t d = detail::editDistance(norm, cap); d < best_d) {
      best_d = d;
      best = cap;
    }
  }
  return best.empty() ? std::string() : " (did you mean " + q(best) + "?)";
}

// An absolute path with no ".." component and no NUL byte.
std::optional<std::string> pathProblem(std::string_view path) {
  if (path.empty() || path.front() != '/') return "must be an absolute path";
  if (path.find('\0') != std::string_view::npos) return "contains a NUL byte";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (path.substr(start, end - start) == "..") return "must not contain '..'";
    start = end + 1;
  }
  if (path.find_first_not_of('/') == std::string_view::npos) {
    return "must not be '/' (that is the whole host)";
  }
  return std::nullopt;
}

bool validHostname(std::string_view h) {
  if (h.empty() || h.size() > 64) return false;
  size_t start = 0;
  while (start <= h.size()) {
    size_t end = h.find('.', start);
    if (end == std::string_view::npos) end = h.size();
    std::string_view label = h.substr(start, end - start);
    if (label.empty() || label.front() == '-' || label.back() == '-') return false;
    if (!allChars(label, [](unsigned char c) { return std::isalnum(c) || c == '-'; })) return false;
    start = end + 1;
  }
  return true;
}

Check checkIdentity(const Profile& p) {
  if (p.isolation.empty() || p.isolation.size() > 128 || !allChars(p.isolation, isLowerNameChar)) {
    return Problem{"isolation", "isolation = " + q(p.isolation) +
                                    ": must be a plugin name of lowercase letters, digits, '.', "
                                    "'-' and '_' (e.g. 'namespaces')"};
  }
  for (size_t i = 0; i < p.isolation_choices.size(); ++i) {
    const std::string& c = p.isolation_choices[i];
    if (c.empty() || c.size() > 128 || !allChars(c, isLowerNameChar))
      return Problem{"isolation_choices",
                     "isolation_choices[" + std::to_string(i) + "] = " + q(c) +
                         ": must be a plugin name of lowercase letters, digits, '.', '-' and '_'"};
    for (size_t j = 0; j < i; ++j)
      if (p.isolation_choices[j] == c)
        return Problem{"isolation_choices",
                       "isolation_choices[" + std::to_string(i) + "] = " + q(c) + ": listed twice"};
  }
  if (p.user != "user" && p.user != "root") {
    return Problem{"user", "user = " + q(p.user) + ": must be 'user' or 'root'"};
  }
  if (!p.capabilities.empty() && p.user != "root") {
    return Problem{"capabilities",
                   "capabilities: kept only when user = 'root' (this profile has "
                   "user = " +
                       q(p.user) + ")"};
  }
  std::set<std::string_view> seen;
  for (size_t i = 0; i < p.capabilities.size(); ++i) {
    const std::string& cap = p.capabilities[i];
    const std::string key = "capabilities[" + std::to_string(i) + "]";
    if (capabilityNumber(cap) < 0) {
      return Problem{key,
                     key + " = " + q(cap) + ": not a Linux capability" + suggestCapability(cap)};
    }
    if (!seen.insert(cap).second) return Problem{key, key + " = " + q(cap) + ": listed twice"};
  }
  if (!validHostname(p.hostname)) {
    return Problem{"hostname", "hostname = " + q(p.hostname) +
                                   ": must be 1-64 letters, digits, '-' and '.', with no label "
                                   "starting or ending in '-'"};
  }
  if (p.languages.empty()) {
    return Problem{"languages", "languages = []: allow at least one language"};
  }
  seen.clear();
  for (size_t i = 0; i < p.languages.size(); ++i) {
    const std::string& lang = p.languages[i];
    const std::string key = "languages[" + std::to_string(i) + "]";
    if (lang.empty() || !allChars(lang, isLowerNameChar)) {
      return Problem{key, key + " = " + q(lang) +
                              ": must be a language plugin name of lowercase letters, digits, "
                              "'.', '-' and '_' (e.g. 'python')"};
    }
    if (!seen.insert(lang).second) return Problem{key, key + " = " + q(lang) + ": listed twice"};
  }
  return std::nullopt;
}

Check checkEnv(const Profile& p) {
  for (const auto& [name, value] : p.env) {
    const std::string key = "env." + name;
    bool ident = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                 allChars(name, [](unsigned char c) { return std::isalnum(c) || c == '_'; });
    if (!ident) {
      return Problem{key, "env: " + q(name) +
                              " is not a variable name (letters, digits and '_', not starting "
                              "with a digit)"};
    }
    if (std::ranges::find(kRefusedEnv, name) != kRefusedEnv.end()) {
      return Problem{key, key +
                              ": refused: the dynamic loader would inject it into every "
                              "interpreter in the sandbox"};
    }
    if (value.find('\0') != std::string::npos) {
      return Problem{key, key + ": the value contains a NUL byte"};
    }
  }
  return std::nullopt;
}

Check checkLimits(const Limits& l) {
  for (Check c : {
           range("limits.timeout_s", l.timeout_s, 1, 86400),
           range("limits.memory_mb", l.memory_mb, 16, kMaxMiB),
           range("limits.pids", l.pids, 8, 4194304),
           range("limits.cpu_percent", l.cpu_percent, 1, 100 * 64),
           range("limits.file_size_mb", l.file_size_mb, 1, kMaxMiB),
           range("limits.open_files", l.open_files, 16, 1048576),
           range("limits.output_bytes", l.output_bytes, 1024, uint64_t{1} << 30),
           range("limits.workspace_mb", l.workspace_mb, 1, kMaxMiB),
           range("limits.tmp_mb", l.tmp_mb, 1, kMaxMiB),
       }) {
    if (c) return c;
  }
  // Files in the tmpfs workspace and /tmp are memory charged to the sandbox: if they could fill
  // the memory limit, a full disk would end in an OOM kill instead of ENOSPC.
  if (l.workspace_mb + l.tmp_mb >= l.memory_mb) {
    return Problem{
        "limits.workspace_mb",
        "limits.workspace_mb + limits.tmp_mb = " + std::to_string(l.workspace_mb + l.tmp_mb) +
            " MiB must be below limits.memory_mb = " + std::to_string(l.memory_mb) +
            " MiB: files in /home/user and /tmp count against the memory limit",
        "limits.memory_mb"};
  }
  return std::nullopt;
}

// "lifetime.a = 7200 must be at most lifetime.b = 3600: why"
Check notAbove(std::string_view a, uint64_t a_value, std::string_view b, uint64_t b_value,
               std::string_view why) {
  if (a_value <= b_value) return std::nullopt;
  return Problem{"lifetime." + std::string(a),
                 "lifetime." + std::string(a) + " = " + std::to_string(a_value) +
                     " must be at most lifetime." + std::string(b) + " = " +
                     std::to_string(b_value) + ": " + std::string(why),
                 "lifetime." + std::string(b)};
}

Check checkLifetime(const Lifetime& t) {
  for (Check c : {
           range("lifetime.keep_alive_s", t.keep_alive_s, 1, kMaxLifetimeS),
           range("lifetime.max_keep_alive_s", t.max_keep_alive_s, 1, kMaxLifetimeS),
           range("lifetime.lifetime_s", t.lifetime_s, 1, kMaxLifetimeS),
           range("lifetime.max_lifetime_s", t.max_lifetime_s, 1, kMaxLifetimeS),
           range("lifetime.pool_size", t.pool_size, 0, kMaxPoolSize),
           notAbove("keep_alive_s", t.keep_alive_s, "max_keep_alive_s", t.max_keep_alive_s,
                    "the default must be a value a request may ask for"),
           notAbove("lifetime_s", t.lifetime_s, "max_lifetime_s", t.max_lifetime_s,
                    "the default must be a value a request may ask for"),
           // An idle timer longer than the whole life never fires: the operator has most likely
           // swapped the two.
           notAbove("keep_alive_s", t.keep_alive_s, "lifetime_s", t.lifetime_s,
                    "a sandbox never lives past its lifetime, so it could never be idle that "
                    "long"),
           notAbove("max_keep_alive_s", t.max_keep_alive_s, "max_lifetime_s", t.max_lifetime_s,
                    "a sandbox never lives past its lifetime, so it could never be idle that "
                    "long"),
       }) {
    if (c) return c;
  }
  if (t.prestart && t.pool_size == 0)
    return Problem{"lifetime.prestart",
                   "lifetime.prestart = true needs lifetime.pool_size > 0: it pre-starts "
                   "pool_size interpreters per language"};
  if (t.fast_exit && !t.prestart)
    return Problem{"lifetime.fast_exit",
                   "lifetime.fast_exit = true needs lifetime.prestart = true: it is how a "
                   "pre-started interpreter ends its program"};
  if (t.preload.size() > kMaxPreload)
    return Problem{"lifetime.preload", "lifetime.preload: " + std::to_string(t.preload.size()) +
                                           " modules, more than the " +
                                           std::to_string(kMaxPreload) + " allowed"};
  for (size_t i = 0; i < t.preload.size(); ++i) {
    const std::string& m = t.preload[i];
    const std::string key = "lifetime.preload[" + std::to_string(i) + "]";
    // Passed to the interpreters as arguments: never an option, never empty, nothing exotic.
    bool plain = !m.empty() && m.size() <= 200 && m.front() != '-' &&
                 std::all_of(m.begin(), m.end(), [](char c) {
                   return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
                          c == '-' || c == '/' || c == '@';
                 });
    if (!plain)
      return Problem{key, key + " = " + q(m) +
                              ": a module or package name (letters, digits, _ . - / @; not "
                              "starting with '-')"};
  }
  return std::nullopt;
}

Check checkFilesystem(const Filesystem& fs) {
  if (!fs.image.empty()) {
    // An absolute path is a host directory; anything else names an image in the store.
    auto why = fs.image.front() == '/' ? pathProblem(fs.image) : imageNameProblem(fs.image);
    if (why) {
      if (fs.image.front() != '/') *why = "neither an absolute path nor an image name: " + *why;
      return Problem{"filesystem.image", "filesystem.image = " + q(fs.image) + ": " + *why};
    }
  }
  std::set<std::string_view> seen;
  for (size_t i = 0; i < fs.readonly_paths.size(); ++i) {
    const std::string& path = fs.readonly_paths[i];
    const std::string key = "filesystem.readonly_paths[" + std::to_string(i) + "]";
    if (auto why = pathProblem(path)) return Problem{key, key + " = " + q(path) + ": " + *why};
    if (!seen.insert(path).second) return Problem{key, key + " = " + q(path) + ": listed twice"};
  }
  return std::nullopt;
}

Check checkGvisor(const Gvisor& g) {
  if (auto why = pathProblem(g.runsc))
    return Problem{"gvisor.runsc", "gvisor.runsc = " + q(g.runsc) + ": " + *why};
  if (g.platform != "ptrace" && g.platform != "systrap" && g.platform != "kvm")
    return Problem{"gvisor.platform", "gvisor.platform = " + q(g.platform) +
                                          ": must be 'ptrace', 'systrap' or 'kvm' (`airlock "
                                          "doctor` says which start on this host)"};
  if (g.overlay != "none" && g.overlay != "memory" && g.overlay != "disk")
    return Problem{"gvisor.overlay",
                   "gvisor.overlay = " + q(g.overlay) + ": must be 'none', 'memory' or 'disk'"};
  for (size_t i = 0; i < g.flags.size(); ++i) {
    const std::string key = "gvisor.flags[" + std::to_string(i) + "]";
    if (!gvisorFlagAllowed(g.flags[i]))
      return Problem{key, key + " = " + q(g.flags[i]) +
                              ": not an allowed runsc flag (allowed: " + gvisorFlagList() + ")"};
  }
  return std::nullopt;
}

Check checkMicrovm(const Microvm& m) {
  if (auto why = pathProblem(m.qemu))
    return Problem{"microvm.qemu", "microvm.qemu = " + q(m.qemu) + ": " + *why};
  if (m.accel != "kvm" && m.accel != "tcg" && m.accel != "auto")
    return Problem{"microvm.accel", "microvm.accel = " + q(m.accel) +
                                        ": must be 'kvm', 'tcg' or 'auto' (`airlock doctor` "
                                        "says which work on this host)"};
  if (auto c = range("microvm.vcpus", m.vcpus, 0, 64)) return c;
  // Below 128 MiB Debian's kernel, the initramfs and the agent do not boot reliably; 1 TiB is
  // far past any host here.
  if (m.memory_mb != 0 && (m.memory_mb < 128 || m.memory_mb > 1048576))
    return Problem{"microvm.memory_mb", "microvm.memory_mb = " + std::to_string(m.memory_mb) +
                                            ": must be 0 (limits.memory_mb) or 128 to 1048576"};
  if (!m.kernel.empty())
    if (auto why = pathProblem(m.kernel))
      return Problem{"microvm.kernel", "microvm.kernel = " + q(m.kernel) + ": " + *why +
                                           " (or '' for the newest /boot/vmlinuz-*)"};
  if (auto why = pathProblem(m.cache_dir))
    return Problem{"microvm.cache_dir", "microvm.cache_dir = " + q(m.cache_dir) + ": " + *why};
  return range("microvm.boot_timeout_s", m.boot_timeout_s, 5, 600);
}

Check checkNetwork(const Network& n) {
  if (!parseNetMode(n.mode)) {
    return Problem{"network.mode", "network.mode = " + q(n.mode) +
                                       ": must be 'none' (loopback only), 'allowlist' (only what "
                                       "a rule allows) or 'open' (all but protected ranges)"};
  }
  if (n.rules.size() > kMaxNetRules) {
    return Problem{"network.rules", "network.rules: " + std::to_string(n.rules.size()) +
                                        " rules, more than the " + std::to_string(kMaxNetRules) +
                                        " a sandbox holds"};
  }
  for (size_t i = 0; i < n.rules.size(); ++i) {
    const std::string key = "network.rules[" + std::to_string(i) + "]";
    if (auto rule = NetRule::parse(n.rules[i]); !rule) {
      return Problem{key, key + ": " + rule.error().message()};  // the message quotes the rule
    }
  }
  return std::nullopt;
}

Check checkSeccomp(const Seccomp& s) {
  for (auto [list, name] : {std::pair{&s.allow, "seccomp.allow"}, {&s.deny, "seccomp.deny"}}) {
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string& sys = (*list)[i];
      const std::string key = std::string(name) + "[" + std::to_string(i) + "]";
      if (sys.empty() || sys.size() > 64 || !allChars(sys, isSyscallChar)) {
        return Problem{key, key + " = " + q(sys) +
                                ": must be a syscall name of lowercase letters, digits and '_'"};
      }
    }
  }
  for (size_t i = 0; i < s.deny.size(); ++i) {
    if (std::ranges::find(s.allow, s.deny[i]) != s.allow.end()) {
      const std::string key = "seccomp.deny[" + std::to_string(i) + "]";
      return Problem{key, key + " = " + q(s.deny[i]) + ": also in seccomp.allow; pick one"};
    }
  }
  return std::nullopt;
}

bool isLowerHex(unsigned char c) { return std::isdigit(c) || (c >= 'a' && c <= 'f'); }

// A group name (letters, digits, '_', '-', '.', not starting with '-') or a numeric gid.
bool validGroup(std::string_view g) {
  return !g.empty() && g.size() <= 32 && g.front() != '-' && allChars(g, [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-' || c == '.';
  });
}

std::optional<Problem> serverPath(std::string_view key, const std::string& path) {
  if (auto why = pathProblem(path)) {
    return Problem{"server." + std::string(key),
                   "server." + std::string(key) + " = " + q(path) + ": " + *why};
  }
  return std::nullopt;
}

Check checkServer(const Server& s) {
  if (auto p = serverPath("socket", s.socket)) return p;
  if (s.socket.size() > kMaxSocketPath) {
    return Problem{"server.socket",
                   "server.socket = " + q(s.socket) + ": " + std::to_string(s.socket.size()) +
                       " bytes, longer than the " + std::to_string(kMaxSocketPath) +
                       " a Unix socket address holds"};
  }
  const bool octal = !s.socket_mode.empty() && s.socket_mode.size() <= 4 &&
                     allChars(s.socket_mode, [](unsigned char c) { return c >= '0' && c <= '7'; });
  if (!octal || s.socketModeBits() > 0777) {
    return Problem{"server.socket_mode", "server.socket_mode = " + q(s.socket_mode) +
                                             ": must be octal permission bits such as '0660', "
                                             "at most '0777' (no setuid, setgid or sticky bit)"};
  }
  if (!s.socket_group.empty() && !validGroup(s.socket_group)) {
    return Problem{"server.socket_group",
                   "server.socket_group = " + q(s.socket_group) +
                       ": must be a group name (letters, digits, '_', '-', '.'), a numeric gid, "
                       "or '' for root's group"};
  }
  if (s.tls_cert.empty() != s.tls_key.empty()) {
    const char* missing = s.tls_cert.empty() ? "server.tls_cert" : "server.tls_key";
    return Problem{missing, std::string(missing) +
                                " is empty: TLS needs both tls_cert (PEM certificate chain) and "
                                "tls_key (PEM private key)"};
  }
  for (auto [key, path] : {std::pair<const char*, const std::string&>{"tls_cert", s.tls_cert},
                           {"tls_key", s.tls_key},
                           {"tls_client_ca", s.tls_client_ca}}) {
    if (!path.empty())
      if (auto p = serverPath(key, path)) return p;
  }
  const bool tls = !s.tls_cert.empty();
  if (!s.tls_client_ca.empty() && !tls) {
    return Problem{"server.tls_client_ca",
                   "server.tls_client_ca = " + q(s.tls_client_ca) +
                       ": client certificates need TLS; set server.tls_cert and server.tls_key"};
  }
  if (tls && s.tcp.empty()) {
    return Problem{"server.tls_cert",
                   "server.tls_cert is set but server.tcp is empty: TLS applies to the TCP "
                   "listener; set server.tcp (e.g. '0.0.0.0:8443') or remove the TLS keys"};
  }
  if (auto tcp = parseTcp(s.tcp, tls); !tcp) return Problem{"server.tcp", tcp.error().message()};
  if (!validNodeName(s.node)) {
    return Problem{"server.node", "server.node = " + q(s.node) +
                                      ": use 1 to 63 of a-z 0-9 . - (no '_'), starting and "
                                      "ending with a letter or digit, e.g. 'node-1'"};
  }
  // Any address: the agent-check answers only a weight (no TLS, no token).
  if (auto agent = parseTcp(s.agent_check, true, "server.agent_check"); !agent)
    return Problem{"server.agent_check", agent.error().message()};
  for (Check c : {
           range("server.max_connections", s.max_connections, 1, 65536),
           range("server.max_connections_per_client", s.max_connections_per_client, 1, 65536),
           range("server.max_requests", s.max_requests, 1, 16384),
           range("server.max_requests_per_client", s.max_requests_per_client, 1, 16384),
           range("server.idle_timeout_s", s.idle_timeout_s, 1, 3600),
           range("server.header_timeout_s", s.header_timeout_s, 1, 3600),
           range("server.io_timeout_s", s.io_timeout_s, 1, 3600),
           range("server.max_json_body_kb", s.max_json_body_kb, 1, 1 << 20),
           range("server.max_upload_mb", s.max_upload_mb, 1, kMaxMiB),
           range("server.max_sandboxes", s.max_sandboxes, 1, kMaxSandboxes),
           range("server.mcp_max_sessions_per_tenant", s.mcp_max_sessions_per_tenant, 1, 4096),
           range("server.mcp_idle_timeout_s", s.mcp_idle_timeout_s, 1, 604800),
       }) {
    if (c) return c;
  }
  if (auto p = serverPath("state_dir", s.state_dir)) return p;
  if (auto c = range("server.drain_timeout_s", s.drain_timeout_s, 0, 3600)) return c;
  // The names supervisor/log/log.h parses; the policy library does not link the logger.
  if (s.log_level != "debug" && s.log_level != "info" && s.log_level != "warn" &&
      s.log_level != "error") {
    return Problem{"server.log_level", "server.log_level = " + q(s.log_level) +
                                           ": expected 'debug', 'info', 'warn' or 'error'"};
  }
  if (s.log_format != "text" && s.log_format != "json") {
    return Problem{"server.log_format",
                   "server.log_format = " + q(s.log_format) + ": expected 'text' or 'json'"};
  }
  return range("server.reattach_grace_s", s.reattach_grace_s, 0, 86400);
}

// The lifecycle webhook's keys ([audit] webhook_*; docs/audit.md).
Check checkAuditWebhook(const AuditSettings& a) {
  // The audit record types (docs/audit.md) a webhook can be sent.
  static constexpr std::array<std::string_view, 8> kTypes = {
      "sandbox", "execution", "transfer", "review", "exec", "net", "package", "port"};
  for (size_t i = 0; i < a.webhook_events.size(); ++i) {
    const std::string& e = a.webhook_events[i];
    if (std::find(kTypes.begin(), kTypes.end(), e) == kTypes.end()) {
      std::string key = "audit.webhook_events[" + std::to_string(i) + "]";
      return Problem{"audit.webhook_events",
                     key + " = " + q(e) +
                         ": not an audit record type; expected one of sandbox, execution, "
                         "transfer, review, exec, net, package, port"};
    }
  }
  if (auto c = range("audit.webhook_timeout_ms", a.webhook_timeout_ms, 100, 60000)) return c;
  if (auto c = range("audit.webhook_max_retries", a.webhook_max_retries, 0, 20)) return c;
  if (auto c = range("audit.webhook_queue", a.webhook_queue, 1, 1000000)) return c;
  if (!a.webhook_secret_file.empty()) {
    if (auto why = pathProblem(a.webhook_secret_file)) {
      return Problem{"audit.webhook_secret_file",
                     "audit.webhook_secret_file = " + q(a.webhook_secret_file) + ": " + *why};
    }
  }
  if (a.webhook_url.empty()) return std::nullopt;
  if (auto url = parseWebhookUrl(a.webhook_url); !url) {
    return Problem{"audit.webhook_url",
                   "audit.webhook_url = " + q(a.webhook_url) + ": " + url.error().message()};
  }
  if (a.log.empty()) {
    return Problem{"audit.webhook_url",
                   "audit.webhook_url = " + q(a.webhook_url) +
                       ": needs audit.log (the webhook sends the records the log is written)"};
  }
  if (a.webhook_events.empty()) {
    return Problem{"audit.webhook_events",
                   "audit.webhook_events = []: name at least one record type to send, or leave "
                   "webhook_url empty"};
  }
  return std::nullopt;
}

Check checkAuditSettings(const AuditSettings& a) {
  if (!a.log.empty()) {
    if (auto why = pathProblem(a.log)) {
      return Problem{"audit.log", "audit.log = " + q(a.log) + ": " + *why};
    }
  }
  if (auto c = range("audit.max_mb", a.max_mb, 1, 1 << 20)) return c;
  if (auto c = range("audit.keep", a.keep, 0, 1000)) return c;
  for (auto [key, kb] :
       {std::pair{"audit.ring_kb", a.ring_kb}, {"audit.run_ring_kb", a.run_ring_kb}}) {
    if (kb < 4 || kb > (1u << 20) || (kb & (kb - 1)) != 0) {
      return Problem{key, std::string(key) + " = " + std::to_string(kb) +
                              ": must be a power of two from 4 (one page) to 1048576 (1 GiB)"};
    }
  }
  return checkAuditWebhook(a);
}

// A range of sandbox link addresses: an exact prefix (host bits zero) with room for one slot,
// clear of the loopback and the protected ::1.
Check checkRange(const std::string& key, const std::string& text, int family, int max_prefix) {
  auto cidr = Cidr::parse(text);
  if (!cidr) return Problem{key, key + " = " + q(text) + ": " + cidr.error().message()};
  if (cidr->family != family)
    return Problem{key,
                   key + " = " + q(text) + ": must be an IPv" + std::to_string(family) + " range"};
  if (cidr->prefix > max_prefix)
    return Problem{key, key + " = " + q(text) + ": /" + std::to_string(cidr->prefix) +
                            " is too small: each sandbox takes a /" + std::to_string(max_prefix)};
  for (const char* reserved : {"127.0.0.0/8", "::1/128", "0.0.0.0/8", "::/128"}) {
    auto r = Cidr::parse(reserved);
    if (r && r->family == cidr->family && (r->contains(*cidr) || cidr->contains(*r)))
      return Problem{key, key + " = " + q(text) + ": overlaps " + reserved};
  }
  return std::nullopt;
}

Check checkEgressSettings(const EgressSettings& e) {
  if (auto c = checkRange("egress.ipv4_range", e.ipv4_range, 4, 30)) return c;
  if (!e.ipv6_range.empty())
    if (auto c = checkRange("egress.ipv6_range", e.ipv6_range, 6, 64)) return c;
  if (e.nameservers.size() > 3)
    return Problem{"egress.nameservers",
                   "egress.nameservers: " + std::to_string(e.nameservers.size()) +
                       " servers; the resolver reads at most 3"};
  for (size_t i = 0; i < e.nameservers.size(); ++i) {
    const std::string key = "egress.nameservers[" + std::to_string(i) + "]";
    auto a = Cidr::parse(e.nameservers[i]);
    if (!a || e.nameservers[i].find('/') != std::string::npos)
      return Problem{key, key + " = " + q(e.nameservers[i]) + ": must be an IP address"};
  }
  return range("egress.mtu", e.mtu, 1280, 65535);
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

Check checkTenant(const Tenant& t, const Policy& policy) {
  const std::string prefix = "tenant " + q(t.name) + ": ";
  const std::string root = "tenants." + t.name + ".";
  auto problem = [&](std::string key, std::string message) {
    return Problem{root + key, prefix + message};
  };
  for (Check c : {range("max_sandboxes", t.max_sandboxes, 0, kMaxSandboxes),
                  range("max_memory_mb", t.max_memory_mb, 16, kMaxMiB)}) {
    if (c) return problem(c->key, c->message);
  }
  std::vector<std::string> names;
  for (const auto& [name, p] : policy.profiles) names.push_back(name);
  std::vector<std::string_view> candidates(names.begin(), names.end());
  std::set<std::string_view> seen;
  for (size_t i = 0; i < t.profiles.size(); ++i) {
    const std::string& name = t.profiles[i];
    const std::string key = "profiles[" + std::to_string(i) + "]";
    auto it = policy.profiles.find(name);
    if (it == policy.profiles.end()) {
      std::string_view guess = detail::closest(name, candidates);
      return problem(key, key + " = " + q(name) + ": no such profile" +
                              (guess.empty() ? " (this policy has: " + joined(names) + ")"
                                             : " (did you mean " + q(guess) + "?)"));
    }
    if (!seen.insert(name).second) return problem(key, key + " = " + q(name) + ": listed twice");
    // Checked only for profiles named here: [] (all) may include big profiles this tenant is
    // simply not meant to use.
    if (it->second.limits.memory_mb > t.max_memory_mb) {
      return problem(
          key, key + " = " + q(name) +
                   ": its limits.memory_mb = " + std::to_string(it->second.limits.memory_mb) +
                   " is above this tenant's max_memory_mb = " + std::to_string(t.max_memory_mb) +
                   ", so the tenant could never create one");
    }
  }
  if (!t.token_sha256.empty() &&
      (t.token_sha256.size() != 64 || !allChars(t.token_sha256, isLowerHex))) {
    return problem("token_sha256",
                   "token_sha256: must be 64 lowercase hex digits, the sha256 of the token (e.g. "
                   "`printf %s \"$TOKEN\" | sha256sum`), not the token itself; " +
                       (t.token_sha256.size() == 64
                            ? std::string("this one has characters other than 0-9 and a-f")
                            : "got " + std::to_string(t.token_sha256.size()) + " characters"));
  }
  return std::nullopt;
}

}  // namespace

namespace detail {

std::string q(std::string_view s) { return "'" + std::string(s) + "'"; }

std::optional<Problem> range(std::string_view key, uint64_t value, uint64_t min, uint64_t max,
                             std::string_view unit) {
  const std::string head = std::string(key) + " = " + std::to_string(value) + ": ";
  const std::string u = unit.empty() ? "" : " " + std::string(unit);
  if (value < min)
    return Problem{std::string(key), head + "must be at least " + std::to_string(min) + u};
  if (value > max)
    return Problem{std::string(key), head + "must be at most " + std::to_string(max) + u};
  return std::nullopt;
}

std::string profilePrefix(const Profile& profile) {
  return profile.name.empty() ? std::string() : "profile '" + profile.name + "': ";
}

std::optional<Problem> check(const Profile& p) {
  for (Check c : {checkIdentity(p), checkEnv(p), checkLimits(p.limits), checkLifetime(p.lifetime),
                  checkFilesystem(p.filesystem), checkNetwork(p.network), checkSeccomp(p.seccomp),
                  checkGvisor(p.gvisor), checkMicrovm(p.microvm), detail::checkReview(p.review),
                  detail::checkTransfer(p.transfer), detail::checkPackages(p.packages)}) {
    if (c) return c;
  }
  return std::nullopt;
}

std::vector<Problem> checkPolicy(const Policy& policy) {
  std::vector<Problem> out;
  if (Check c = checkServer(policy.server)) out.push_back(*c);
  if (Check c = checkAuditSettings(policy.audit)) out.push_back(*c);
  if (Check c = checkEgressSettings(policy.egress)) out.push_back(*c);
  if (Check c = checkTransferSettings(policy)) out.push_back(*c);
  if (Check c = detail::checkPackageSettings(policy.packages)) out.push_back(*c);
  std::map<std::string_view, std::string_view> token_owner;
  bool any_token = false;
  for (const auto& [name, tenant] : policy.tenants) {
    if (Check c = checkTenant(tenant, policy)) {
      out.push_back(*c);
      continue;
    }
    if (tenant.token_sha256.empty()) continue;
    any_token = true;
    auto [it, fresh] = token_owner.emplace(tenant.token_sha256, name);
    if (!fresh) {
      out.push_back({"tenants." + name + ".token_sha256",
                     "tenant " + q(name) + ": token_sha256 is also the token_sha256 of tenant " +
                         q(it->second) + ": each token must name one tenant"});
    }
  }
  if (!policy.server.tcp.empty() && !any_token) {
    out.push_back({"server.tcp", "server.tcp = " + q(policy.server.tcp) +
                                     ": no tenant has a token_sha256, so every TCP request "
                                     "would be refused; give a tenant a token or set tcp = ''"});
  }
  // Warm sandboxes are live sandboxes on this host before any tenant claims them.
  uint64_t pooled = 0;
  for (const auto& [name, profile] : policy.profiles) {
    // With prestart, each language of the profile may hold a pool of its own, and with preload
    // a second one whose interpreters skipped the imports (for programs that need none).
    const uint64_t kinds = profile.lifetime.preload.empty() ? 1 : 2;
    pooled += profile.lifetime.pool_size *
              (1 + (profile.lifetime.prestart ? kinds * profile.languages.size() : 0));
    // python_ast's checker interpreters.
    const auto& chain = profile.review.chain;
    if (std::find(chain.begin(), chain.end(), "python_ast") != chain.end() &&
        std::find(profile.languages.begin(), profile.languages.end(), "python") !=
            profile.languages.end())
      pooled += profile.review.python_ast.pool_size;
    if (pooled > policy.server.max_sandboxes) {
      out.push_back({"profiles." + name + ".lifetime.pool_size",
                     "profile " + q(name) + ": lifetime.pool_size: the profiles' pools add up to " +
                         std::to_string(pooled) + " warm sandboxes, above server.max_sandboxes = " +
                         std::to_string(policy.server.max_sandboxes) +
                         ": warm sandboxes count as live sandboxes of this host"});
      break;
    }
  }
  return out;
}

}  // namespace detail

int capabilityNumber(std::string_view name) {
  auto it = std::ranges::find(kCapabilities, name);
  return it == kCapabilities.end() ? -1 : static_cast<int>(it - kCapabilities.begin());
}

std::optional<std::string> imageNameProblem(std::string_view name) {
  // The name is a file under the store's names/ and a word in commands: no '/', no dot-files.
  if (name.empty() || name.size() > 128) return "an image name has 1 to 128 characters";
  if (!std::isalnum(static_cast<unsigned char>(name.front())))
    return "an image name starts with a letter or digit";
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (!((std::islower(u) || std::isdigit(u)) || c == '.' || c == '_' || c == '-'))
      return "an image name has only lowercase letters, digits, '.', '_' and '-'";
  }
  return std::nullopt;
}

Result<> validate(const Profile& profile) {
  if (auto problem = detail::check(profile)) {
    return fail(detail::profilePrefix(profile) + problem->message);
  }
  return {};
}

Result<> validate(const Policy& policy) {
  for (const auto& [name, profile] : policy.profiles) {
    if (auto v = validate(profile); !v) return v;
  }
  if (!policy.profiles.contains(policy.default_profile)) {
    return fail("default_profile = " + q(policy.default_profile) + " names no profile");
  }
  if (!policy.tenants.contains(std::string(kDefaultTenant))) {
    return fail("tenants: there is no tenant 'default'");
  }
  for (const auto& [name, tenant] : policy.tenants) {
    if (tenant.name != name) {
      return fail("tenants." + name + ": the tenant's name is " + q(tenant.name));
    }
  }
  if (auto problems = detail::checkPolicy(policy); !problems.empty()) {
    return fail(problems.front().message);
  }
  return {};
}

}  // namespace airlock::policy
