#!/usr/bin/env bash
# One command on a fresh Debian 12 machine, as root: install the dependencies (Debian packages),
# build airlock, and run the bundled example through `airlock run` -- a pandas summary of a CSV
# of transactions, computed inside a sandbox. Only what that needs: the packages to build and run
# airlock, and the airlock binary, agent and plugins, not the test suite (scripts/test.sh adds
# the tests' packages and builds the rest in the same tree).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --runtime
bash scripts/build.sh --runtime
echo
echo "== airlock run examples/summarize_spending.py (pandas, inside a sandbox) =="
exec build/bin/airlock run --file examples/data/transactions.csv:transactions.csv \
  examples/summarize_spending.py
