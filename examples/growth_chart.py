#!/usr/bin/env python3
"""A growth projection charted by matplotlib inside a sandbox. The code only draws; airlock
returns every figure open at the end of a run as a PNG, so nothing calls savefig. The chart is
saved locally as growth_chart.png.

    python3 examples/growth_chart.py --revenue 120000 --growth 6 --months 24 --out out
"""

from __future__ import annotations

import argparse
import base64
import json

# example_support first: it puts this checkout's SDK on the path when it is not installed.
from example_support import ExampleFailed, arguments, check, main

from airlock import Sandbox

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# Runs in the sandbox; PARAMS is set by the first run. No savefig: the figure comes back itself.
CHART = """
import matplotlib.pyplot as plt
import numpy as np

months = np.arange(PARAMS["months"] + 1)
scenarios = {
    "conservative": PARAMS["growth_pct"] / 2,
    "expected": PARAMS["growth_pct"],
    "ambitious": PARAMS["growth_pct"] * 1.5,
}
projection = {name: PARAMS["revenue"] * (1 + pct / 100) ** months for name, pct in scenarios.items()}

fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
for name, values in projection.items():
    ax.plot(months, values / 1000, label=f"{name} ({scenarios[name]:g}%/month)", linewidth=2)
ax.set_title(f"Monthly revenue projection over {PARAMS['months']} months")
ax.set_xlabel("month")
ax.set_ylabel("revenue (thousands)")
ax.grid(alpha=0.3)
ax.legend()
{name: round(float(values[-1]), 2) for name, values in projection.items()}
"""


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--revenue", type=float, default=120_000, help="revenue this month")
    parser.add_argument("--growth", type=float, default=6.0,
                        help="expected growth, percent a month (default 6)")
    parser.add_argument("--months", type=int, default=24, help="months to project (default 24)")


def run() -> None:
    args = arguments("Chart a growth projection with matplotlib in a sandbox.", options)
    params = {"revenue": args.revenue, "growth_pct": args.growth, "months": args.months}
    with Sandbox.create(profile=args.profile, metadata={"example": "growth_chart"}) as sbx:
        check(sbx.run_code(f"PARAMS = {json.dumps(params)}"), "parameters")
        execution = check(sbx.run_code(CHART), "chart")
    # Result.png is base64 text, as in E2B.
    pngs = [base64.b64decode(r.png) for r in execution.results if r.png is not None]
    if len(pngs) != 1 or not pngs[0].startswith(PNG_SIGNATURE):
        raise ExampleFailed(f"expected one PNG chart, got formats "
                            f"{[r.formats() for r in execution.results]}")
    saved = args.out / "growth_chart.png"
    saved.write_bytes(pngs[0])
    print(f"month {args.months} revenue by scenario: {execution.text}")
    print(f"saved {saved} ({len(pngs[0])} bytes)")


if __name__ == "__main__":
    main(run)
