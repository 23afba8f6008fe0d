"""examples/*.py end to end: each example runs as a user runs it (a subprocess with AIRLOCK_URL)
against a real `airlock serve` whose policy is policy/examples/data-science.toml, and its real
outputs are checked: table contents, PNG, PDF text, Markdown files, multi-turn values."""

from __future__ import annotations

import base64
import csv
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib
from collections import defaultdict
from pathlib import Path

from airlock_serve import (
    HostResources,
    Supervisor,
    require_privileged,
    snapshot_host_resources,
)

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
TRANSACTIONS = EXAMPLES / "data" / "transactions.csv"

supervisor: Supervisor
host_before: HostResources


def setUpModule() -> None:
    global supervisor, host_before
    binary = require_privileged()
    host_before = snapshot_host_resources()
    # The shipped data-science policy as it is (profile, limits, warm pool), on a private socket.
    policy = (REPO / "policy" / "examples" / "data-science.toml").read_text()
    supervisor = Supervisor(binary, profiles=policy.replace("schema = 1\n", "", 1)
                            .replace('default_profile = "data-science"\n', "", 1),
                            top='default_profile = "data-science"')


def tearDownModule() -> None:
    supervisor.stop()
    after = snapshot_host_resources()
    if after != host_before:
        raise AssertionError(f"airlock serve left host resources behind: before {host_before}, "
                             f"after {after}")


def run_example(script: str, out: Path, *args: str) -> str:
    env = dict(os.environ, AIRLOCK_URL=supervisor.url)
    env.pop("AIRLOCK_TOKEN", None)
    proc = subprocess.run([sys.executable, str(EXAMPLES / script), "--out", str(out), *args],
                          env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise AssertionError(f"{script} exited {proc.returncode}\nstdout:\n{proc.stdout}\n"
                             f"stderr:\n{proc.stderr}")
    return proc.stdout


def expected_totals() -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    with TRANSACTIONS.open() as f:
        for row in csv.DictReader(f):
            totals[row["category"]] += float(row["amount"])
    return {k: round(v, 2) for k, v in totals.items()}


def pdf_text(pdf: bytes) -> bytes:
    """Every stream of the PDF decoded through its filters (reportlab uses ASCII85 and Flate),
    so the text the pages draw can be searched."""
    out = []
    stream = re.compile(rb"<<((?:(?!>>\s*stream).)*?)>>\s*stream\r?\n(.*?)\s*endstream", re.S)
    for m in stream.finditer(pdf):
        header, data = m.group(1), m.group(2)
        for name in re.findall(rb"/(ASCII85Decode|FlateDecode)", header):
            if name == b"ASCII85Decode":
                data = base64.a85decode(data.strip().removesuffix(b"~>"), ignorechars=b" \t\r\n")
            else:
                data = zlib.decompress(data)
        out.append(data)
    return b"\n".join(out)


class ExamplesTest(unittest.TestCase):
    def setUp(self) -> None:
        self.out = Path(tempfile.mkdtemp(prefix="airlock-examples-"))
        self.addCleanup(shutil.rmtree, self.out, True)

    def test_csv_spending(self) -> None:
        stdout = run_example("csv_spending.py", self.out)
        totals = expected_totals()
        self.assertIn(f"28 transactions over 2 months, total {sum(totals.values()):.2f}", stdout)
        rows = {}
        for line in stdout.splitlines():
            parts = line.split()
            if parts and parts[0] in totals:
                rows[parts[0]] = parts[1:]
        self.assertEqual(set(rows), set(totals), stdout)
        for category, total in totals.items():
            self.assertAlmostEqual(float(rows[category][0]), total, places=2, msg=category)
        # Sorted by total, housing (two rents) first.
        self.assertEqual(next(iter(rows)), "housing")
        with (self.out / "spending_by_category.csv").open() as f:
            saved = {r["category"]: r for r in csv.DictReader(f)}
        self.assertEqual(float(saved["groceries"]["total"]), totals["groceries"])
        self.assertEqual(int(saved["transport"]["count"]), 5)
        self.assertAlmostEqual(sum(float(r["share_pct"]) for r in saved.values()), 100, delta=0.05)

    def test_csv_spending_generated(self) -> None:
        stdout = run_example("csv_spending.py", self.out, "--generate-months", "12")
        self.assertRegex(stdout, r"\d+ transactions over 12 months")

    def test_growth_chart(self) -> None:
        sys.path.insert(0, str(EXAMPLES))
        try:
            import growth_chart  # type: ignore[import]  # its sandbox code draws, never saves
        finally:
            sys.path.remove(str(EXAMPLES))
        self.assertIn("plt.subplots", growth_chart.CHART)
        self.assertNotIn("savefig", growth_chart.CHART)
        stdout = run_example("growth_chart.py", self.out, "--revenue", "100000", "--growth", "5",
                             "--months", "12")
        png = (self.out / "growth_chart.png").read_bytes()
        self.assertTrue(png.startswith(b"\x89PNG\r\n\x1a\n"))
        self.assertGreater(len(png), 20_000)
        width, height = struct.unpack(">II", png[16:24])  # IHDR
        self.assertGreater(width, 600)
        self.assertGreater(height, 300)
        expected = round(100000 * 1.05 ** 12, 2)
        self.assertIn(f"'expected': {expected}", stdout)

    def test_pdf_quote(self) -> None:
        stdout = run_example("pdf_quote.py", self.out)
        pdf = (self.out / "quote-Q-2026-0142.pdf").read_bytes()
        self.assertTrue(pdf.startswith(b"%PDF-"))
        self.assertIn(b"%%EOF", pdf[-64:])
        text = pdf_text(pdf)
        for expected in (b"Quote Q-2026-0142", b"Acme Robotics", b"Powder coating, RAL 7016",
                         b"EUR 8,443.20", b"Total"):
            self.assertIn(expected, text)
        subtotal = 40 * 86.5 + 160 * 12.25 + 40 * 18.0 + 40 * 22.4
        self.assertIn(f"'total': {round(subtotal * 1.2, 2)}", stdout)

    def test_multi_turn(self) -> None:
        run_example("multi_turn.py", self.out)
        answers = json.loads((self.out / "multi_turn.json").read_text())
        self.assertEqual(answers["load"]["rows"], 28)
        monthly = answers["monthly totals"]
        self.assertEqual(set(monthly), {"2026-01", "2026-02"})
        totals = expected_totals()
        self.assertAlmostEqual(sum(monthly.values()), sum(totals.values()), places=2)
        last = answers["biggest category, using df and monthly from earlier turns"]
        self.assertEqual(last["top_category"], "housing")
        self.assertEqual(last["months"], 2)
        self.assertAlmostEqual(last["top_share_pct"],
                               round(100 * totals["housing"] / sum(totals.values()), 2), places=2)

    def test_batch_markdown(self) -> None:
        stdout = run_example("batch_markdown.py", self.out)
        self.assertIn("converted 10 files", stdout)
        files = sorted(self.out.glob("*.md"))
        self.assertEqual(len(files), 10)
        payments = (self.out / "note-02-payments.md").read_text()
        self.assertTrue(payments.startswith("# Payments weekly sync\n"))
        self.assertIn("| Date | 2026-03-02 |", payments)
        self.assertIn("## Decisions\n\n- Ship the payments dashboard on Friday\n", payments)
        self.assertIn("- Write the release notes (Payments lead)", payments)
        for f in files:
            self.assertRegex(f.read_text(), r"^# \w+ weekly sync\n\n\| Field \| Value \|")


if __name__ == "__main__":
    unittest.main()
