/* airlock plugin ABI, version 1.
 *
 * The only contract between the airlock supervisor and a plugin shared library. Pure C: no C++
 * types, no exceptions, no allocation that crosses the boundary without a matching free on the
 * side that allocated it.
 *
 * A plugin .so exports one symbol through Boost.DLL (BOOST_DLL_ALIAS), named
 * AIRLOCK_PLUGIN_ENTRY_SYMBOL, of type airlock_plugin_entry_v1_fn. The supervisor calls it once
 * after loading and checks abi_major, struct_size, kind and name before using anything else.
 *
 * Conventions on every item below:
 *   - Strings are NUL-terminated UTF-8 unless typed airlock_str_v1 ({ptr,len}, not terminated).
 *   - "borrowed" means valid only for the duration of the call; copy what you keep.
 *   - "static" means valid for as long as the library stays loaded.
 *   - Functions return 0 on success or a positive errno value on failure; on failure they fill
 *     *err (a host-owned buffer) with a message naming what failed.
 *   - Unless said otherwise, every function is called from one supervisor thread at a time per
 *     instance; different instances may be used from different threads concurrently.
 *
 * Changing this file in any way that alters layout or meaning requires bumping
 * AIRLOCK_PLUGIN_ABI_MAJOR (incompatible) or AIRLOCK_PLUGIN_ABI_MINOR (fields appended at the end
 * of a struct, guarded by struct_size). tests/unit/abi_version_test.cc enforces this.
 */
#ifndef AIRLOCK_PLUGIN_ABI_V1_H
#define AIRLOCK_PLUGIN_ABI_V1_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AIRLOCK_PLUGIN_ABI_MAJOR 1
#define AIRLOCK_PLUGIN_ABI_MINOR 10
#define AIRLOCK_PLUGIN_ENTRY_SYMBOL "airlock_plugin_entry_v1"

/* A borrowed byte string; not NUL-terminated. */
typedef struct airlock_str_v1 {
  const char* ptr;
  size_t len;
} airlock_str_v1;

/* Host-owned error buffer, filled by a plugin when a call fails. */
typedef struct airlock_error_v1 {
  int code;           /* errno value, or EINVAL/ENOTSUP for non-kernel failures */
  char message[512];  /* NUL-terminated; names the failing operation and its subject */
} airlock_error_v1;

typedef enum airlock_plugin_kind_v1 {
  AIRLOCK_PLUGIN_ISOLATION = 1,
  AIRLOCK_PLUGIN_LANGUAGE = 2,
  AIRLOCK_PLUGIN_TRANSFER = 3,
  AIRLOCK_PLUGIN_REVIEW = 4
} airlock_plugin_kind_v1;

/* Services the supervisor offers to every plugin instance. Owned by the host; valid until the
 * instance is destroyed. */
typedef struct airlock_host_v1 {
  uint32_t struct_size;
  void* ctx; /* opaque; pass back to the callbacks */
  /* Logs one line at level 0=debug 1=info 2=warning 3=error, tagged with the plugin name. */
  void (*log)(void* ctx, int level, const char* message);
} airlock_host_v1;

/* ---------------------------------------------------------------------------------------------
 * Isolation plugins: start the sandbox whose PID 1 is airlock-agent.
 *
 * Everything every backend needs is prepared by the supervisor and handed over here, so a
 * backend never re-creates it: the cgroup (a v2 directory fd for CLONE_INTO_CGROUP plus a
 * callback for v1 hierarchies), the agent executable and its channel, the id mapping. */

typedef struct airlock_mount_v1 {
  const char* source; /* host path; borrowed */
  const char* target; /* path inside the sandbox; borrowed */
  uint32_t flags;     /* AIRLOCK_MOUNT_* */
} airlock_mount_v1;

