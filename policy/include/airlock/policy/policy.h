// The policy schema: one struct per TOML table, each field with its default and unit.
// policy/examples/reference.toml mirrors this file key for key; tests/unit/policy_reference_test
// fails when they drift apart.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/policy/gvisor.h"
#include "airlock/policy/microvm.h"
#include "airlock/policy/review.h"
#include "airlock/policy/transfer.h"
#include "airlock/result.h"

namespace airlock::policy {

inline constexpr int64_t kSchemaVersion = 1;

struct Limits {
  uint32_t timeout_s = 30;          // wall-clock limit of one execution, seconds
  uint64_t memory_mb = 1024;        // memory (RSS + page cache + tmpfs files) of the sandbox, MiB
  uint32_t pids = 256;              // processes and threads alive at once in the sandbox
  uint32_t cpu_percent = 100;       // CPU time per wall time, percent of one CPU (200 = 2 CPUs)
  uint64_t file_size_mb = 256;      // largest file a process may write (RLIMIT_FSIZE), MiB
  uint32_t open_files = 1024;       // file descriptors per process (RLIMIT_NOFILE)
  uint64_t output_bytes = 1 << 20;  // stdout and stderr each kept per execution, bytes
  uint64_t workspace_mb = 512;      // size of the writable /home/user, MiB (counts as memory)
  uint64_t tmp_mb = 128;            // size of the writable /tmp, MiB (counts as memory)
};

// How long a sandbox of `airlock serve` lives. A request may ask for its own keep-alive and
// lifetime up to the maxima; Lifetime::keepAliveFor / lifetimeFor apply these rules.
struct Lifetime {
  uint32_t keep_alive_s = 300;       // idle time before a sandbox is destroyed, seconds
  uint32_t max_keep_alive_s = 3600;  // largest keep_alive_s a request may ask for, seconds
  uint32_t lifetime_s = 3600;        // hard lifetime of a sandbox from its creation, seconds
  uint32_t max_lifetime_s = 86400;   // largest lifetime_s a request may ask for, seconds
  uint32_t pool_size = 0;            // warm sandboxes kept ready for this profile
  // Also keep pool_size single-use sandboxes per language of the profile that can (python,
  // node) with the interpreter already running and waiting for its one-shot program.
  bool prestart = false;
  // Modules the pre-started interpreters import before their program arrives ("pandas",
  // "matplotlib.pyplot"); a name a language cannot import is skipped by it.
  std::vector<std::string> preload;
  // A pre-started Python interpreter ends its program as the interpreter does up to atexit and
  // the stdio flush, then exits without tearing its modules down (finalizers that only that
  // teardown would run do not run, hence an opt-in).
  bool fast_exit = false;

  // The keep-alive a sandbox gets: `requested`, or keep_alive_s when absent. Errors (for an API
  // 400) name the request field: "keep_alive_s = 7200: above this profile's maximum of 3600 s".
  Result<int64_t> keepAliveFor(std::optional<int64_t> requested) const;
  // The same for lifetime_s against max_lifetime_s.
  Result<int64_t> lifetimeFor(std::optional<int64_t> requested) const;
};

struct Filesystem {
  // Empty: the root is a read-only view of the host's system directories (/usr and the parts
  // of /etc programs need). Otherwise a directory bound read-only as the whole root.
  std::string image;
  std::vector<std::string> readonly_paths;  // extra host paths bound read-only at the same place
};

struct Network {
  std::string mode = "none";  // "none": a private network namespace with loopback only
  // Kernel-enforced connect/sendmsg rules, first match wins (docs/audit.md): "allow|deny
  // tcp|udp|any CIDR [PORT|LO-HI|*]". Need the eBPF audit engine.
  std::vector<std::string> rules;
};

// What the eBPF programs record for each execution of this profile (docs/audit.md).
struct Audit {
  bool exec = true;          // every exec: path, argv head, pid inside the sandbox
  bool network = true;       // every connect/sendmsg decision, with the rule that decided
  bool syscalls = false;     // raw per-syscall counts: taxes every process on the host while on
  bool fail_closed = false;  // dropped audit events fail the execution

