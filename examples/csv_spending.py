#!/usr/bin/env python3
"""Spending by category: upload a CSV of transactions, let pandas break it down inside a
sandbox, print the table and save it as CSV.

    AIRLOCK_URL=unix:///run/airlock/airlock.sock python3 examples/csv_spending.py --out out
    python3 examples/csv_spending.py --generate-months 12    # a made-up year instead

The CSV has columns date, description, category, amount (examples/data/transactions.csv).
"""

from __future__ import annotations

import argparse
import csv
import io
import random
from datetime import date
from pathlib import Path

# example_support first: it puts this checkout's SDK on the path when it is not installed.
from example_support import EXAMPLES, ExampleFailed, arguments, check, main

from airlock import Sandbox

ANALYSIS = """
import pandas as pd

df = pd.read_csv("/home/user/transactions.csv", parse_dates=["date"])
summary = (
    df.groupby("category")["amount"]
    .agg(total="sum", count="count", average="mean")
    .sort_values("total", ascending=False)
)
summary["share_pct"] = 100 * summary["total"] / summary["total"].sum()
summary = summary.round(2)
summary.to_csv("/home/user/spending_by_category.csv")
months = df["date"].dt.strftime("%Y-%m").nunique()
print(f"{len(df)} transactions over {months} months, total {df['amount'].sum():.2f}")
print()
print(summary.to_string())
"""

CATEGORIES = {  # category: (merchants, typical amount, transactions a month)
    "housing": (["Rent"], 1250.0, 1),
    "groceries": (["Grocery Mart", "Farmers Market"], 75.0, 5),
    "dining": (["Corner Cafe", "Pizza Place", "Sushi Bar"], 20.0, 6),
    "transport": (["City Transit", "Fuel Station"], 15.0, 8),
    "utilities": (["Electric Co", "Water Utility"], 45.0, 2),
    "entertainment": (["Cinema", "Streaming Service"], 18.0, 2),
    "health": (["Pharmacy"], 25.0, 1),
}


def generated_csv(months: int, seed: int = 2026) -> bytes:
    """A reproducible CSV of `months` months of transactions from January 2025."""
    rng = random.Random(seed)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["date", "description", "category", "amount"])
    for m in range(months):
        year, month = 2025 + m // 12, m % 12 + 1
        for category, (merchants, typical, per_month) in CATEGORIES.items():
            for _ in range(per_month):
                day = date(year, month, rng.randint(1, 28))
                amount = typical if category == "housing" else typical * rng.uniform(0.3, 1.8)
                writer.writerow([day.isoformat(), rng.choice(merchants), category,
                                 f"{amount:.2f}"])
    return out.getvalue().encode()


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--csv", type=Path, default=EXAMPLES / "data" / "transactions.csv",
                        help="CSV of transactions to analyse (default: examples/data/transactions.csv)")
    parser.add_argument("--generate-months", type=int, metavar="N",
                        help="analyse N generated months of transactions instead of --csv")


def run() -> None:
    args = arguments("Spending by category of a CSV of transactions, computed in a sandbox.",
                     options)
    data = generated_csv(args.generate_months) if args.generate_months else args.csv.read_bytes()
    with Sandbox.create(profile=args.profile, metadata={"example": "csv_spending"}) as sbx:
        sbx.files.write("/home/user/transactions.csv", data)
        execution = check(sbx.run_code(ANALYSIS), "analysis")
        print(execution.stdout, end="")
        table = sbx.files.read("/home/user/spending_by_category.csv", format="bytes")
    if not table.startswith(b"category,total,count,average,share_pct"):
        raise ExampleFailed(f"unexpected summary CSV: {table[:200]!r}")
    saved = args.out / "spending_by_category.csv"
    saved.write_bytes(table)
    print(f"\nsaved {saved}")


if __name__ == "__main__":
    main(run)
