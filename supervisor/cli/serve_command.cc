// airlock serve: policy → service → HTTP server, then wait for signals.
//
// SIGTERM/SIGINT drain: new requests get 503, requests in flight may finish for the policy's
// server.drain_timeout_s, then every sandbox is destroyed and the socket removed. SIGHUP reloads
// the policy file for new sandboxes; a bad file is refused and the old policy stays.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>

#include "supervisor/api/agent_check.h"
#include "supervisor/api/server.h"
#include "supervisor/cli/cli.h"
#include "supervisor/cli/default_policy.h"
#include "supervisor/log/log.h"
#include "supervisor/plugin/registry.h"
#include "supervisor/sandbox/manager.h"
#include "supervisor/sandbox/run_result.h"

namespace po = boost::program_options;

namespace airlock::cli {

namespace {

constexpr const char* kServeUsage = R"(Usage: airlock serve [options]

Runs the supervisor: sandboxes that live across requests, driven over HTTP+JSON on a Unix socket
(docs/api.md). Stops on SIGTERM or SIGINT after draining requests in flight; every sandbox is
destroyed on the way out.

Options)";

// The installed policy (cmake --install puts policy/examples/reference.toml there).
const char* const kDefaultPolicy = defaultPolicyPath();

// The listener settings of the policy's [server] table and its tenants' tokens.
api::ServerOptions serverOptionsFrom(const policy::Policy& pol) {
  api::ServerOptions o;
  o.socket_path = pol.server.socket;
  o.socket_mode = pol.server.socketModeBits();
  o.socket_group = pol.server.socket_group;
  o.tcp_listen = pol.server.tcp;
  o.tls_cert = pol.server.tls_cert;
  o.tls_key = pol.server.tls_key;
  o.tls_client_ca = pol.server.tls_client_ca;
  o.node = pol.server.node;
  o.mcp_max_sessions_per_tenant = pol.server.mcp_max_sessions_per_tenant;
  o.mcp_session_idle_timeout = std::chrono::seconds(pol.server.mcp_idle_timeout_s);
  for (const auto& [name, tenant] : pol.tenants)
    if (!tenant.token_sha256.empty()) o.token_sha256_to_tenant[tenant.token_sha256] = name;
  o.max_connections = pol.server.max_connections;
  o.max_connections_per_client = pol.server.max_connections_per_client;
  o.max_requests = pol.server.max_requests;
  o.max_requests_per_client = pol.server.max_requests_per_client;
  o.idle_timeout = std::chrono::seconds(pol.server.idle_timeout_s);
  o.header_timeout = std::chrono::seconds(pol.server.header_timeout_s);
  o.io_timeout = std::chrono::seconds(pol.server.io_timeout_s);
  o.max_json_body = static_cast<size_t>(pol.server.max_json_body_kb) << 10;
  o.max_upload_bytes = pol.server.max_upload_mb << 20;
  // The server's problems (a failed accept, a handler's exception, a TLS handshake).
  o.log = [](std::string_view line) { log::warn("api.problem", {{"message", line}}); };
  return o;
}

// Every connection is a descriptor, so server.max_connections needs room under the soft limit,
// which is often 1024 outside systemd (whose unit sets LimitNOFILE). Raised toward the hard
// limit, never lowered; each sandbox sets its own limit for what runs inside.
void raiseOpenFileLimit(uint32_t max_connections) {
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) != 0) return;
  const rlim_t wanted = std::min<rlim_t>(nofile.rlim_max, 4 * rlim_t{max_connections} + 4096);
  if (nofile.rlim_cur >= wanted) return;
  nofile.rlim_cur = wanted;
  if (setrlimit(RLIMIT_NOFILE, &nofile) != 0) return;
  if (wanted < rlim_t{max_connections} + 1024) {
    log::warn("serve.open_file_limit",
              {{"limit", static_cast<uint64_t>(wanted)}, {"max_connections", max_connections}});
  }
}

// The log's level and format: the flag when given, else the policy's [server] key (validated
// with the policy). A bad flag is refused before anything starts.
bool configureLog(const policy::Policy& pol, const std::string& level_flag,
                  const std::string& format_flag) {
  auto level = log::parseLevel(level_flag.empty() ? pol.server.log_level : level_flag);
  if (!level) {
    printError("serve: --log-level '" + level_flag +
               "': expected 'debug', 'info', 'warn' or 'error'");
    return false;
  }
  auto format = log::parseFormat(format_flag.empty() ? pol.server.log_format : format_flag);
  if (!format) {
    printError("serve: --log-format '" + format_flag + "': expected 'text' or 'json'");
    return false;
  }
  log::configure(*level, *format);
  return true;
}

}  // namespace

