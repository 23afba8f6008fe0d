// The fleet's pieces that need no root: the node list, the HAProxy configuration made from it,
// a node's capacity line, and the agent-check listener answering it. The whole fleet, with the
// real HAProxy in front of real nodes, is tests/fleet/test_fleet.py.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "airlock/policy/policy.h"
#include "supervisor/api/agent_check.h"
#include "supervisor/fleet/haproxy_config.h"
#include "supervisor/sandbox/service.h"

namespace airlock {
namespace {

TEST(FleetNodeNames, AreDnsLikeWithoutTheIdSeparator) {
  for (const char* good : {"n1", "node-1", "ip-10-0-1-23.ec2.internal", "a"})
    EXPECT_TRUE(policy::validNodeName(good)) << good;
  for (const char* bad : {"n_1", "-n1", "n1-", ".n1", "N1", "n 1", "n1/2"})
    EXPECT_FALSE(policy::validNodeName(bad)) << bad;
  EXPECT_FALSE(policy::validNodeName(std::string(64, 'a')));
  EXPECT_TRUE(policy::validNodeName(""));  // not in a fleet
}

TEST(FleetPolicy, NodeAndAgentCheckAreValidatedWithTheirKey) {
  auto ok = policy::parse(
      "schema = 1\n[server]\nnode = \"node-1\"\nagent_check = \"0.0.0.0:8444\"\n", "p.toml");
  ASSERT_TRUE(ok) << ok.error().message();
  EXPECT_EQ(ok->server.node, "node-1");
  EXPECT_EQ(ok->server.agent_check, "0.0.0.0:8444");
  auto bad_node = policy::parse("schema = 1\n[server]\nnode = \"n_1\"\n", "p.toml");
  ASSERT_FALSE(bad_node);
  EXPECT_NE(bad_node.error().message().find("server.node = 'n_1': use 1 to 63 of a-z 0-9 . -"),
            std::string::npos)
      << bad_node.error().message();
  auto bad_agent = policy::parse("schema = 1\n[server]\nagent_check = \"8444\"\n", "p.toml");
  ASSERT_FALSE(bad_agent);
  EXPECT_NE(bad_agent.error().message().find("server.agent_check = '8444': expected HOST:PORT"),
            std::string::npos)
      << bad_agent.error().message();
}

TEST(FleetNodeList, ParsesNodesCommentsAndAgentPorts) {
  auto nodes = fleet::parseNodeList(
      "# the fleet\n\nn1 10.0.0.11:8443\n  n2   10.0.0.12:8443 agent=9444  # spare\n"
      "n3 [fd00::3]:8443\nn4 node-4.example:8443\n",
      "nodes.txt", 8444);
  ASSERT_TRUE(nodes) << nodes.error().message();
  ASSERT_EQ(nodes->size(), 4u);
  EXPECT_EQ((*nodes)[0].name, "n1");
  EXPECT_EQ((*nodes)[0].host, "10.0.0.11");
  EXPECT_EQ((*nodes)[0].port, 8443);
  EXPECT_EQ((*nodes)[0].agent_port, 8444);
  EXPECT_EQ((*nodes)[1].agent_port, 9444);
  EXPECT_EQ((*nodes)[1].line, 4);
  EXPECT_EQ((*nodes)[2].host, "fd00::3");
  EXPECT_EQ((*nodes)[3].host, "node-4.example");
}

TEST(FleetNodeList, BadLinesNameTheFileAndLine) {
  struct Case {
    const char* text;
    const char* error;
  };
  for (auto c : std::initializer_list<Case>{
           {"n1 10.0.0.1:8443\nn_2 10.0.0.2:8443\n", "nodes.txt:2: node name 'n_2'"},
           {"n1 10.0.0.1:8443\nn1 10.0.0.2:8443\n", "nodes.txt:2: node 'n1' is listed twice"},
           {"n1 10.0.0.1:8443\nn2 10.0.0.1:8443\n", "nodes.txt:2: '10.0.0.1:8443' is another"},
           {"n1 10.0.0.1\n", "nodes.txt:1: '10.0.0.1': expected HOST:PORT"},
           {"n1 10.0.0.1:0\n", "nodes.txt:1: '10.0.0.1:0': port must be 1..65535"},
           {"n1 fd00::1:8443\n", "nodes.txt:1: 'fd00::1:8443': expected HOST:PORT"},
           {"n1 [zz::1]:8443\n", "nodes.txt:1: 'zz::1' is not an IPv6 address"},
           {"n1 10.0.0.1:8443 agent=x\n", "nodes.txt:1: 'agent=x': expected agent=PORT"},
           {"n1\n", "nodes.txt:1: expected 'NAME HOST:PORT [agent=PORT]'"},
           {"# nothing\n", "nodes.txt: lists no node"},
       }) {
    auto r = fleet::parseNodeList(c.text, "nodes.txt", 8444);
    ASSERT_FALSE(r) << c.text;
    EXPECT_NE(r.error().message().find(c.error), std::string::npos) << r.error().message();
  }
}

fleet::HaproxyOptions tlsOptions() {
  fleet::HaproxyOptions o;
  o.listen = {"unix@/run/airlock/fleet.sock mode 660"};
  o.map_path = "/etc/haproxy/airlock-nodes.map";
  o.ca_file = "/etc/airlock/ca.crt";
  o.client_cert = "/etc/airlock/proxy.pem";
  o.verify_host = "airlock-node";
  o.user = "haproxy";
  o.group = "haproxy";
  return o;
}

TEST(FleetHaproxy, RoutesIdsThroughTheMapAndPlacesByAgentWeights) {
  auto nodes = fleet::parseNodeList("n1 10.0.0.11:8443\nn2 10.0.0.12:8443 agent=9444\n", "f", 8444);
  ASSERT_TRUE(nodes);
  auto cfg = fleet::renderHaproxy(*nodes, tlsOptions());
  ASSERT_TRUE(cfg) << cfg.error().message();
  EXPECT_EQ(cfg->map, "n1 node_n1\nn2 node_n2\n");
  const std::string& c = cfg->config;
  auto has = [&](const std::string& s) {
    EXPECT_NE(c.find(s), std::string::npos) << "missing: " << s << "\n" << c;
  };
  has("bind unix@/run/airlock/fleet.sock mode 660");
  has("  user haproxy\n  group haproxy\n");
  // The node before the first '_' of an id, or the session's, looked up in the map.
  has("path,field(4,/),field(1,_)");
  has("req.hdr(mcp-session-id),field(1,_)");
  has("use_backend %[var(txn.node),map(/etc/haproxy/airlock-nodes.map,fleet_unknown_node)]");
  has("default_backend fleet_place");
  // Placement: weight 1 scaled by each node's agent-check, its own port where the list says.
  has("agent-check agent-addr 10.0.0.11 agent-port 8444");
  has("agent-check agent-addr 10.0.0.12 agent-port 9444");
  // Nodes over TLS, checked against the CA and the shared name, with the proxy's certificate.
  has("server n1 10.0.0.11:8443 ssl verify required ca-file /etc/airlock/ca.crt crt "
      "/etc/airlock/proxy.pem verifyhost airlock-node");
  // A dead node: marked down on the first refused connection, and named in the 503.
  has("observe layer4 error-limit 1 on-error mark-down");
  has("\"message\":\"node n2 is unavailable\"");
  has("{\"nodes\":[\"n1\",\"n2\"]}");
  has("this fleet lists per node: add ?node=NAME");
}

TEST(FleetHaproxy, RefusesCleartextToANodeOffLoopback) {
  auto nodes = fleet::parseNodeList("n1 127.0.0.1:8720\nn2 10.0.0.12:8443\n", "f", 8444);
  ASSERT_TRUE(nodes);
  auto o = tlsOptions();
  o.ca_file.clear();
  auto cfg = fleet::renderHaproxy(*nodes, o);
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.error().message().find("node 'n2' at 10.0.0.12:8443 speaks TLS"), std::string::npos)
      << cfg.error().message();
  // Loopback nodes alone may be plain HTTP (one host, the nodes on 127.0.0.1).
  auto local = fleet::parseNodeList("n1 127.0.0.1:8720\n", "f", 8444);
  auto plain = fleet::renderHaproxy(*local, o);
  ASSERT_TRUE(plain) << plain.error().message();
  EXPECT_EQ(plain->config.find(" ssl "), std::string::npos);
}

TEST(FleetHaproxy, RefusesOptionsThatWouldBreakTheConfiguration) {
  auto nodes = fleet::parseNodeList("n1 10.0.0.11:8443\n", "f", 8444);
  ASSERT_TRUE(nodes);
  auto spaced = tlsOptions();
  spaced.ca_file = "/etc/my ca.crt";
  auto r = fleet::renderHaproxy(*nodes, spaced);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("--ca '/etc/my ca.crt': no spaces"), std::string::npos)
      << r.error().message();
  auto injected = tlsOptions();
  injected.listen = {":8443\n  stats enable"};
  r = fleet::renderHaproxy(*nodes, injected);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("--listen"), std::string::npos) << r.error().message();
  auto relative = tlsOptions();
  relative.map_path = "nodes.map";
  r = fleet::renderHaproxy(*nodes, relative);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("must be absolute"), std::string::npos);
}

