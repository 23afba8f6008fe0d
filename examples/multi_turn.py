#!/usr/bin/env python3
"""A multi-turn analysis, as an agent does it: load the data in one call, analyse it in the next
ones. The context keeps its variables between calls, so no turn reloads anything. The answers
of every turn are saved as multi_turn.json.

    python3 examples/multi_turn.py --out out
"""

from __future__ import annotations

import ast
import json
from typing import Any

# example_support first: it puts this checkout's SDK on the path when it is not installed.
from example_support import EXAMPLES, ExampleFailed, arguments, check, main

from airlock import Sandbox

TURNS = [
    ("load", """
import pandas as pd
df = pd.read_csv("/home/user/transactions.csv", parse_dates=["date"])
df["month"] = df["date"].dt.strftime("%Y-%m")
{"rows": len(df), "columns": list(df.columns)}
"""),
    ("monthly totals", """
monthly = df.groupby("month")["amount"].sum().round(2)
{month: float(total) for month, total in monthly.items()}
"""),
    ("biggest category, using df and monthly from earlier turns", """
by_category = df.groupby("category")["amount"].sum()
top = by_category.idxmax()
{"top_category": top,
 "top_share_pct": round(float(100 * by_category[top] / monthly.sum()), 2),
 "months": len(monthly)}
"""),
]


def run() -> None:
    args = arguments("Load data in one call, analyse it in later calls, variables intact.")
    answers: dict[str, Any] = {}
    with Sandbox.create(profile=args.profile, metadata={"example": "multi_turn"}) as sbx:
        sbx.files.write("/home/user/transactions.csv",
                        (EXAMPLES / "data" / "transactions.csv").read_bytes())
        context = sbx.create_code_context("python")  # this conversation's own interpreter
        for step, code in TURNS:
            execution = check(sbx.run_code(code, context=context), step)
            if execution.text is None:
                raise ExampleFailed(f"{step}: the turn answered no value")
            answers[step] = ast.literal_eval(execution.text)
            print(f"[{step}] {answers[step]}")
    saved = args.out / "multi_turn.json"
    saved.write_text(json.dumps(answers, indent=2) + "\n")
    print(f"saved {saved}")


if __name__ == "__main__":
    main(run)