#define AIRLOCK_MOUNT_READONLY 1u
#define AIRLOCK_MOUNT_OPTIONAL 2u /* skip silently when the source does not exist */
/* Since 1.7, only for a backend flagged AIRLOCK_ISOLATION_WORKSPACE_IMAGE: source is the ext4
 * image file of a persistent workspace (not a directory), for the backend to mount at target
 * read-write inside the sandbox. */
#define AIRLOCK_MOUNT_IMAGE 4u

/* network_mode. Both give the sandbox a private network namespace with loopback up. With LINKED
 * the supervisor then adds a routed link ("eth0", docs/network.md) into the namespace of the
 * returned pid (/proc/<pid>/ns/net) after start() and before the agent handshake, and the
 * backend lets the sandbox's resolver use DNS (resolv_conf). A backend that cannot give the
 * returned pid the sandbox's own namespace must refuse LINKED, unless it is flagged
 * AIRLOCK_ISOLATION_OWN_NETSTACK (then the namespace comes linked, as spec.netns_fd). */
#define AIRLOCK_NETWORK_LOOPBACK 0
#define AIRLOCK_NETWORK_LINKED 1

typedef struct airlock_sandbox_spec_v1 {
  uint32_t struct_size;
  const char* sandbox_id; /* [a-z0-9-]{1,63}; borrowed */
  const char* hostname;   /* borrowed */

  /* Identity: sandbox uid/gid 0..id_count-1 map to host_uid_base.. / host_gid_base.. */
  uint32_t host_uid_base;
  uint32_t host_gid_base;
  uint32_t id_count;
  uint32_t user_uid; /* the unprivileged user inside (1000); owns the workspace */
  uint32_t user_gid;

  /* Filesystem. image_dir NULL: the root is a read-only view of the host's system directories
   * listed in mounts; otherwise image_dir is bound read-only as the root and mounts add to it. */
  const char* image_dir;
  const airlock_mount_v1* mounts;
  size_t mounts_len;
  uint64_t workspace_bytes; /* size of the tmpfs at /home/user */
  uint64_t tmp_bytes;       /* size of the tmpfs at /tmp */
  /* Host directory the backend may use as a mount point. Since 1.5 the backend may also keep
   * per-sandbox files in <scratch_dir>/<sandbox_id>/ (plain files only, no mounts): release()
   * removes it, and the supervisor removes it when it reclaims a sandbox whose supervisor
   * died. */
  const char* scratch_dir;

  /* Resources owned by the supervisor. */
  int cgroup_v2_fd; /* directory fd for CLONE_INTO_CGROUP, or -1 */
  /* Moves pid into the sandbox's v1 hierarchies (hybrid/v1 hosts). Called by the backend
   * between clone and letting the child run. NULL when there is nothing to do. */
  int (*attach_cgroups)(void* host_ctx, pid_t pid, airlock_error_v1* err);
  void* attach_ctx;
  int agent_exe_fd;     /* O_PATH fd of the static airlock-agent binary */
  int agent_channel_fd; /* the sandbox's end of the channel; becomes the agent's fd 3 */
  const char* const* agent_argv; /* NULL-terminated; borrowed */
  int network_mode;              /* AIRLOCK_NETWORK_* (LINKED since 1.3) */
  /* Since 1.3 (struct_size): with AIRLOCK_NETWORK_LINKED, the sandbox's /etc/resolv.conf text
   * (borrowed; NULL = empty). */
  const char* resolv_conf;
  /* Since 1.6 (struct_size): with AIRLOCK_NETWORK_LINKED and a backend flagged
   * AIRLOCK_ISOLATION_OWN_NETSTACK, the network namespace the sandbox must use, which the
   * supervisor made and linked before start() (eth0 up, addresses, default routes); borrowed.
   * -1 otherwise. */
  int netns_fd;
} airlock_sandbox_spec_v1;

