// A fleet of `airlock serve` nodes behind one HAProxy (docs/deploy.md): the node list an operator
// writes, and the HAProxy configuration made from it by `airlock fleet haproxy`.
//
// The routing is HAProxy's own: every id a node hands out (sandbox, port link, review, MCP
// session) begins "<node>_", and a map file sends the part before the first '_' to that node's
// backend. New sandboxes go to a backend of every node, balanced by the weights the nodes
// publish on their agent-check port (free capacity). Health checks and 503s naming a dead node
// are HAProxy's too. Nothing here proxies a byte: it only writes text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/result.h"

namespace airlock::fleet {

struct Node {
  std::string name;     // server.node of that supervisor: [a-z0-9.-], no '_'
  std::string host;     // IP address or DNS name, as HAProxy will connect to it
  uint16_t port = 0;    // its server.tcp port
  uint16_t agent_port;  // its server.agent_check port
  int line = 0;         // where the node list names it
};

// The node list: one node a line, "NAME HOST:PORT [agent=PORT]"; '#' starts a comment. IPv6
// hosts go in brackets. Errors name the source and line ("nodes.txt:3: ...").
Result<std::vector<Node>> parseNodeList(std::string_view text, std::string_view source,
                                        uint16_t default_agent_port);

struct HaproxyOptions {
  std::vector<std::string> listen;  // bind lines' arguments ("unix@/run/airlock/fleet.sock")
  std::string map_path;             // absolute path of the map file, as HAProxy will read it
  std::string ca_file;              // verify nodes' TLS with it; "": plain HTTP (loopback only)
  std::string client_cert;          // PEM (cert + key) the proxy shows nodes; "": none
  std::string verify_host;          // name every node's certificate must carry; "": the node's
  std::string admin_socket;         // HAProxy's runtime API (stats socket); "": none
  // The user and group HAProxy drops to once its sockets are bound (global user/group), e.g.
  // Debian's "haproxy"; "": it keeps the user it was started as (a container's non-root user).
  std::string user;
  std::string group;
  uint32_t check_interval_ms = 250;   // health check period; a dead node is out in ~2 of them
  uint32_t agent_interval_ms = 1000;  // how often each node's free capacity is read
};

// The configuration (haproxy.cfg) and the map file ("<node> node_<node>" lines) it reads.
struct HaproxyConfig {
  std::string config;
  std::string map;
};

// Errors: a node on a non-loopback address without `ca_file` (nodes speak TLS there, and a
// bearer token must not cross the network in clear).
Result<HaproxyConfig> renderHaproxy(const std::vector<Node>& nodes, const HaproxyOptions& options);

}  // namespace airlock::fleet
