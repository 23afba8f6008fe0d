"""The fleet, simulated on this host (fleet_harness.py): three `airlock serve` nodes in their own
network namespaces behind the real HAProxy, configured by `airlock fleet haproxy`.

Through the proxy only: 60 sandboxes spread by capacity; code, a streamed command and files for
each reach the node that holds it; ids and names route without a shared database; a token works
on every node and never reaches another tenant's sandbox; a node killed with kill -9 answers 503
naming it within a second while the others keep working and new sandboxes avoid it; restarted, it
adopts its sandboxes, variables and all.

Needs root (namespaces, cgroups, HAProxy). Without it every test is skipped with the reason,
unless AIRLOCK_TEST_REQUIRE_PRIVILEGED=1, where that is a failure.
"""

import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "sdk", "python", "src"))
import airlock  # noqa: E402  (the Python SDK, from the tree)
import fleet_harness  # noqa: E402

AIRLOCK = os.environ.get("AIRLOCK_BIN", "airlock")
CAPACITIES = [40, 24, 16]  # max_sandboxes of n1, n2, n3
SANDBOXES = 60
TOKENS = {"alpha": "alpha-token-0123456789", "beta": "beta-token-9876543210"}


def missing_reason():
    if os.geteuid() != 0:
        return "needs root: the nodes make namespaces and cgroups, the test network namespaces"
    if shutil.which("haproxy") is None:
        return "needs haproxy (apt-get install haproxy; scripts/install-deps.sh does)"
    return None


REASON = missing_reason()
if REASON and os.environ.get("AIRLOCK_TEST_REQUIRE_PRIVILEGED") == "1":
    raise SystemExit(f"test_fleet: {REASON}, and AIRLOCK_TEST_REQUIRE_PRIVILEGED=1")


def node_of(sandbox_id):
    return sandbox_id.split("_", 1)[0]