/* A started sandbox. Filled by start(); the host owns pidfd afterwards and closes it. */
typedef struct airlock_sandbox_v1 {
  uint32_t struct_size;
  pid_t pid;    /* host pid of the sandbox's PID 1 (or the backend's monitor process) */
  int pidfd;    /* pidfd of that process */
  void* handle; /* backend state, passed back to release() */
  /* Since 1.6 (struct_size; the host sets -1 before start()): for a backend flagged
   * AIRLOCK_ISOLATION_OWN_AUDIT, an fd that polls readable while events from inside the sandbox
   * wait for read_events(); the backend owns and closes it in release(). -1: none. */
  int events_fd;
} airlock_sandbox_v1;

/* Since 1.6. What a backend's own monitoring saw inside its sandbox (read_events). Strings and
 * arrays are borrowed for the call; every field comes from the sandbox and is untrusted. */
typedef struct airlock_sandbox_event_v1 {
  uint32_t struct_size;
  uint32_t kind;          /* AIRLOCK_SANDBOX_EVENT_* */
  uint64_t time_ns;       /* CLOCK_REALTIME */
  uint32_t pid;           /* the process inside the sandbox (its own pid numbering) */
  uint32_t uid;           /* its effective uid inside */
  const char* comm;       /* its command name */
  /* EXEC: the program that was exec'd, and its arguments. */
  const char* path;
  const char* const* argv;
  uint32_t argc;
  /* CONNECT: the destination (family 4: address[0..3]; 6: address[0..15]), its port, the
   * socket's protocol (6 tcp, 17 udp, 0 unknown) and the errno connect() returned inside (0 when
   * it succeeded or is in progress). */
  uint32_t family;
  uint8_t address[16];
  uint16_t port;
  uint8_t protocol;
  int32_t result_errno;
  /* Events the backend's monitoring lost just before this one (0 normally); an event of kind
   * LOST carries only this. */
  uint32_t lost;
} airlock_sandbox_event_v1;

#define AIRLOCK_SANDBOX_EVENT_EXEC 1u
#define AIRLOCK_SANDBOX_EVENT_CONNECT 2u
#define AIRLOCK_SANDBOX_EVENT_LOST 3u

/* Since 1.10. A sandbox this backend started for a supervisor that died, for adopt(). Its agent
 * is waiting for a new channel (its reattach grace). */
typedef struct airlock_adopt_spec_v1 {
  uint32_t struct_size;
  const char* sandbox_id;
  const char* scratch_dir; /* as given to start(): <scratch_dir>/<sandbox_id>/ is the backend's */
  pid_t pid;               /* what start() returned as the sandbox's pid; still that process */
  int pidfd;               /* the supervisor's pidfd of it; borrowed */
  /* For processes the backend starts to reach the sandbox (they belong to it), as in start(). */
  int cgroup_v2_fd;
  int (*attach_cgroups)(void* host_ctx, pid_t pid, airlock_error_v1* err);
  void* attach_ctx;
  uint32_t timeout_ms; /* how long to wait for the agent to take the new channel */
} airlock_adopt_spec_v1;

