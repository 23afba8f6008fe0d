"""Per-category spending summary of a CSV of transactions, computed inside an airlock sandbox.

Run it with:  airlock run --file examples/data/transactions.csv:transactions.csv \
                  examples/summarize_spending.py
"""
import sys

import pandas as pd

path = sys.argv[1] if len(sys.argv) > 1 else "transactions.csv"
df = pd.read_csv(path, parse_dates=["date"])
df["month"] = df["date"].dt.strftime("%Y-%m")

summary = (
    df.groupby("category")["amount"]
    .agg(total="sum", count="count", average="mean")
    .sort_values("total", ascending=False)
)
summary["share_%"] = 100 * summary["total"] / summary["total"].sum()

print(f"{len(df)} transactions, {df['month'].nunique()} months, total {df['amount'].sum():.2f}")
print()
print(summary.round(2).to_string())
print()
by_month = df.pivot_table(index="category", columns="month", values="amount", aggfunc="sum",
                          fill_value=0)
print(by_month.round(2).to_string())