@unittest.skipIf(REASON, REASON)
class FleetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fleet = fleet_harness.Fleet(AIRLOCK, CAPACITIES, TOKENS)
        cls.ids = []

    @classmethod
    def tearDownClass(cls):
        cls.fleet.close()

    def proxy(self, tenant="alpha"):
        return self.fleet.client(tenant)

    def create(self, client, body=None, expect=201):
        a = client.request("POST", "/v1/sandboxes", body or {})
        self.assertEqual(a.status, expect, a.body)
        return a

    # Each step needs the ones before it (the same fleet and sandboxes): one test, in order.
    def test_fleet(self):
        self.spread_by_capacity()
        self.every_call_reaches_its_node()
        self.names_route_through_their_node()
        self.lists_are_per_node()
        self.tenants_stay_apart()
        self.ports_and_mcp_sessions_reach_their_node()
        self.a_dead_node_fails_fast_and_comes_back()

    def spread_by_capacity(self):
        def make(_):
            a = self.create(self.proxy())
            sb = a.json()
            # The node that answered is the node the id names and the body says.
            self.assertEqual(a.node, node_of(sb["id"]))
            self.assertEqual(sb["node"], a.node)
            return sb["id"]

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            type(self).ids = list(pool.map(make, range(SANDBOXES)))
        counts = {n.name: 0 for n in self.fleet.nodes}
        for i in self.ids:
            counts[node_of(i)] += 1
        # Balanced by free capacity, every node fills to about the same fraction:
        # 60 of 80 slots is 30, 18 and 12.
        total = sum(CAPACITIES)
        for n, cap in zip(self.fleet.nodes, CAPACITIES):
            want = SANDBOXES * cap / total
            self.assertLessEqual(abs(counts[n.name] - want), max(4, 0.35 * want),
                                 f"{counts} is not spread by capacity {CAPACITIES}")
        self.assertGreater(counts["n1"], counts["n3"], counts)
        # What each node publishes on its agent-check, HAProxy weighs: its free room now.
        want = {n.name: cap - counts[n.name] for n, cap in zip(self.fleet.nodes, CAPACITIES)}
        deadline = time.monotonic() + 5
        while True:
            weights = {sv: int(w) for (px, sv), (st, w) in self.fleet.servers().items()
                       if px == "fleet_place"}
            if weights == want or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(weights, want, "placement weights are the nodes' free capacity")
        print(f"placement: {counts}; weights now {weights}", flush=True)

    def every_call_reaches_its_node(self):
        def work(args):
            k, sb = args
            c = self.proxy()
            want = node_of(sb)
            a = c.request("POST", f"/v1/sandboxes/{sb}/code", {"code": f"x = {k}\nprint(x * 2)"})
            self.assertEqual((a.status, a.node), (200, want), a.body)
            out = "".join(e.get("data", "") for e in a.events() if e["type"] == "stdout")
            self.assertEqual(out, f"{k * 2}\n")
            # A command's output, streamed as it comes.
            a = c.request("POST", f"/v1/sandboxes/{sb}/commands",
                          {"cmd": "for i in 1 2 3; do echo line$i; done", "stream": True})
            self.assertEqual((a.status, a.node), (200, want), a.body)
            ev = a.events()
            self.assertEqual("".join(e["data"] for e in ev if e["type"] == "stdout"),
                             "line1\nline2\nline3\n")
            self.assertEqual(ev[-1]["type"], "exit")
            # A file in and out.
            payload = f"sandbox {sb}\n".encode() * 100
            a = c.request("PUT", f"/v1/sandboxes/{sb}/files?path=/home/user/data.txt", payload)
            self.assertEqual((a.status, a.node), (201, want), a.body)
            a = c.request("GET", f"/v1/sandboxes/{sb}/files?path=/home/user/data.txt")
            self.assertEqual((a.status, a.node), (200, want))
            self.assertEqual(a.body.encode(), payload)
            c.close()

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(work, enumerate(self.ids)))

    def names_route_through_their_node(self):
        c = self.proxy()
        sb = self.create(c, {"name": "report-1"}).json()
        node = sb["node"]
        # The fleet's name for it: the node, '_', the name.
        a = c.request("GET", f"/v1/sandboxes/{node}_report-1")
        self.assertEqual((a.status, a.node, a.json()["id"]), (200, node, sb["id"]))
        # The id wins over ?node= for routing, and a node refuses a node that is not itself.
        other = next(n.name for n in self.fleet.nodes if n.name != node)
        a = c.request("GET", f"/v1/sandboxes/{sb['id']}?node={other}")
        self.assertEqual((a.status, a.node), (400, node), a.body)
        self.assertIn(f"'{other}', but this is node '{node}'", a.body)
        # A bare name carries no node: the proxy cannot know where it lives.
        a = c.request("GET", "/v1/sandboxes/report-1")
        self.assertEqual(a.status, 404, a.body)
        self.assertIn("no node of this fleet holds that id", a.body)
        # A node the fleet does not have.
        a = c.request("GET", "/v1/sandboxes/n9_0123456789abcdef")
        self.assertEqual(a.status, 404, a.body)
        # Created on a chosen node (a persistent workspace lives on one node's disk).
        a = c.request("POST", "/v1/sandboxes?node=n3", {"name": "pinned"})
        self.assertEqual((a.status, a.node), (201, "n3"), a.body)
        for extra in (sb["id"], a.json()["id"]):
            self.assertEqual(c.request("DELETE", f"/v1/sandboxes/{extra}").status, 204)

    def lists_are_per_node(self):
        c = self.proxy()
        a = c.request("GET", "/v1/fleet")
        self.assertEqual(a.json(), {"nodes": ["n1", "n2", "n3"]})
        a = c.request("GET", "/v1/sandboxes")
        self.assertEqual(a.status, 400)
        self.assertIn("this fleet lists per node: add ?node=NAME", a.json()["error"]["message"])
        for n in self.fleet.nodes:
            a = c.request("GET", f"/v1/sandboxes?node={n.name}")
            self.assertEqual((a.status, a.node), (200, n.name), a.body)
            listed = sorted(s["id"] for s in a.json()["sandboxes"])
            self.assertEqual(listed, sorted(i for i in self.ids if node_of(i) == n.name))
        # The clients list the whole fleet unchanged: they ask each node the proxy names.
        env = dict(os.environ, AIRLOCK_URL=f"unix://{self.fleet.proxy_socket}",
                   AIRLOCK_TOKEN=TOKENS["alpha"])
        out = subprocess.run([AIRLOCK, "sandbox", "ls", "--json"], env=env, capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(sorted(s["id"] for s in json.loads(out.stdout)["sandboxes"]),
                         sorted(self.ids))
        found = airlock.Sandbox.list(url=f"unix://{self.fleet.proxy_socket}",
                                     token=TOKENS["alpha"])
        self.assertEqual(sorted(s.id for s in found), sorted(self.ids))
        self.assertEqual({s.node for s in found}, {"n1", "n2", "n3"})

    def tenants_stay_apart(self):
        beta = self.proxy("beta")
        # beta's token works on every node...
        mine = []
        for n in self.fleet.nodes:
            a = beta.request("POST", f"/v1/sandboxes?node={n.name}", {})
            self.assertEqual((a.status, a.node), (201, n.name), a.body)
            mine.append(a.json()["id"])
        # ...and reaches none of alpha's sandboxes, on any node: 404, as for an id never made.
        for n in self.fleet.nodes:
            theirs = next(i for i in self.ids if node_of(i) == n.name)
            for route in ("", "/files?path=/home/user/data.txt"):
                a = beta.request("GET", f"/v1/sandboxes/{theirs}{route}")
                self.assertEqual((a.status, a.node), (404, n.name), a.body)
            a = beta.request("POST", f"/v1/sandboxes/{theirs}/code", {"code": "print(x)"})
            self.assertEqual(a.status, 404, a.body)
            a = beta.request("GET", f"/v1/sandboxes?node={n.name}")
            self.assertEqual([s["id"] for s in a.json()["sandboxes"]],
                             [i for i in mine if node_of(i) == n.name])
        # No token, or a wrong one: refused by the node, through the proxy.
        stranger = fleet_harness.Client(self.fleet.proxy_socket, "not-a-token")
        self.assertEqual(stranger.request("GET", f"/v1/sandboxes/{self.ids[0]}").status, 401)
        for i in mine:
            self.assertEqual(beta.request("DELETE", f"/v1/sandboxes/{i}").status, 204)

    def ports_and_mcp_sessions_reach_their_node(self):
        c = self.proxy()
        # A server in a sandbox, reached through a port link: the token names the node.
        sb = next(i for i in self.ids if node_of(i) == "n3")
        a = c.request("POST", f"/v1/sandboxes/{sb}/commands",
                      {"cmd": "cd /home/user && exec python3 -m http.server 8000 --bind 127.0.0.1",
                       "background": True})
        self.assertEqual(a.status, 201, a.body)
        link = c.request("POST", f"/v1/sandboxes/{sb}/ports/8000/link").json()
        self.assertTrue(link["path"].startswith("/v1/ports/n3_"), link)
        deadline = time.monotonic() + 20
        while True:
            a = c.request("GET", link["path"] + "data.txt")
            if a.status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        # The sandbox's own server answers (its bytes are relayed as they are, no node header):
        # the file it serves is the one this sandbox holds.
        self.assertEqual(a.status, 200, a.body)
        self.assertTrue(a.body.startswith(f"sandbox {sb}\n"))
        # An MCP session: opened where there is room, then routed by its id to that node.
        mcp = {"Accept": "application/json, text/event-stream"}
        a = c.request("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                       "params": {"protocolVersion": "2025-06-18",
                                                  "capabilities": {},
                                                  "clientInfo": {"name": "fleet", "version": "1"}}},
                      headers=mcp)
        self.assertEqual(a.status, 200, a.body)
        session = a.headers["mcp-session-id"]
        self.assertEqual(node_of(session), a.node)
        mcp["Mcp-Session-Id"] = session
        for k in range(4):
            a = c.request("POST", "/mcp", {"jsonrpc": "2.0", "id": 2 + k, "method": "tools/list"},
                          headers=mcp)
            self.assertEqual((a.status, a.node), (200, node_of(session)), a.body)
            self.assertIn("tools", a.json()["result"])
        self.assertEqual(c.request("DELETE", "/mcp", headers=mcp).status, 204)

    def a_dead_node_fails_fast_and_comes_back(self):
        victim = self.fleet.nodes[1]  # n2
        theirs = [i for i in self.ids if node_of(i) == victim.name]
        others = [i for i in self.ids if node_of(i) != victim.name]
        c = self.proxy()
        victim.kill9()
        killed = time.monotonic()
        # The first call after the death: 503 naming the node, well within a second.
        t = time.monotonic()
        a = c.request("POST", f"/v1/sandboxes/{theirs[0]}/code", {"code": "print(x)"})
        first_ms = (time.monotonic() - t) * 1000
        self.assertEqual(a.status, 503, a.body)
        self.assertEqual(a.json()["error"]["message"], f"node {victim.name} is unavailable")
        self.assertLess(first_ms, 1000)
        for sb in theirs:
            t = time.monotonic()
            a = c.request("GET", f"/v1/sandboxes/{sb}")
            self.assertEqual(a.status, 503)
            self.assertLess((time.monotonic() - t) * 1000, 1000)
        # HAProxy has it down: no new work goes there.
        while self.fleet.servers()[(f"node_{victim.name}", victim.name)][0] != "DOWN":
            self.assertLess(time.monotonic() - killed, 1.0, "the proxy still has the node up")
            time.sleep(0.01)
        out_ms = (time.monotonic() - killed) * 1000
        # The others keep working.
        for sb in others[:: max(1, len(others) // 8)]:
            a = c.request("POST", f"/v1/sandboxes/{sb}/code", {"code": "print(x + 1)"})
            self.assertEqual((a.status, a.node), (200, node_of(sb)), a.body)
        # New sandboxes avoid it.
        fresh = [self.create(c).json()["id"] for _ in range(8)]
        self.assertNotIn(victim.name, {node_of(i) for i in fresh}, fresh)
        print(f"node killed: first call 503 in {first_ms:.1f} ms, out of placement in "
              f"{out_ms:.0f} ms", flush=True)

        # Back: it adopts its sandboxes, whose variables survived.
        victim.start()
        deadline = time.monotonic() + 30
        while not self.fleet.all_up():
            self.assertLess(time.monotonic(), deadline, self.fleet.servers())
            time.sleep(0.05)
        for sb in theirs:
            k = self.ids.index(sb)
            a = c.request("POST", f"/v1/sandboxes/{sb}/code", {"code": "print(x)"})
            self.assertEqual((a.status, a.node), (200, victim.name), a.body)
            out = "".join(e.get("data", "") for e in a.events() if e["type"] == "stdout")
            self.assertEqual(out, f"{k}\n")
        for i in fresh:
            self.assertEqual(c.request("DELETE", f"/v1/sandboxes/{i}").status, 204)


if __name__ == "__main__":
    unittest.main()