typedef struct airlock_isolation_ops_v1 {
  uint32_t struct_size;
  /* Starts the sandbox. Returns once the agent has been exec'd (or failed to be). */
  int (*start)(void* instance, const airlock_sandbox_spec_v1* spec, airlock_sandbox_v1* out,
               airlock_error_v1* err);
  /* Called after the supervisor has killed every process of the sandbox and reaped pidfd's
   * process: frees backend state (files, mounts outside the sandbox). Must not fail. */
  void (*release)(void* instance, airlock_sandbox_v1* sandbox);
  /* Extra syscalls this backend needs inside the sandbox, NULL-terminated; static. Logged by
   * the supervisor as policy relaxations. May be NULL. */
  const char* const* extra_syscalls;
  /* Since 1.5 (struct_size): AIRLOCK_ISOLATION_* bits. */
  uint32_t flags;
  /* Since 1.5: what the backend itself costs on the host, inside the sandbox's cgroup (a
   * user-space kernel's threads and memory). The supervisor sets the cgroup's pids limit to
   * host_pids_base + host_pids_per_process * limits.pids and its memory limit to
   * limits.memory_mb plus host_memory_base_bytes; the sandbox's own processes stay bounded by
   * limits.pids through RLIMIT_NPROC. All 0 for a backend whose sandbox is plain processes. */
  uint32_t host_pids_base;
  uint32_t host_pids_per_process;
  uint64_t host_memory_base_bytes;
  /* Since 1.6, for a backend flagged AIRLOCK_ISOLATION_OWN_AUDIT (else NULL): calls emit for
   * every event received from the sandbox so far, in order, without blocking; returns 0, or an
   * errno when the monitoring itself failed (its channel broke: later events are lost). Called
   * by one thread at a time per sandbox, possibly concurrently with other sandboxes'. */
  int (*read_events)(void* instance, airlock_sandbox_v1* sandbox,
                     void (*emit)(void* emit_ctx, const airlock_sandbox_event_v1* event),
                     void* emit_ctx);
  /* Since 1.10. Takes over a sandbox this backend started for a supervisor that died: hands its
   * waiting agent a new channel and returns the supervisor's end in *channel_fd (the supervisor
   * then sends Reattach on it), and fills out->handle and out->events_fd as start() would (pid
   * and pidfd are the supervisor's, already set). NULL: the agent is a host process, and the
   * supervisor takes the channel from the agent's fd 3 itself (pidfd_getfd). Not called for a
   * backend flagged AIRLOCK_ISOLATION_NO_REATTACH. May run concurrently with start() when the
   * backend is flagged AIRLOCK_ISOLATION_CONCURRENT. */
  int (*adopt)(void* instance, const airlock_adopt_spec_v1* spec, airlock_sandbox_v1* out,
               int* channel_fd, airlock_error_v1* err);
} airlock_isolation_ops_v1;

/* The supervisor cannot take over this backend's sandboxes after it dies (without adopt() it
 * reaches a waiting agent with pidfd_getfd, which needs the agent to be a host process): it
 * starts their agents without a reattach grace, so they end with their supervisor, and reclaims
 * what is left. */
#define AIRLOCK_ISOLATION_NO_REATTACH 1u
/* The sandbox's ids reach host files unmapped (gVisor's gofer writes them as they are): host
 * files the sandbox owns, such as a persistent workspace, are owned by user_uid and user_gid
 * themselves instead of host_uid_base + user_uid. */
#define AIRLOCK_ISOLATION_HOST_IDS 2u
/* start() and release() may run on several threads at once for one instance (the rule at the
 * top of this file is relaxed): a backend whose start() waits hundreds of milliseconds for a
 * sandbox to boot would otherwise make every other create of the supervisor wait behind it. */
#define AIRLOCK_ISOLATION_CONCURRENT 4u
/* Since 1.6. The sandbox's network stack is the backend's own (gVisor's netstack, a VM's
 * kernel): its connections never pass the host's socket hooks, only its frames cross the link.
 * With AIRLOCK_NETWORK_LINKED the supervisor makes the network namespace and links it before
 * start() (spec.netns_fd) rather than linking the returned pid's namespace after it, and it
 * enforces the sandbox's network rules on the host side of the link. */
#define AIRLOCK_ISOLATION_OWN_NETSTACK 8u
/* Since 1.6. The host's exec and connect hooks see only the backend's own processes (a
 * user-space kernel, a VM): the supervisor records none of their execs, and the backend reports
 * the sandbox's execs and connects itself (events_fd, read_events). */
#define AIRLOCK_ISOLATION_OWN_AUDIT 16u
/* Since 1.7. The sandbox mounts its persistent workspace itself, from the ext4 image (a VM gives
 * it to its kernel as a disk): the supervisor does not mount it on the host, and passes the
 * image file as the /home/user mount with AIRLOCK_MOUNT_IMAGE. The supervisor holds the image
 * locked for the sandbox's lifetime and has re-owned its files to user_uid and user_gid
 * themselves (as for AIRLOCK_ISOLATION_HOST_IDS) before start(). */
