#!/usr/bin/env python3
"""B13: a fleet of supervisors behind HAProxy (docs/deploy.md), simulated on this host: N nodes
(10 by default), each `airlock serve` in its own network namespace, behind the real HAProxy made
by `airlock fleet haproxy` (tests/fleet/fleet_harness.py). Measured side by side in one run:

  latency       `x += 1` in a live Python context, through the proxy (Unix socket -> HAProxy ->
                TLS -> node) and direct to the same node (its Unix socket): p50/p99, and the
                difference, which is what the proxy adds.
  creates       sandboxes created per second by C concurrent clients through the proxy, across
                all N nodes and with a one-node fleet behind the same proxy.
  node death    kill -9 of a node: how long until HAProxy has it down and no new work goes
                there, with no traffic (health checks alone) and with creates in flight (the
                first refused connection marks it down).

The simulated nodes share this host's CPUs, so N nodes here cannot create faster than the host
can: the creates row says what the proxy and placement cost, not how a real fleet scales.

Run as root from the repository after building:  sudo bench/b13_fleet.py [--smoke]
"""

import argparse
import concurrent.futures
import os
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, os.path.join(REPO, "tests", "fleet"))
import fleet_harness  # noqa: E402

AIRLOCK = os.path.join(REPO, "build", "bin", "airlock")
TOKENS = {"alpha": "bench-token-0123456789"}


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def timed_increments(client, sb, n):
    out = []
    client.request("POST", f"/v1/sandboxes/{sb}/code", {"code": "x = 0"})
    for _ in range(n):
        t = time.perf_counter()
        a = client.request("POST", f"/v1/sandboxes/{sb}/code", {"code": "x += 1"})
        out.append((time.perf_counter() - t) * 1000)
        assert a.status == 200, a.body
    return out


def latency(fleet, n):
    proxy = fleet.client()
    sb = proxy.request("POST", "/v1/sandboxes", {}).json()["id"]
    node = next(x for x in fleet.nodes if x.name == sb.split("_")[0])
    direct = fleet_harness.Client(node.socket, TOKENS["alpha"])
    timed_increments(proxy, sb, 5)  # warm both paths: the context, the connections
    timed_increments(direct, sb, 5)
    # Interleaved rounds, so a slow moment of the host hits both alike.
    via, dir_ = [], []
    for _ in range(4):
        via += timed_increments(proxy, sb, n // 4)
        dir_ += timed_increments(direct, sb, n // 4)
    proxy.request("DELETE", f"/v1/sandboxes/{sb}")
    proxy.close()
    direct.close()
    return via, dir_


def creates(fleet, total, clients):
    def one(_):
        c = fleet.client()
        t = time.perf_counter()
        a = c.request("POST", "/v1/sandboxes", {})
        c.close()
        assert a.status == 201, a.body
        return a.json()["id"], time.perf_counter() - t

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        made = list(pool.map(one, range(total)))
    elapsed = time.perf_counter() - start
    c = fleet.client()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        list(pool.map(lambda m: fleet.client().request("DELETE", f"/v1/sandboxes/{m[0]}"), made))
    c.close()
    nodes = {m[0].split("_")[0] for m in made}
    return total / elapsed, len(nodes)


def down_after_kill(fleet, node, traffic):
    node.kill9()
    killed = time.monotonic()
    c = fleet.client()
    made = []
    # Out of placement: the placement backend has it down (new work goes elsewhere).
    while not fleet.servers()[("fleet_place", node.name)][0].startswith("DOWN"):
        if traffic:
            a = c.request("POST", "/v1/sandboxes", {})
            if a.status == 201:
                made.append(a.json()["id"])
        if time.monotonic() - killed > 10:
            raise RuntimeError("the proxy still has the killed node up after 10 s")
    down_ms = (time.monotonic() - killed) * 1000
    for sb in made:
        c.request("DELETE", f"/v1/sandboxes/{sb}")
    c.close()
    return down_ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--calls", type=int, default=400, help="x += 1 calls a path")
    ap.add_argument("--creates", type=int, default=60)
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--smoke", action="store_true", help="3 nodes, few calls: that it works")
    args = ap.parse_args()
    if args.smoke:
        args.nodes, args.calls, args.creates, args.clients = 3, 40, 12, 3
    if os.geteuid() != 0:
        sys.exit("b13: needs root (namespaces, cgroups, HAProxy)")

    print(f"B13 fleet: {args.nodes} nodes behind HAProxy on this host "
          f"({os.cpu_count()} CPUs; nodes share them)", flush=True)
    caps = [100] * args.nodes
    t = time.monotonic()
    fleet = fleet_harness.Fleet(AIRLOCK, caps, TOKENS)
    print(f"  fleet up in {time.monotonic() - t:.1f} s", flush=True)
    try:
        via, direct = latency(fleet, args.calls)
        p50v, p99v, p50d, p99d = pct(via, 50), pct(via, 99), pct(direct, 50), pct(direct, 99)
        print(f"\n| x += 1 ({len(via)} calls a path) | p50 ms | p99 ms |")
        print("|---|---|---|")
        print(f"| through the proxy | {p50v:.2f} | {p99v:.2f} |")
        print(f"| direct to the node | {p50d:.2f} | {p99d:.2f} |")
        print(f"| proxy adds | {p50v - p50d:+.2f} ({p50v / p50d:.2f}x) | "
              f"{p99v - p99d:+.2f} ({p99v / p99d:.2f}x) |", flush=True)

        rate_n, used = creates(fleet, args.creates, args.clients)
        # A one-node fleet: the same proxy configuration shape, every other node out.
        for n in fleet.nodes[1:]:
            fleet.admin(f"disable server fleet_place/{n.name}")
        rate_1, _ = creates(fleet, args.creates, args.clients)
        for n in fleet.nodes[1:]:
            fleet.admin(f"enable server fleet_place/{n.name}")
        print(f"\n| creates ({args.creates}, {args.clients} clients) | sandboxes/s | nodes used |")
        print("|---|---|---|")
        print(f"| across {args.nodes} nodes | {rate_n:.1f} | {used} |")
        print(f"| one node | {rate_1:.1f} | 1 |")
        print(f"| ratio | {rate_n / rate_1:.2f}x | |", flush=True)

        idle_ms = down_after_kill(fleet, fleet.nodes[-1], traffic=False)
        busy_ms = down_after_kill(fleet, fleet.nodes[-2], traffic=True)
        print("\n| kill -9 of a node | out of placement, ms |")
        print("|---|---|")
        print(f"| no traffic (health checks every {fleet.check_interval_ms} ms, 2 to fail) | "
              f"{idle_ms:.0f} |")
        print(f"| creates in flight (first refused connection) | {busy_ms:.0f} |", flush=True)
    finally:
        fleet.close()


if __name__ == "__main__":
    main()
