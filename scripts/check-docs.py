#!/usr/bin/env python3
"""Checks that the documentation stands alone: users have the repository and nothing else.

- every relative Markdown link in a tracked .md file names a file or directory inside the
  repository (anchors and URLs are not checked);
- no tracked text file points at the design notes the project was started from (a `shared/`
  or `design/` tree beside the repository);
- bench/README.md names every benchmark in bench/ (each script and program source).

Prints one line per problem, `file:line: what`, and exits 1 when there is any. Needs git.
Usage: scripts/check-docs.py [REPO]
"""
import os
import re
import subprocess
import sys

root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
files = subprocess.run(["git", "-C", root, "ls-files"], check=True, capture_output=True,
                       text=True).stdout.split("\n")
files = [f for f in files if f]
problems = []

# [text](target) and [text]: target; the target ends at whitespace or ')'.
link = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)|^\s*\[[^\]]+\]:\s*(\S+)")
for f in files:
    if not f.endswith(".md") or "node_modules/" in f:
        continue
    with open(os.path.join(root, f), encoding="utf-8") as text:
        in_code = False
        for number, line in enumerate(text, 1):
            if line.lstrip().startswith("```"):
                in_code = not in_code
            if in_code:
                continue
            for m in link.finditer(line):
                target = m.group(1) or m.group(2)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                    continue  # a URL (https:, mailto:, file:) or an anchor in the same page
                path = target.split("#", 1)[0]
                resolved = os.path.normpath(os.path.join(root, os.path.dirname(f), path))
                if os.path.relpath(resolved, root).startswith(".."):
                    problems.append(f"{f}:{number}: link '{target}' leaves the repository")
                elif not os.path.exists(resolved):
                    problems.append(f"{f}:{number}: link '{target}' names no file in the repository")

outside = re.compile(r"\.\./shared\b|(?<![\w/.-])shared/design\b|(?<![\w/.-])design/[A-Z][A-Z_-]*\.md")
text_suffixes = (".md", ".sh", ".in", ".py", ".txt", ".cmake", ".toml", ".cc", ".h", ".ts", ".js")
for f in files:
    if not f.endswith(text_suffixes) or "node_modules/" in f or f == "scripts/check-docs.py":
        continue
    try:
        with open(os.path.join(root, f), encoding="utf-8") as text:
            for number, line in enumerate(text, 1):
                if outside.search(line):
                    problems.append(f"{f}:{number}: points outside the repository: {line.strip()}")
    except UnicodeDecodeError:
        continue

with open(os.path.join(root, "bench/README.md"), encoding="utf-8") as text:
    bench_readme = text.read()
for f in files:
    if not f.startswith("bench/") or f.endswith(("README.md", "CMakeLists.txt")):
        continue
    if not f.endswith((".sh", ".py", ".cc")):
        continue
    name = os.path.relpath(f, "bench")
    if name not in bench_readme:
        problems.append(f"bench/README.md: does not define the benchmark {f}")

for p in problems:
    print(p)
sys.exit(1 if problems else 0)