#define AIRLOCK_ISOLATION_WORKSPACE_IMAGE 32u

/* ---------------------------------------------------------------------------------------------
 * Language plugins: turn code into a command the agent runs. */

typedef enum airlock_code_source_v1 {
  AIRLOCK_CODE_INLINE = 1, /* code holds the program text */
  AIRLOCK_CODE_FILE = 2,   /* path names a program file inside the sandbox */
  /* Since 1.1. Build the command that starts this language's session driver: a long-lived
   * process that reads requests ({"id", "code", "timeout_ms"}, one JSON object a line) on stdin
   * and writes events (ready, result, display, error, done) one JSON object a line on fd 3, the
   * control pipe; docs/plugins.md has the protocol. code, path and args are unused. A language
   * without sessions fails with ENOTSUP; plugins built against 1.0 fail it as an unknown
   * source. */
  AIRLOCK_CODE_SESSION = 3,
  /* Since 1.4. Build the command that starts this language's prestart driver, for a warm pool:
   * an interpreter that starts now, imports the modules named in args (e.g. "pandas",
   * "matplotlib.pyplot"; one that fails to import is skipped silently), then waits for exactly
   * one program on stdin: a decimal byte length, '\n', then that many bytes of UTF-8 JSON
   * {"code": str | null, "path": str | null, "args": [str]} (exactly one of code and path). It
   * runs that program as the INLINE or FILE command would, with the rest of stdin as the
   * program's stdin, and exits with its status; docs/plugins.md has the details. code and path
   * are unused. The environment is the one of INLINE and FILE commands. A language without a
   * prestart driver fails with ENOTSUP; plugins built against 1.3 or earlier fail it as an
   * unknown source. */
  AIRLOCK_CODE_PRESTART = 4
} airlock_code_source_v1;

typedef struct airlock_code_request_v1 {
  uint32_t struct_size;
  int source;                    /* airlock_code_source_v1 */
  airlock_str_v1 code;           /* INLINE: the program text; borrowed */
  const char* path;              /* FILE: sandbox path; borrowed */
  const char* const* args;       /* program arguments (PRESTART: modules), NULL-terminated;
                                    borrowed */
} airlock_code_request_v1;

/* A command for the agent. Allocated by the plugin in build_command(), released by the plugin
 * in free_command(); the host only reads it in between. */
typedef struct airlock_command_v1 {
  uint32_t struct_size;
  const char* const* argv; /* NULL-terminated; argv[0] is an absolute path inside the sandbox */
  const char* const* env;  /* "K=V", NULL-terminated; the runtime's variables */
  void* plugin_data;       /* for free_command */
} airlock_command_v1;

typedef struct airlock_language_ops_v1 {
  uint32_t struct_size;
  /* Other names the language answers to ("py", "python3"), NULL-terminated; static. */
  const char* const* aliases;
  /* File extensions that select this language (".py"), NULL-terminated; static. */
  const char* const* extensions;
  /* Host paths the runtime needs inside the sandbox, bound read-only at the same place,
   * NULL-terminated; static. Missing paths are skipped. */
  const char* const* image_paths;
  /* Largest inline program passed on the command line; larger ones are written to a file in
   * the sandbox first and run as AIRLOCK_CODE_FILE. */
  size_t max_inline_bytes;
  int (*build_command)(void* instance, const airlock_code_request_v1* request,
                       airlock_command_v1* out, airlock_error_v1* err);
  void (*free_command)(void* instance, airlock_command_v1* command);
} airlock_language_ops_v1;

/* ---------------------------------------------------------------------------------------------
 * Review plugins (since 1.2): one link of a profile's review chain, named "plugin:<name>" in
 * [profiles.X.review] chain (docs/review.md). A review plugin built against 1.1 has NULL ops; it
 * loads but cannot be used in a chain. */

