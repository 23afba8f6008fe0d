// airlock fleet haproxy: HAProxy's configuration for a fleet of supervisors, from the node list
// (docs/deploy.md). A small generator, so routing, health checks and balancing stay HAProxy's.
#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>

#include "airlock/whole_file.h"
#include "supervisor/cli/cli.h"
#include "supervisor/fleet/haproxy_config.h"
#include "supervisor/sandbox/run_result.h"

namespace po = boost::program_options;

namespace airlock::cli {

namespace {

constexpr const char* kFleetUsage =
    R"(Usage: airlock fleet haproxy --nodes FILE --out FILE [options]

Writes HAProxy's configuration for a fleet of `airlock serve` nodes behind one endpoint
(docs/deploy.md): calls on a sandbox go to the node its id names, new sandboxes to a node with
room (each node's agent-check weight), a dead node's sandboxes answer 503 naming it. FILE lists
one node a line: NAME HOST:PORT [agent=PORT], NAME being that node's server.node.

Options)";

// Written beside the target and renamed over it, so a reloading HAProxy never reads half a file.
bool writeAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".new";
  if (auto r = writeWholeFile(tmp, text); !r) {
    printError("fleet haproxy: " + r.error().message());
    return false;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    printError("fleet haproxy: rename " + tmp + " to " + path + ": " + ec.message());
    return false;
  }
  return true;
}

}  // namespace

int fleetCommand(const std::vector<std::string>& args) {
  po::options_description opts(kFleetUsage);
  std::string nodes_file, out, map;
  uint16_t agent_port = 8444;
  fleet::HaproxyOptions o;
  opts.add_options()("help,h", "this text")("nodes", po::value(&nodes_file),
                                            "the node list (required)")(
      "out", po::value(&out), "haproxy.cfg to write (required)")(
      "map", po::value(&map),
      "the map file from node to backend (default: airlock-nodes.map beside --out)")(
      "listen", po::value(&o.listen)->composing(),
      "an HAProxy bind line, repeatable (default: unix@/run/airlock/fleet.sock mode 660); e.g. "
      "':8443 ssl crt /etc/airlock/proxy.pem'")("ca", po::value(&o.ca_file),
                                                "CA that signed the nodes' TLS certificates")(
      "client-cert", po::value(&o.client_cert),
      "PEM certificate and key the proxy shows nodes that ask for one (server.tls_client_ca)")(
      "verify-host", po::value(&o.verify_host),
      "name every node's certificate carries (default: each node's own name)")(
      "agent-port", po::value(&agent_port)->default_value(8444),
      "nodes' agent-check port (server.agent_check) unless their line says agent=PORT")(
      "admin-socket", po::value(&o.admin_socket), "HAProxy's runtime API socket (stats socket)")(
      "user", po::value(&o.user),
      "the user HAProxy drops to after binding, e.g. haproxy (Debian's package makes it)")(
      "group", po::value(&o.group), "the group HAProxy drops to after binding, e.g. haproxy")(
      "check-interval-ms", po::value(&o.check_interval_ms)->default_value(250),
      "health check period: a dead node is out after two")(
      "agent-interval-ms", po::value(&o.agent_interval_ms)->default_value(1000),
      "how often each node's free capacity is read");
  // The one subcommand, then its options.
  const bool haproxy = !args.empty() && args.front() == "haproxy";
  if (!haproxy && !wantsHelp(args)) {
    printError("fleet: expected 'airlock fleet haproxy --nodes FILE --out FILE' (see --help)");
    return sandbox::kExitAirlockError;
  }
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(std::vector<std::string>(args.begin() + haproxy, args.end()))
                  .options(opts)
                  .run(),
              vm);
    po::notify(vm);
  } catch (const po::error& e) {
    printError(std::string("fleet: ") + e.what());
    return sandbox::kExitAirlockError;
  }
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (nodes_file.empty() || out.empty()) {
    printError("fleet haproxy: --nodes and --out are required");
    return sandbox::kExitAirlockError;
  }
  if (o.check_interval_ms == 0 || o.agent_interval_ms == 0) {
    printError("fleet haproxy: intervals must be at least 1 ms");
    return sandbox::kExitAirlockError;
  }
  auto text = readWholeFile(nodes_file);
  if (!text) {
    printError("fleet haproxy: " + text.error().message());
    return sandbox::kExitAirlockError;
  }
  auto nodes = fleet::parseNodeList(*text, nodes_file, agent_port);
  if (!nodes) {
    printError("fleet haproxy: " + nodes.error().message());
    return sandbox::kExitAirlockError;
  }
  if (o.listen.empty()) o.listen.push_back("unix@/run/airlock/fleet.sock mode 660");
  o.map_path = map.empty()
                   ? (std::filesystem::absolute(out).parent_path() / "airlock-nodes.map").string()
                   : std::filesystem::absolute(map).string();
  auto config = fleet::renderHaproxy(*nodes, o);
  if (!config) {
    printError("fleet haproxy: " + config.error().message());
    return sandbox::kExitAirlockError;
  }
  // The map first: the configuration names it.
  if (!writeAtomically(o.map_path, config->map) || !writeAtomically(out, config->config))
    return sandbox::kExitAirlockError;
  std::cerr << "airlock: fleet haproxy: " << nodes->size() << " nodes: wrote " << out << " and "
            << o.map_path << "\n";
  return 0;
}

}  // namespace airlock::cli