  // Whether the sandbox needs the audit engine at all (network rules need it too).
  bool any() const { return exec || network || syscalls; }
};

struct Seccomp {
  std::vector<std::string> allow;  // syscalls allowed beyond the default profile (relaxation)
  std::vector<std::string> deny;   // syscalls refused on top of the default profile
};

// Packages a sandbox may install through the supervisor's package proxy (docs/packages.md).
// The proxy is on only when `allow` has an entry; the supervisor then sets PIP_INDEX_URL and
// npm_config_registry in every execution to it, at 127.0.0.1:[packages] port in the sandbox.
struct Packages {
  // "pandas", "requests>=2,<3", "numpy==1.26.4", "@types/*", "pypi:tqdm", "npm:left-pad"; []:
  // the proxy is off. deny wins over allow; a version spec allows or denies only those versions.
  std::vector<std::string> allow;
  std::vector<std::string> deny;
  uint64_t max_file_mb = 100;      // one wheel, sdist or npm tarball, MiB
  uint64_t max_sandbox_mb = 1024;  // everything one sandbox downloads, MiB
  bool sdists = false;  // PyPI source distributions (they run setup.py at install); false: wheels
  // package name -> "sha256:HEX[, sha256:HEX...]": a pinned package's files must have one of them
  std::map<std::string, std::string> pins;

  bool enabled() const { return !allow.empty(); }
};

struct Profile {
  std::string name;
  std::string description;
  std::string isolation = "namespaces";  // isolation plugin: short ("namespaces") or dotted name
  // Other isolation plugins a create request may ask for ("isolation" in POST /v1/sandboxes);
  // empty: only `isolation`.
  std::vector<std::string> isolation_choices;
  std::string user = "user";              // "user": uid 1000 without capabilities; "root": uid 0
  std::vector<std::string> capabilities;  // kept when user = "root" (relaxation), e.g. CAP_CHOWN
  std::string hostname = "sandbox";
  std::vector<std::string> languages = {"python", "node", "shell"};  // allowed language plugins
  std::map<std::string, std::string> env;  // added to every execution's environment
  bool landlock = true;                    // Landlock on top of namespaces where the kernel has it
  // The API may proxy HTTP and WebSocket to ports the sandbox listens on, through its agent
  // (docs/api.md, "Ports"); false: those routes and port links answer 403.
  bool ports = true;
  Limits limits;
  Lifetime lifetime;
  Filesystem filesystem;
  Network network;
  Seccomp seccomp;
  Audit audit;
  Review review;      // reviewers run before any code or command reaches the sandbox
  Gvisor gvisor;      // settings of the gvisor isolation backend (used when isolation = "gvisor")
  Microvm microvm;    // settings of the microvm isolation backend (used when isolation = "microvm")
  Transfer transfer;  // archives, URLs and host directories in and out (docs/transfer.md)
  Packages packages;  // pip and npm installs through the package proxy (docs/packages.md)
};

// Where `airlock serve` listens and what one host allows in total ([server]).
struct Server {
  std::string socket = "/run/airlock/airlock.sock";  // Unix socket of the API (absolute path)
  std::string socket_mode = "0660";  // octal permission bits of the socket (at most 0777)
  std::string socket_group;          // group owning the socket, name or gid; "": root's group
  // "127.0.0.1:8720", "[::1]:8720" or "localhost:8720": also listen on loopback TCP, where every
  // request needs a tenant's bearer token. "": no TCP listener. Any other address ("0.0.0.0:8720",
  // "192.0.2.7:443", "[::]:8720", even "127.0.0.2:8720") needs TLS (tls_cert and tls_key).
  std::string tcp;
  // TLS on the TCP listener (docs/api.md, Remote access): PEM certificate chain and private key,
  // absolute paths read at start. "": plain HTTP, loopback only.
  std::string tls_cert;
  std::string tls_key;
  // PEM CA bundle: when set, every TLS client must present a certificate it signed (on top of
  // the bearer token). "": no client certificates asked for.
  std::string tls_client_ca;
  // This supervisor's name in a fleet behind one proxy (docs/deploy.md): 1 to 63 of a-z 0-9 . -
  // (a Kubernetes node name fits). Set, it begins every sandbox id, port link and review id
  // ("<node>_<16 hex>"), so a proxy routes a call by the id alone; "": a single host, ids as
  // before. `airlock serve --node` wins over it.
  std::string node;
  // "ADDRESS:PORT": a plain TCP listener answering HAProxy's agent-check with this node's free
  // capacity as a weight ("up ready 37%", "drain" when full). It reveals only that number, so
  // any address may serve it without TLS; "": off.
  std::string agent_check;
  // MCP's Streamable HTTP transport at /mcp: sessions open at once per tenant, and how long one
  // may go without a request before it and its sandboxes end.
  uint32_t mcp_max_sessions_per_tenant = 16;
  uint32_t mcp_idle_timeout_s = 1800;
  // Open connections, every client together. Over it, the oldest connection waiting for a
  // request is closed for the newcomer; 503 when every one has a request in progress.
  uint32_t max_connections = 4096;
  uint32_t max_connections_per_client = 1024;  // of one client (a local uid, a TCP address)
  uint32_t max_requests = 512;                 // requests answered at once, streams included; 503
  uint32_t max_requests_per_client = 256;      // of one client; more get 429
  uint32_t idle_timeout_s = 60;      // keep-alive wait for a connection's next request, seconds
  uint32_t header_timeout_s = 10;    // from a request's first byte to the end of its header
  uint32_t io_timeout_s = 60;        // a body read or answer write without progress, seconds
  uint32_t max_json_body_kb = 8192;  // largest JSON request body, KiB
  uint64_t max_upload_mb = 1024;     // largest streamed file upload, MiB
  uint32_t max_sandboxes = 1000;     // live sandboxes on this host, all tenants and pools together
  std::string state_dir = "/var/lib/airlock";  // state journal and persistent workspaces
  uint32_t drain_timeout_s = 30;  // on SIGTERM, how long in-flight requests may finish, seconds
  // How long a sandbox outlives its supervisor's death (kill -9, crash), waiting to be adopted
  // by the next `airlock serve`; 0: sandboxes end with their supervisor.
  uint32_t reattach_grace_s = 60;
  // The operational log on stderr (docs/logging.md): lines below log_level are dropped
  // ("debug", "info", "warn", "error"); log_format is "text" (key=value) or "json" (one object
  // per line). `airlock serve --log-level/--log-format` win over them.
  std::string log_level = "info";
  std::string log_format = "text";