typedef enum airlock_review_kind_v1 {
  AIRLOCK_REVIEW_CODE = 1,   /* code for a language's interpreter */
  AIRLOCK_REVIEW_COMMAND = 2, /* a command: argv, or a `/bin/sh -c` string */
  /* Since 1.9: a transfer (docs/transfer.md, "Review"), language "transfer". text is its first
   * line "in LOCATION -> DIR" or "out DIR -> LOCATION" and, for an archive coming in once it is
   * staged, one "TYPE SIZE NAME" line per entry; details_json has the same as JSON. A plugin
   * built against an earlier minor is never asked about transfers. */
  AIRLOCK_REVIEW_TRANSFER = 3
} airlock_review_kind_v1;

typedef enum airlock_review_decision_v1 {
  AIRLOCK_REVIEW_ALLOW = 0,
  AIRLOCK_REVIEW_DENY = 1,
  AIRLOCK_REVIEW_HOLD = 2 /* wait for an operator's approval (airlock serve) */
} airlock_review_decision_v1;

/* What is reviewed. Owned by the host; every pointer is borrowed for the call. */
typedef struct airlock_review_subject_v1 {
  uint32_t struct_size;
  int kind;                /* airlock_review_kind_v1 */
  airlock_str_v1 language; /* "python", "node", "shell" (every command is "shell") */
  /* The code; for a command its `sh -c` string or its argv shell-quoted and joined. May hold
   * any bytes, NUL included, unless the chain's limits reviewer ran first. */
  airlock_str_v1 text;
  const char* const* argv; /* a command given as argv, NULL-terminated; NULL otherwise */
  airlock_str_v1 profile;
  airlock_str_v1 tenant;     /* empty under `airlock run` */
  airlock_str_v1 sandbox_id; /* empty when no sandbox exists yet */
  /* Since 1.9 (check struct_size): for AIRLOCK_REVIEW_TRANSFER, the transfer as a JSON object
   * (direction, plugin, location, sandbox_path, size, listed, entries, entries_total,
   * truncated); empty for code and commands. */
  airlock_str_v1 details_json;
} airlock_review_subject_v1;

/* The plugin's verdict, written into a host-owned struct (nothing to free). */
typedef struct airlock_review_verdict_v1 {
  uint32_t struct_size; /* set by the host */
  int decision;         /* airlock_review_decision_v1 */
  char rule[128];       /* NUL-terminated rule id, "" for none */
  char reason[512];     /* NUL-terminated, said to the caller */
} airlock_review_verdict_v1;

typedef struct airlock_review_ops_v1 {
  uint32_t struct_size;
  /* Reviews one subject. Returns 0 with *out filled, or an errno value with *err filled when the
   * plugin cannot decide (the chain then fails closed unless the profile fails open). Runs in the
   * supervisor: it must be quick and bound its own time. Called from any supervisor thread, one
   * at a time per instance. */
  int (*review)(void* instance, const airlock_review_subject_v1* subject,
                airlock_review_verdict_v1* out, airlock_error_v1* err);
} airlock_review_ops_v1;

/* ---------------------------------------------------------------------------------------------
 * Transfer plugins (since 1.8): where a transfer's bytes come from or go to outside the sandbox
 * (a local archive, a URL, an operator's directory). The supervisor streams them to or from the
 * agent's transfer helper inside the sandbox, which alone unpacks and packs, as the sandbox
 * user: a transfer plugin never touches the sandbox's files. A transfer plugin built against an
 * earlier minor has NULL ops and cannot be used. Unlike the other kinds, open() and close() may
 * run on several host threads at once, one call per transfer: keep per-transfer state in the
 * handle. */

typedef enum airlock_transfer_direction_v1 {
  AIRLOCK_TRANSFER_IN = 1, /* into the sandbox: the plugin's fd gives the bytes */
  AIRLOCK_TRANSFER_OUT = 2 /* out of the sandbox: the plugin's fd takes the bytes */
} airlock_transfer_direction_v1;

