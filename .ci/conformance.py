#!/usr/bin/env python3
"""Runs ../shared/conformance/check.py on the public corpus and fails on any query that
fails, except the deliberate deviations listed in docs/conformance-deviations.md
(lines of the form `- <dialect>/<scenario> <command>: why`)."""
import os
import re
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
corpus = os.path.join(root, "..", "shared", "conformance")
allowed = set()
with open(os.path.join(root, "docs", "conformance-deviations.md"), encoding="utf-8") as fh:
    for line in fh:
        m = re.match(r"^- `?([\w./-]+)`? `?(\w+)`?:", line)
        if m:
            allowed.add((m.group(1), m.group(2)))

cmd = [sys.executable, os.path.join(corpus, "check.py"), os.path.join(corpus, "out", "public"),
       "--lenient-crashes", "-v", "--cmd", "./target/release/session --dialect {ref} --as-agent --json {args}"]
p = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
# check.py's own totals count listed deviations as failures; show them reworded, and
# end with our verdict instead.
for out_line in p.stdout.splitlines():
    m = re.match(r"^(queries: )?(\d+) passed, (\d+) failed$", out_line)
    if m:
        what = "queries" if m.group(1) else "scenarios"
        print(f"check.py {what}: {m.group(2)} matched the references, {m.group(3)} did not")
    else:
        print(out_line)
unexpected, seen = [], set()
scenario = None
for line in p.stdout.splitlines():
    m = re.match(r"^FAIL (\S+): \d+/\d+ queries failed; first: (\S+)", line)
    if m:
        scenario = m.group(1)
        key = (scenario, m.group(2))
    else:
        m = re.match(r"^     (\S+) ", line)
        if not (m and scenario):
            scenario = None if not line.startswith("     ") else scenario
            continue
        key = (scenario, m.group(1))
    seen.add(key)
    if key not in allowed:
        unexpected.append(line.strip())
if p.returncode not in (0, 1):
    print(p.stderr, file=sys.stderr)
    sys.exit(p.returncode)
total_scenarios = len(re.findall(r"^(?:PASS|FAIL) ", p.stdout, re.M))
for key in sorted(allowed - seen):
    print(f"note: listed deviation {key[0]} {key[1]} now matches the reference; remove it from the list")
if unexpected:
    print(f"{len(unexpected)} unexpected conformance failure(s)")
    bad = {k[0] for k in seen if k not in allowed}
    print(f"conformance: {total_scenarios - len(bad)} passed, {len(bad)} failed")
    sys.exit(1)
print(f"listed deviations: {len(seen)} ({', '.join(sorted(f'{a} {b}' for a, b in seen))})")
print(f"conformance: {total_scenarios} passed, 0 failed")