  // socket_mode as bits (0660 → 0x1b0). Valid after validation.
  uint32_t socketModeBits() const;
};

// A TCP address, from Server::tcp.
struct TcpEndpoint {
  std::string host;  // an IP address ("localhost" is read as 127.0.0.1)
  uint16_t port = 0;
  bool loopback = false;  // 127.0.0.1 or ::1: the addresses plain HTTP may use
};

// The TCP listener Server::tcp asks for: nullopt for "", else its address or a message saying
// what is wrong. Without `tls` only 127.0.0.1, [::1] and localhost are allowed
// ("'0.0.0.0:80': ... needs TLS: set server.tls_cert and server.tls_key"); with it, any IP
// address.
Result<std::optional<TcpEndpoint>> parseTcp(std::string_view tcp, bool tls = false,
                                            std::string_view key = "server.tcp");

// A fleet node name (Server::node): "" or 1 to 63 of a-z 0-9 . -, starting and ending with a
// letter or digit. Never '_', which separates it from the rest of an id.
bool validNodeName(std::string_view node);
// What every id a fleet node hands out begins with: "<node>_"; "" for "" (a single host).
std::string fleetIdPrefix(std::string_view node);

// The supervisor's audit log and eBPF ring buffer ([audit]): one per process, for every profile.
struct AuditSettings {
  std::string log;       // JSON-lines audit log (absolute path); "": no log file
  uint32_t max_mb = 64;  // rotate the log before it grows past this, MiB
  uint32_t keep = 5;     // rotated files kept (<log>.1 .. <log>.<keep>)
  // eBPF ring buffer of `airlock serve`, for all its sandboxes, KiB: a power of two, at least the
  // page size (4). ≈ 7000 exec events per 4 MiB; when it is full, events are counted as dropped.
  uint32_t ring_kb = 4096;
  // The same for one `airlock run` (one sandbox). Smaller, because mapping the ring is on every
  // run's critical path: 4 MiB costs ~1.1 ms more than 256 KiB (≈ 450 exec events in flight).
  uint32_t run_ring_kb = 256;
  // Whether `execution` records carry the code or command text itself, not only its sha256: the
  // text may hold secrets, so it is opt-in.
  bool record_code = false;
  // Lifecycle webhooks (docs/audit.md): records of these types are POSTed, signed, to this
  // http:// URL as they are logged; "": none. Needs `log`.
  std::string webhook_url;
  std::string webhook_secret_file;  // HMAC-SHA256 key (absolute path); "": unsigned
  std::vector<std::string> webhook_events = {"sandbox"};  // record types sent
  uint32_t webhook_timeout_ms = 5000;                     // one delivery attempt
  uint32_t webhook_max_retries = 5;                       // after the first attempt
  uint32_t webhook_queue = 1000;  // records waiting at most; more are dropped and counted
};

// How sandboxes with a network beyond loopback reach out ([egress], docs/network.md): one per
// host, for every profile whose network.mode is allowlist or open.
struct EgressSettings {
  std::string ipv4_range = "10.200.0.0/16";        // each networked sandbox takes a /30 of it
  std::string ipv6_range = "fd61:6972:6c6b::/48";  // each a /64; "" = IPv4 only
  // DNS servers in the sandboxes' /etc/resolv.conf (IP addresses, at most 3); []: no resolver.
  // Reached through NAT like any destination: in allowlist mode a rule must allow port 53.
  std::vector<std::string> nameservers;
  uint32_t mtu = 1500;  // of the sandbox links; lower it to the uplink's when that is smaller
};

// Where the package proxy fetches from and keeps what it fetched ([packages], docs/packages.md):
// one per host, for every profile whose packages.allow has an entry.
struct PackageSettings {
  std::string pypi_index = "https://pypi.org/simple/";       // PEP 503 "simple" index upstream
  std::string npm_registry = "https://registry.npmjs.org/";  // npm registry upstream
  std::string cache_dir = "/var/cache/airlock/packages";     // shared on-disk cache (absolute)
  std::string ca_file;      // CA bundle for https upstreams; "": the system's
  uint32_t timeout_s = 60;  // per upstream request without progress, seconds
  uint32_t port = 3141;     // the proxy's loopback port inside each sandbox
};

// Who may use the API and how much of the host they get ([tenants.<name>]).
struct Tenant {
  std::string name;
  uint32_t max_sandboxes = 100;       // live sandboxes of this tenant; 0 disables the tenant
  uint64_t max_memory_mb = 65536;     // sum of limits.memory_mb of the tenant's live sandboxes, MiB
  std::vector<std::string> profiles;  // profiles the tenant may use; []: all
  // sha256 of the tenant's bearer token as 64 lowercase hex digits (never the token itself).
  // "": no token; the tenant is reached only over the Unix socket ("default" is the tenant of
  // socket clients that send no token).
  std::string token_sha256;

