#!/usr/bin/env bash
# One command on a fresh Debian 12 machine, as root: install the dependencies (Debian packages),
# build airlock, and run the bundled example through `airlock run` -- a pandas summary of a CSV
# of transactions, computed inside a sandbox.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
echo
echo "== airlock run examples/summarize_spending.py (pandas, inside a sandbox) =="
exec build/bin/airlock run --file examples/data/transactions.csv:transactions.csv \
  examples/summarize_spending.py