TEST(FleetCapacity, FreeIsTheLesserOfSlotsAndMemory) {
  sandbox::Capacity c;
  c.max_sandboxes = 40;
  c.sandboxes = 10;
  c.sandbox_memory_mb = 512;
  c.memory_available_mb = 64 * 1024;  // room for 128 by memory: the 30 slots decide
  c.computeFree();
  EXPECT_EQ(c.free, 30u);
  c.memory_available_mb = 5 * 1024 + 100;  // room for 10 by memory
  c.computeFree();
  EXPECT_EQ(c.free, 10u);
  c.sandboxes = 45;  // over the maximum (a lowered max_sandboxes after a reload)
  c.computeFree();
  EXPECT_EQ(c.free, 0u);
}

TEST(FleetCapacity, AgentCheckLineIsFreeRoomAsAWeightOfOne) {
  sandbox::Capacity c;
  c.free = 37;
  EXPECT_EQ(c.agentCheckLine(), "up ready 3700%\n");
  c.free = 1000;  // HAProxy's largest weight is 256
  EXPECT_EQ(c.agentCheckLine(), "up ready 25600%\n");
  c.free = 0;
  EXPECT_EQ(c.agentCheckLine(), "drain\n");
  c.free = 5;
  c.draining = true;
  EXPECT_EQ(c.agentCheckLine(), "drain\n");
}

std::string readAll(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

TEST(FleetAgentCheck, AnswersEachConnectionWithTheLineOfTheMoment) {
  int asked = 0;
  auto listener = api::AgentCheckListener::start("127.0.0.1:0", [&] {
    ++asked;
    return asked == 1 ? std::string("up ready 200%\n") : std::string("drain\n");
  });
  ASSERT_TRUE(listener) << listener.error().message();
  ASSERT_NE((*listener)->port(), 0);
  EXPECT_EQ(readAll((*listener)->port()), "up ready 200%\n");
  EXPECT_EQ(readAll((*listener)->port()), "drain\n");
  listener->reset();  // stops and joins
  EXPECT_EQ(asked, 2);
}

TEST(FleetAgentCheck, ABadAddressIsAnError) {
  auto listener = api::AgentCheckListener::start("nowhere:8444", [] { return std::string(); });
  ASSERT_FALSE(listener);
  EXPECT_NE(listener.error().message().find("agent-check listener"), std::string::npos)
      << listener.error().message();
}

}  // namespace
}  // namespace airlock