  // Whether the tenant may create sandboxes of this profile (a resolved name, not "").
  bool allowsProfile(std::string_view profile) const;
};

inline constexpr std::string_view kDefaultTenant = "default";

struct Policy {
  int64_t schema = kSchemaVersion;
  std::string default_profile = "default";
  std::map<std::string, Profile> profiles;  // always contains default_profile ("default" unless
                                            // the file names another)
  Server server;
  AuditSettings audit;
  EgressSettings egress;
  TransferSettings transfer;
  PackageSettings packages;
  std::map<std::string, Tenant> tenants;  // always contains "default" (with the defaults above
                                          // when the file has no [tenants.default])
  std::string source;                     // file path, or "<built-in>"
  std::string hash;                       // sha256 hex of the file bytes (or of the built-in)

  // The named profile; "" means default_profile.
  Result<const Profile*> profile(std::string_view name) const;
  // The named tenant; "" means "default".
  Result<const Tenant*> tenant(std::string_view name) const;
  // The tenant whose token_sha256 is `hex` (the sha256Hex of a presented bearer token), or
  // nullopt. Never matches a tenant without a token; compares in constant time per tenant.
  std::optional<std::string> tenantForTokenSha256(std::string_view hex) const;
};

// Loads and validates a policy file. Errors carry "file:line:col: message".
Result<Policy> loadFile(const std::string& path);
// The same from text (tests, built-in default); source_name is used in messages.
Result<Policy> parse(std::string_view toml_text, const std::string& source_name);
// The policy used when none is given: one "default" profile with every default above.
Policy builtinDefault();

// Cross-field checks of one profile (after CLI overrides too); errors name the key:
// "profile 'default': limits.memory_mb = 0: must be at least 16".
Result<> validate(const Profile& profile);
// Every profile, then [server], [tenants.*] and the rules across them (tenant profiles exist,
// tokens unique, pools fit server.max_sandboxes). parse() already ran this; policies built in
// code (tests) call it themselves.
Result<> validate(const Policy& policy);

// Why an http transfer URL pattern ([profiles.<name>.transfer.http] allow) is malformed, or
// nullopt: "https://host[:port][/path-prefix]", the host exact or "*.example.com".
std::optional<std::string> urlPatternProblem(std::string_view pattern);

// Every way this profile is looser than the defaults, one human-readable line each, logged by
// the supervisor at startup and printed by `airlock policy check`.
std::vector<std::string> relaxations(const Profile& profile);
// The same for the whole policy: every profile's, then the server's ("server.tcp = ...: the API
// also listens on loopback TCP").
std::vector<std::string> relaxations(const Policy& policy);

}  // namespace airlock::policy