int serveCommand(const std::vector<std::string>& args) {
  po::options_description opts(kServeUsage);
  std::string socket_path, policy_file, state_dir, log_level, log_format, node;
  opts.add_options()("help,h", "this text")(
      "socket", po::value(&socket_path),
      "Unix socket to listen on (default: the policy's server.socket)")(
      "policy", po::value(&policy_file),
      "policy file (default: the installed policy.toml when it exists, else built-in)")(
      "state-dir", po::value(&state_dir)->default_value("/run/airlock"),
      "runtime state: sandbox locks, uid leases, scratch")(
      "node", po::value(&node),
      "this supervisor's name in a fleet behind one proxy: every sandbox id begins '<node>_' "
      "(docs/deploy.md) (default: the policy's server.node)")(
      "log-level", po::value(&log_level),
      "lowest level logged to stderr: debug, info, warn or error (default: the policy's "
      "server.log_level, info)")(
      "log-format", po::value(&log_format),
      "log line format: text (key=value) or json (one object per line) (default: the policy's "
      "server.log_format, text)");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(opts).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    printError(std::string("serve: ") + e.what());
    return sandbox::kExitAirlockError;
  }
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (geteuid() != 0) {
    printError("serve: must run as root (it creates namespaces, cgroups and mounts)");
    return sandbox::kExitAirlockError;
  }
  if (policy_file.empty() && std::filesystem::exists(kDefaultPolicy)) policy_file = kDefaultPolicy;
  auto pol = policy_file.empty() ? Result<policy::Policy>(policy::builtinDefault())
                                 : policy::loadFile(policy_file);
  if (!pol) {
    printError(pol.error().message());
    return sandbox::kExitAirlockError;
  }
  if (!configureLog(*pol, log_level, log_format)) return sandbox::kExitAirlockError;
  if (vm.count("node")) {
    if (node.empty() || !policy::validNodeName(node)) {
      printError("serve: --node '" + node +
                 "': use 1 to 63 of a-z 0-9 . - (no '_'), starting and ending with a letter or "
                 "digit");
      return sandbox::kExitAirlockError;
    }
    pol->server.node = node;
  }
  for (const auto& r : policy::relaxations(*pol)) log::warn("policy.relaxation", {{"what", r}});

  // Signals are taken synchronously by this thread only: block them before any thread starts
  // so every thread inherits the mask.
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, s);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not kill the supervisor
  raiseOpenFileLimit(pol->server.max_connections);

  sandbox::ManagerOptions so;
  so.policy = *pol;
  so.plugin_dir = plugin::defaultPluginDir();
  so.agent_path = plugin::defaultAgentPath();
  so.state_dir = state_dir;
  so.workspace_dir = pol->server.state_dir + "/workspaces";
  so.node = pol->server.node;
  auto svc = sandbox::Manager::start(std::move(so));
  if (!svc) {
    printError("serve: " + svc.error().message());
    return sandbox::kExitAirlockError;
  }

  api::ServerOptions server_opts = serverOptionsFrom(*pol);
  if (!socket_path.empty()) server_opts.socket_path = socket_path;
  auto server = api::Server::start(**svc, server_opts);
  if (!server) {
    printError("serve: " + server.error().message());
    return sandbox::kExitAirlockError;
  }
  // A fleet's proxy weighs this node by what it answers here (docs/deploy.md).
  std::unique_ptr<api::AgentCheckListener> agent_check;
  if (!pol->server.agent_check.empty()) {
    auto started = api::AgentCheckListener::start(
        pol->server.agent_check, [m = svc->get()] { return m->capacity().agentCheckLine(); });
    if (!started) {
      printError("serve: server.agent_check: " + started.error().message());
      return sandbox::kExitAirlockError;
    }
    agent_check = std::move(*started);
  }
  log::info("serve.start", {{"socket", "unix://" + server_opts.socket_path},
                            {"tcp", server_opts.tcp_listen.empty()
                                        ? std::string()
                                        : (server_opts.tls_cert.empty() ? "http://" : "https://") +
                                              server_opts.tcp_listen},
                            {"client_certificates", !server_opts.tls_client_ca.empty()},
                            {"node", pol->server.node},
                            {"agent_check", pol->server.agent_check},
                            {"policy", pol->source},
                            {"policy_sha256", pol->hash.substr(0, 12)},
                            {"version", AIRLOCK_VERSION}});

  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (sig == SIGHUP) {
      // A bad new file is refused and the running policy stays.
      auto next = policy_file.empty() ? Result<policy::Policy>(policy::builtinDefault())
                                      : policy::loadFile(policy_file);
      if (!next) {
        log::error("policy.reload",
                   {{"error", next.error().message()}, {"effect", "keeping the current policy"}});
        continue;
      }
      for (const auto& r : policy::relaxations(*next))
        log::warn("policy.relaxation", {{"what", r}});
      log::info("policy.reload",
                {{"policy_sha256", next->hash.substr(0, 12)},
                 {"effect",
                  "new sandboxes use it, running ones keep theirs; [server] changes (the log's "
                  "too) need a restart"}});
      (*svc)->reloadPolicy(std::move(*next));
      continue;
    }
    log::info("serve.drain", {{"signal", sigabbrev_np(sig)}});
    break;
  }
  (*svc)->drain();  // the agent-check now answers "drain": the proxy places nothing new here
  (*server)->drain(std::chrono::seconds(pol->server.drain_timeout_s));
  (*server)->stop();
  size_t n = (*svc)->sandboxCount();
  (*svc)->destroyAll();
  log::info("serve.stop", {{"sandboxes_destroyed", n}});
  return 0;
}

}  // namespace airlock::cli
