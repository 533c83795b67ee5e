#!/usr/bin/env python3
"""Runs ../shared/conformance/check.py on the public corpus (our copy, testdata/conformance)
and on the hand-written cases (testdata/conformance-odd), and fails on any query that fails,
except the deliberate deviations listed in docs/conformance-deviations.md (lines of the form
`- <dialect>/<scenario> <command>: why`; a hand-written case may also be named with its set,
`<set>/<dialect>/<scenario>`). Only check.py itself is taken from ../shared."""
import os
import re
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
check = os.path.join(root, "..", "shared", "conformance", "check.py")
corpora = [os.path.join("testdata", "conformance"), os.path.join("testdata", "conformance-odd")]
allowed = set()
with open(os.path.join(root, "docs", "conformance-deviations.md"), encoding="utf-8") as fh:
    for line in fh:
        m = re.match(r"^\s*- `?([\w./-]+)`? `?(\w+)`?:", line)
        if m:
            allowed.add((m.group(1), m.group(2)))


def is_allowed(key):
    scen, cmd = key
    parts = scen.split("/")
    return (scen, cmd) in allowed or (len(parts) == 3 and ("/".join(parts[1:]), cmd) in allowed)


# Hand-written cases whose mismatches are still open (issue 14) are listed, one
# `<set>/<dialect>/<scenario> <command>` a line, in testdata/conformance-odd/open.txt: a
# listed mismatch is reported without failing the run; a mismatch not listed fails it, and
# so does a listed one that now matches (remove it from the list), so the list only shrinks.
open_corpora = {os.path.join("testdata", "conformance-odd")}
open_list = set()
open_path = os.path.join(root, "testdata", "conformance-odd", "open.txt")
if os.path.exists(open_path):
    with open(open_path, encoding="utf-8") as fh:
        for line in fh:
            line = line.split("#", 1)[0].strip()
            if line:
                scen, cmd_name = line.split()
                open_list.add((scen, cmd_name))
unexpected, still_open, seen, matched = [], [], set(), set()
total_scenarios = 0
for corpus in corpora:
    if not os.path.isdir(os.path.join(root, corpus)):
        continue
    cmd = [sys.executable, check, corpus, "--lenient-crashes", "-v",
           "--cmd", "./target/release/session --dialect {ref} --as-agent --json {args}"]
    p = subprocess.run(cmd, cwd=root, capture_output=True, text=True, errors="backslashreplace")
    print(f"== {corpus}")
    # check.py's own totals count listed deviations as failures; show them reworded, and
    # end with our verdict instead.
    for out_line in p.stdout.split("\n"):
        m = re.match(r"^(queries: )?(\d+) passed, (\d+) failed$", out_line)
        if m:
            what = "queries" if m.group(1) else "scenarios"
            print(f"check.py {what}: {m.group(2)} matched the references, {m.group(3)} did not")
        else:
            print(out_line)
    if p.returncode not in (0, 1):
        print(p.stderr, file=sys.stderr)
        sys.exit(p.returncode)
    scenario = None
    for line in p.stdout.split("\n"):
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
        if is_allowed(key):
            matched.add(key)
        elif corpus in open_corpora and key in open_list:
            still_open.append(f"{corpus}: {line.strip()}")
        else:
            unexpected.append(f"{corpus}: {line.strip()}")
    total_scenarios += len(re.findall(r"^(?:PASS|FAIL) ", p.stdout, re.M))
used = {(s, c) for s, c in allowed if any(k == (s, c) or (k[1] == c and "/".join(k[0].split("/")[-2:]) == s) for k in matched)}
for key in sorted(allowed - used):
    print(f"note: listed deviation {key[0]} {key[1]} now matches the reference; remove it from the list")
open_seen = {k for k in seen if k in open_list}
if still_open:
    print(f"{len(still_open)} listed open mismatch(es) in {len(open_seen)} (case, command) pairs of testdata/conformance-odd/open.txt (issue 14)")
for key in sorted(open_list - seen):
    unexpected.append(f"{key[0]} {key[1]} now matches the references: remove it from testdata/conformance-odd/open.txt")
if unexpected:
    for u in unexpected:
        print(f"unexpected: {u}")
    print(f"{len(unexpected)} unexpected conformance failure(s)")
    bad = {k[0] for k in seen if not is_allowed(k) and not k[0].startswith(("a/", "b/"))}
    print(f"conformance: {total_scenarios - len(bad)} passed, {len(bad)} failed")
    sys.exit(1)
print(f"listed deviations: {len(matched)} ({', '.join(sorted(f'{a} {b}' for a, b in matched))})")
open_scenarios = {k[0] for k in open_seen}
print(f"scenarios with listed open mismatches (issue 14): {len(open_scenarios)}")
print(f"conformance: {total_scenarios - len(open_scenarios)} passed, 0 failed")
