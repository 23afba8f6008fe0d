#!/usr/bin/env python3
"""A batch job: ten plain-text notes are uploaded, converted to Markdown inside a sandbox, and the
Markdown files downloaded into --out.

    python3 examples/batch_markdown.py --out out               # ten generated meeting notes
    python3 examples/batch_markdown.py --input notes/ --out out   # your own *.txt files

The text format: the first line is the title; "Key: value" lines right after it become a table;
lines starting with "-" or "*" are list items; lines ending with ":" are section headings;
everything else is paragraphs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

# example_support first: it puts this checkout's SDK on the path when it is not installed.
from example_support import ExampleFailed, arguments, check, main

from airlock import Sandbox

TEAMS = ["Platform", "Payments", "Search", "Mobile", "Data", "Security", "Growth", "Support",
         "Infrastructure", "Design"]

# Runs in the sandbox over every /home/user/in/*.txt, writing /home/user/out/<name>.md.
CONVERT = r'''
import pathlib, re

def to_markdown(text):
    lines = [l.rstrip() for l in text.strip().splitlines()]
    out = ["# " + lines[0].strip(), ""]
    i = 1
    fields = []
    while i < len(lines) and re.match(r"^[A-Za-z][\w ]*: \S", lines[i]):
        key, value = lines[i].split(": ", 1)
        fields.append((key.strip(), value.strip()))
        i += 1
    if fields:
        out += ["| Field | Value |", "|---|---|"]
        out += [f"| {k} | {v} |" for k, v in fields] + [""]
    paragraph = []
    def flush():
        if paragraph:
            out.extend([" ".join(paragraph), ""])
            paragraph.clear()
    for line in lines[i:]:
        stripped = line.strip()
        if not stripped:
            flush()
        elif stripped[:2] in ("- ", "* "):
            flush()
            out.append("- " + stripped[2:].strip())
        elif stripped.endswith(":"):
            flush()
            if out[-1] != "":
                out.append("")
            out += ["## " + stripped[:-1], ""]
        else:
            if out[-1].startswith("- "):
                out.append("")
            paragraph.append(stripped)
    flush()
    return "\n".join(out).rstrip() + "\n"

src, dst = pathlib.Path("/home/user/in"), pathlib.Path("/home/user/out")
dst.mkdir(exist_ok=True)
converted = []
for path in sorted(src.glob("*.txt")):
    (dst / (path.stem + ".md")).write_text(to_markdown(path.read_text()))
    converted.append(path.stem)
print(f"converted {len(converted)} files")
converted
'''


def generated_notes() -> dict[str, str]:
    """Ten meeting notes in the plain-text format."""
    notes = {}
    for n, team in enumerate(TEAMS, start=1):
        notes[f"note-{n:02d}-{team.lower()}.txt"] = (
            f"{team} weekly sync\n"
            f"Date: 2026-03-{n:02d}\n"
            f"Owner: {team} lead\n"
            f"Attendees: {3 + n % 4}\n"
            f"\n"
            f"The {team.lower()} team reviewed last week's work and agreed on priorities.\n"
            f"Most items are on track.\n"
            f"\n"
            f"Decisions:\n"
            f"- Ship the {team.lower()} dashboard on Friday\n"
            f"- Move the retro to Thursday\n"
            f"\n"
            f"Action items:\n"
            f"* Write the release notes ({team} lead)\n"
            f"* Review open incidents\n"
        )
    return notes


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", type=Path,
                        help="directory of .txt files to convert (default: ten generated notes)")


def run() -> None:
    args = arguments("Convert ten text files to Markdown in a sandbox.", options)
    if args.input:
        notes = {p.name: p.read_text() for p in sorted(args.input.glob("*.txt"))}
        if not notes:
            raise ExampleFailed(f"no .txt files in {args.input}")
    else:
        notes = generated_notes()
    with Sandbox.create(profile=args.profile, metadata={"example": "batch_markdown"}) as sbx:
        sbx.files.make_dir("/home/user/in")
        for name, text in notes.items():
            sbx.files.write(f"/home/user/in/{name}", text)
        execution = check(sbx.run_code(CONVERT), "conversion")
        print(execution.stdout, end="")
        produced = sorted(e.name for e in sbx.files.list("/home/user/out") if e.name.endswith(".md"))
        expected = sorted(Path(name).stem + ".md" for name in notes)
        if produced != expected:
            raise ExampleFailed(f"expected {expected}, the sandbox produced {produced}")
        for name in produced:
            (args.out / name).write_bytes(sbx.files.read(f"/home/user/out/{name}", format="bytes"))
    print(f"saved {len(produced)} Markdown files in {args.out}")


if __name__ == "__main__":
    main(run)
