#include "supervisor/fleet/haproxy_config.h"

#include <arpa/inet.h>

#include <charconv>
#include <initializer_list>
#include <set>
#include <sstream>

#include "airlock/policy/policy.h"

namespace airlock::fleet {

namespace {

std::vector<std::string> words(std::string_view line) {
  std::vector<std::string> out;
  std::istringstream in{std::string(line)};
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool parsePort(std::string_view text, uint16_t& port) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 1 ||
      value > 65535)
    return false;
  port = static_cast<uint16_t>(value);
  return true;
}

// A DNS name HAProxy resolves at start: letters, digits, '-' and '.'.
bool hostName(std::string_view h) {
  if (h.empty() || h.size() > 253) return false;
  for (char c : h)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') return false;
  return true;
}

bool loopback(const std::string& host) {
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  return host == "::1" || host == "localhost";
}

// HAProxy's address syntax: IPv6 in brackets becomes "ipv6@ADDR:PORT" (the bare form is
// ambiguous with its colons).
std::string address(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "ipv6@" + host + ":" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

// A JSON error body as the API writes them, in an HAProxy `string` argument: single-quoted,
// so its double quotes need no escape (node names have no quote or backslash).
std::string errorJson(const std::string& code, const std::string& message) {
  return "'{\"error\":{\"code\":\"" + code + "\",\"message\":\"" + message + "\"}}'";
}

}  // namespace

Result<std::vector<Node>> parseNodeList(std::string_view text, std::string_view source,
                                        uint16_t default_agent_port) {
  std::vector<Node> nodes;
  std::set<std::string> names;
  std::set<std::string> endpoints;
  int number = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++number;
    if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    auto w = words(line);
    if (w.empty()) continue;
    const std::string at = std::string(source) + ":" + std::to_string(number) + ": ";
    if (w.size() < 2 || w.size() > 3)
      return fail(at + "expected 'NAME HOST:PORT [agent=PORT]', e.g. 'node-1 10.0.0.5:8443'");
    Node n;
    n.name = w[0];
    n.line = number;
    if (!policy::validNodeName(n.name))
      return fail(at + "node name '" + n.name +
                  "': use 1 to 63 of a-z 0-9 . - (no '_'), starting and ending with a letter or "
                  "digit, as the node's server.node");
    if (!names.insert(n.name).second) return fail(at + "node '" + n.name + "' is listed twice");
    const std::string& ep = w[1];
    std::string port_text;
    if (ep.front() == '[') {
      size_t close = ep.find(']');
      if (close == std::string::npos || close + 1 >= ep.size() || ep[close + 1] != ':')
        return fail(at + "'" + ep + "': expected [IPV6]:PORT");
      n.host = ep.substr(1, close - 1);
      in6_addr v6{};
      if (inet_pton(AF_INET6, n.host.c_str(), &v6) != 1)
        return fail(at + "'" + n.host + "' is not an IPv6 address");
      port_text = ep.substr(close + 2);
    } else {
      size_t colon = ep.rfind(':');
      if (colon == std::string::npos || ep.find(':') != colon)
        return fail(at + "'" + ep + "': expected HOST:PORT (an IPv6 address in brackets)");
      n.host = ep.substr(0, colon);
      if (!hostName(n.host)) return fail(at + "'" + n.host + "' is not an address or host name");
      port_text = ep.substr(colon + 1);
    }
    if (!parsePort(port_text, n.port)) return fail(at + "'" + ep + "': port must be 1..65535");
    n.agent_port = default_agent_port;
    if (w.size() == 3) {
      if (!w[2].starts_with("agent=") || !parsePort(w[2].substr(6), n.agent_port))
        return fail(at + "'" + w[2] + "': expected agent=PORT (the node's server.agent_check)");
    }
    if (!endpoints.insert(address(n.host, n.port)).second)
      return fail(at + "'" + ep + "' is another node's address too");
    nodes.push_back(std::move(n));
  }
  if (nodes.empty()) return fail(std::string(source) + ": lists no node");
  return nodes;
}