/* Owned by the host; every pointer is borrowed for the call. */
typedef struct airlock_transfer_request_v1 {
  uint32_t struct_size;
  int direction;          /* airlock_transfer_direction_v1 */
  const char* location;   /* as the user named it: "./repo.tar.gz", "https://...", "hostdir:x/y" */
  const char* rules_json; /* the profile's rules for this plugin (docs/transfer.md), as JSON */
  uint64_t max_bytes;     /* the transfer's byte cap; the host enforces it too */
  const char* tenant;     /* who asks, and for which sandbox: for the plugin's own logs */
  const char* sandbox_id;
} airlock_transfer_request_v1;

/* Filled by open(); the host reads fd to its end (IN) or writes the packed archive to it (OUT),
 * closes fd, then calls close(). A plugin that feeds or drains fd from a thread of its own sees
 * the host's end close early on a failure or a cancel (EPIPE; prefer a socketpair and
 * MSG_NOSIGNAL, or ignore SIGPIPE). */
typedef struct airlock_transfer_v1 {
  uint32_t struct_size; /* set by the host */
  int fd;               /* passed to the host, which closes it before close() */
  char format[16];      /* OUT: "tar", "tar.gz", "tar.zst" or "zip", as the destination wants */
  char display[512];    /* the location with any credentials removed: audit, review, errors */
  uint64_t size;        /* IN: the bytes to come when known (review sees it), else 0 */
  void* handle;         /* the plugin's */
} airlock_transfer_v1;

typedef struct airlock_transfer_ops_v1 {
  uint32_t struct_size;
  /* The location prefixes this plugin takes ("https://", "hostdir:"), NULL-terminated; static.
   * "" takes local paths. The longest matching prefix of any loaded plugin wins. */
  const char* const* prefixes;
  /* Checks the request against rules_json and opens the source or destination. Errors name the
   * location (as display) and the rule. */
  int (*open)(void* instance, const airlock_transfer_request_v1* request,
              airlock_transfer_v1* out, airlock_error_v1* err);
  /* Once per successful open, after the host's last read or write. ok = 1: the sandbox side
   * succeeded; an upload is completed, a file moved into place; an error here (a download cut
   * short, an upload refused) fails the transfer, and for IN makes the helper discard what it
   * unpacked. ok = 0: discard anything partial. */
  int (*close)(void* instance, airlock_transfer_v1* transfer, int ok, airlock_error_v1* err);
} airlock_transfer_ops_v1;

/* ---------------------------------------------------------------------------------------------
 * The plugin descriptor. Static; returned by the entry point. */
typedef struct airlock_plugin_v1 {
  uint32_t struct_size; /* sizeof(airlock_plugin_v1) as the plugin was compiled */
  uint16_t abi_major;   /* AIRLOCK_PLUGIN_ABI_MAJOR */
  uint16_t abi_minor;   /* AIRLOCK_PLUGIN_ABI_MINOR */
  const char* name;     /* dotted, kind first: "airlock.language.python"; static */
  const char* version;  /* the plugin's own version; static */
  uint32_t kind;        /* airlock_plugin_kind_v1 */
  /* Creates an instance. config is the plugin's TOML table re-serialized as JSON ("{}" when the
   * policy has none); borrowed. Returns NULL and fills *err on failure. */
  void* (*create)(const airlock_host_v1* host, const char* config_json, airlock_error_v1* err);
  void (*destroy)(void* instance);
  /* airlock_isolation_ops_v1*, airlock_language_ops_v1*, airlock_transfer_ops_v1* (since 1.8)
   * or airlock_review_ops_v1*, by kind; static */
  const void* ops;
} airlock_plugin_v1;

typedef const airlock_plugin_v1* (*airlock_plugin_entry_v1_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* AIRLOCK_PLUGIN_ABI_V1_H */
