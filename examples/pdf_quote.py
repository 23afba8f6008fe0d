#!/usr/bin/env python3
"""Specifications in, a formatted PDF quote out: reportlab lays the quote out inside a sandbox and
the PDF is downloaded as quote-<number>.pdf.

    python3 examples/pdf_quote.py --out out                  # the built-in example specification
    python3 examples/pdf_quote.py --spec my_quote.json       # yours: same keys as SPEC below
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

# example_support first: it puts this checkout's SDK on the path when it is not installed.
from example_support import ExampleFailed, arguments, check, main

from airlock import Sandbox

SPEC: dict[str, Any] = {
    "number": "Q-2026-0142",
    "date": "2026-03-02",
    "valid_days": 30,
    "seller": {"name": "Northwind Fabrication Ltd", "address": "12 Harbour Road, Bristol"},
    "customer": {"name": "Acme Robotics", "contact": "Dana Whitfield",
                 "address": "400 Innovation Way, Cambridge"},
    "currency": "EUR",
    "tax_pct": 20,
    "items": [
        {"description": "Aluminium enclosure, anodised, 300x200x80 mm", "quantity": 40,
         "unit_price": 86.50},
        {"description": "CNC machining of mounting brackets", "quantity": 160, "unit_price": 12.25},
        {"description": "Powder coating, RAL 7016", "quantity": 40, "unit_price": 18.00},
        {"description": "Assembly and functional test", "quantity": 40, "unit_price": 22.40},
    ],
    "notes": "Delivery 4 weeks after order. Prices exclude shipping.",
}

# Runs in the sandbox: reads /home/user/spec.json, writes /home/user/quote.pdf, answers totals.
LAYOUT = """
import json
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.lib.units import mm
from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

spec = json.load(open("/home/user/spec.json"))
cur = spec["currency"]
money = lambda v: f"{cur} {v:,.2f}"
styles = getSampleStyleSheet()
rows = [["Description", "Qty", "Unit price", "Amount"]]
subtotal = 0.0
for item in spec["items"]:
    amount = item["quantity"] * item["unit_price"]
    subtotal += amount
    rows.append([Paragraph(item["description"], styles["BodyText"]), str(item["quantity"]),
                 money(item["unit_price"]), money(amount)])
tax = round(subtotal * spec["tax_pct"] / 100, 2)
total = subtotal + tax
rows += [["", "", "Subtotal", money(subtotal)],
         ["", "", f"Tax {spec['tax_pct']}%", money(tax)],
         ["", "", "Total", money(total)]]

table = Table(rows, colWidths=[95 * mm, 15 * mm, 30 * mm, 35 * mm])
table.setStyle(TableStyle([
    ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#1f3b57")),
    ("TEXTCOLOR", (0, 0), (-1, 0), colors.white),
    ("ALIGN", (1, 0), (-1, -1), "RIGHT"),
    ("VALIGN", (0, 0), (-1, -1), "MIDDLE"),
    ("LINEBELOW", (0, 0), (-1, -4), 0.25, colors.grey),
    ("FONTNAME", (2, -1), (-1, -1), "Helvetica-Bold"),
    ("LINEABOVE", (2, -1), (-1, -1), 1, colors.black),
]))
story = [
    Paragraph(f"Quote {spec['number']}", styles["Title"]),
    Paragraph(f"{spec['seller']['name']}, {spec['seller']['address']}", styles["Normal"]),
    Spacer(1, 6 * mm),
    Paragraph(f"For: {spec['customer']['name']}, attn. {spec['customer']['contact']}, "
              f"{spec['customer']['address']}", styles["Normal"]),
    Paragraph(f"Date: {spec['date']}, valid for {spec['valid_days']} days", styles["Normal"]),
    Spacer(1, 8 * mm),
    table,
    Spacer(1, 8 * mm),
    Paragraph(spec["notes"], styles["Italic"]),
]
SimpleDocTemplate("/home/user/quote.pdf", pagesize=A4, title=f"Quote {spec['number']}",
                  author=spec["seller"]["name"]).build(story)
{"subtotal": round(subtotal, 2), "tax": tax, "total": round(total, 2)}
"""


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spec", type=Path,
                        help="JSON specification of the quote (default: the built-in example)")


def run() -> None:
    args = arguments("Generate a formatted PDF quote with reportlab in a sandbox.", options)
    spec = json.loads(args.spec.read_text()) if args.spec else SPEC
    with Sandbox.create(profile=args.profile, metadata={"example": "pdf_quote"}) as sbx:
        sbx.files.write("/home/user/spec.json", json.dumps(spec))
        execution = check(sbx.run_code(LAYOUT), "layout")
        pdf = sbx.files.read("/home/user/quote.pdf", format="bytes")
    if not pdf.startswith(b"%PDF-"):
        raise ExampleFailed(f"the sandbox did not produce a PDF: {pdf[:40]!r}")
    saved = args.out / f"quote-{spec['number']}.pdf"
    saved.write_bytes(pdf)
    print(f"quote {spec['number']} for {spec['customer']['name']}: {execution.text}")
    print(f"saved {saved} ({len(pdf)} bytes)")


if __name__ == "__main__":
    main(run)