Result<HaproxyConfig> renderHaproxy(const std::vector<Node>& nodes, const HaproxyOptions& o) {
  if (o.listen.empty()) return fail("no listen address for the proxy (--listen)");
  // Each value becomes one HAProxy token (a path, a name) or one bind line: a space would split
  // the token and a line break would start a directive of its own.
  for (const auto& [option, value] : std::initializer_list<std::pair<const char*, std::string>>{
           {"--map", o.map_path},
           {"--ca", o.ca_file},
           {"--client-cert", o.client_cert},
           {"--verify-host", o.verify_host},
           {"--admin-socket", o.admin_socket},
           {"--user", o.user},
           {"--group", o.group}}) {
    if (value.find_first_of(" \t\r\n#") != std::string::npos)
      return fail(std::string(option) + " '" + value +
                  "': no spaces, tabs, line breaks or '#' (it is one HAProxy word)");
  }
  for (const auto& l : o.listen)
    if (l.empty() || l.find_first_of("\r\n") != std::string::npos)
      return fail("--listen '" + l + "': one bind line, not empty and without line breaks");
  if (o.map_path.empty() || o.map_path.front() != '/')
    return fail("the map file's path must be absolute (--map)", o.map_path);
  for (const auto& n : nodes)
    if (o.ca_file.empty() && !loopback(n.host))
      return fail("node '" + n.name + "' at " + address(n.host, n.port) +
                  " speaks TLS (server.tcp on a non-loopback address needs it): give the CA "
                  "that signed the nodes' certificates (--ca)");

  // Every server line's TLS and check settings. A dead node is marked down on the first
  // refused connection of a real request (observe layer4), else after two failed checks.
  std::string tls;
  if (!o.ca_file.empty()) {
    tls = " ssl verify required ca-file " + o.ca_file;
    if (!o.client_cert.empty()) tls += " crt " + o.client_cert;
  }
  const std::string inter = std::to_string(o.check_interval_ms);
  auto serverLine = [&](const Node& n, const std::string& extra) {
    std::string line = "  server " + n.name + " " + address(n.host, n.port) + tls;
    if (!o.ca_file.empty())
      line += " verifyhost " + (o.verify_host.empty() ? n.name : o.verify_host) + " sni str(" +
              (o.verify_host.empty() ? n.name : o.verify_host) + ")";
    return line + extra + "\n";
  };

  std::string nodes_json;
  for (const auto& n : nodes) nodes_json += (nodes_json.empty() ? "\"" : ",\"") + n.name + "\"";

  std::ostringstream c;
  c << "# Made by `airlock fleet haproxy` from the node list (" << nodes.size()
    << " nodes): make it again rather than editing it (docs/deploy.md).\n"
    << "global\n"
    << "  log stderr format short local0 info\n";
  if (!o.user.empty()) c << "  user " << o.user << "\n";
  if (!o.group.empty()) c << "  group " << o.group << "\n";
  if (!o.admin_socket.empty())
    c << "  stats socket " << o.admin_socket << " mode 600 level admin\n";
  c << "\n"
    << "defaults\n"
    << "  mode http\n"
    << "  log global\n"
    << "  option dontlognull\n  option httplog\n"
    // A dead node refuses at once; a silent one (its host gone) is given up after a second.
    << "  timeout connect 1s\n"
    << "  timeout http-request 10s\n"
    // Calls wait for code that runs for minutes and streams stay open: the supervisor's own
    // limits (io_timeout_s, the profiles' timeouts) bound them, not the proxy.
    << "  timeout client 1h\n"
    << "  timeout server 1h\n"
    << "  timeout tunnel 1h\n"
    << "  retries 1\n"
    << "\n"
    << "frontend airlock\n";
  for (const auto& l : o.listen) c << "  bind " << l << "\n";
  c << "  # The proxy's own answers: its liveness, and the fleet's nodes.\n"
    << "  http-request return status 200 content-type application/json string "
       "'{\"status\":\"ok\",\"fleet\":true}' if { path /healthz } !{ url_param(node) -m found }\n"
    << "  http-request return status 200 content-type application/json string '{\"nodes\":["
    << nodes_json << "]}' if { path /v1/fleet } { method GET }\n"
    << "  # The node a call is for: ?node= where the caller chooses (a list, a placement), else\n"
    << "  # the prefix of the id in its path (sandbox, port link, review) or of its MCP session.\n"
    << "  http-request set-var(txn.node) url_param(node) if { url_param(node) -m found }\n"
    << "  http-request set-var(txn.node) path,field(4,/),field(1,_) if { path_reg "
       "^/v1/(sandboxes|ports|reviews)/[^/]+ }\n"
    << "  http-request set-var(txn.node) req.hdr(mcp-session-id),field(1,_) if { path /mcp } { "
       "req.hdr(mcp-session-id) -m found }\n"
    << "  # HAProxy cannot merge the nodes' lists: a list is per node, and says so.\n"
    << "  http-request return status 400 content-type application/json string "
    << errorJson("bad_request",
                 "this fleet lists per node: add ?node=NAME (GET /v1/fleet names the nodes)")
    << " if { path /v1/sandboxes /v1/reviews /v1/workspaces /metrics } { method GET } !{ "
       "var(txn.node) -m found }\n"
    << "  http-request return status 400 content-type application/json string "
    << errorJson("bad_request",
                 "workspaces live on one node: add ?node=NAME (GET /v1/fleet names the nodes)")
    << " if { path_beg /v1/workspaces/ } !{ var(txn.node) -m found }\n"
    << "  use_backend %[var(txn.node),map(" << o.map_path
    << ",fleet_unknown_node)] if { var(txn.node) -m found }\n"
    << "  # Everything else starts something new (a sandbox, a one-shot run, an MCP session):\n"
    << "  # where there is room.\n"
    << "  default_backend fleet_place\n"
    << "\n"
    << "backend fleet_unknown_node\n"
    << "  http-request return status 404 content-type application/json string "
    << errorJson("not_found", "no node of this fleet holds that id (GET /v1/fleet names the nodes)")
    << "\n\n";

  // New work: every node, weighted by the free capacity its agent-check reports ("up ready
  // N%" of a weight of 1 is N/100 sandboxes; "drain" when full). Its servers are checked on
  // their own rather than tracking the nodes' backends: a create refused by a dead node marks
  // it down here at once (observe), and is sent to another node after the shortest wait
  // HAProxy allows, min(1 s, timeout connect).
  const std::string check =
      " check inter " + inter + " fall 2 rise 2 observe layer4 error-limit 1 on-error mark-down";
  c << "backend fleet_place\n"
    << "  balance roundrobin\n"
    << "  option redispatch\n"
    << "  retry-on conn-failure\n"
    << "  timeout connect 250ms\n"
    << "  http-error status 503 content-type application/json string "
    << errorJson("unavailable", "no node of this fleet is up with room for it") << "\n";
  for (const auto& n : nodes)
    c << serverLine(n, " weight 1" + check + " agent-check agent-addr " + n.host + " agent-port " +
                           std::to_string(n.agent_port) + " agent-inter " +
                           std::to_string(o.agent_interval_ms));
  c << "\n";

  // One backend a node, for calls on what it holds. Down, it answers 503 naming the node.
  std::string map;
  for (const auto& n : nodes) {
    c << "backend node_" << n.name
      << "\n"
      // Its one server down or refusing: no retry (HAProxy would wait a second before it).
      << "  retries 0\n"
      << "  http-error status 503 content-type application/json string "
      << errorJson("unavailable", "node " + n.name + " is unavailable") << "\n"
      << "  http-error status 502 content-type application/json string "
      << errorJson("bad_gateway", "node " + n.name + " ended the connection before answering")
      << "\n"
      << serverLine(n, check);
    c << "\n";
    map += n.name + " node_" + n.name + "\n";
  }
  return HaproxyConfig{c.str(), map};
}

}  // namespace airlock::fleet
