#!/usr/bin/env python3
"""Imported sessions must open in the real pi and omp with the tree and context we compute.

Imports every source of testdata/import (Claude Code transcripts, Codex rollouts) with our
`session import --to pi|omp` into a scratch HOME, imports each again (it must write
nothing), then asks both our `session` command and the real pi / omp (through
../shared/conformance/ref-cli.sh) the read-only questions of scripts/ref-roundtrip.py about
every imported file and diffs the JSON answers.

  python3 scripts/import-roundtrip.py [--ours target/debug/session] [-v]

Exit status 1 when any answer differs or an import fails; 2 when the references are not
installed.
"""
from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("ref_roundtrip", os.path.join(ROOT, "scripts", "ref-roundtrip.py"))
rt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rt)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", default=os.path.join(ROOT, "target", "debug", "session"))
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    if not os.path.exists(rt.REF):
        print(f"the references are not installed ({rt.REF})", file=sys.stderr)
        return 2
    a.ours = os.path.abspath(a.ours)
    rt.OURS = a.ours
    sources = sorted(glob.glob(os.path.join(ROOT, "testdata", "import", "*", "*.jsonl")))
    scratch = tempfile.mkdtemp(prefix="import-roundtrip-")
    problems: list[str] = []
    try:
        home = os.path.join(scratch, "home")
        os.makedirs(home)
        env = dict(os.environ, HOME=home)
        for dialect in ("pi", "omp"):
            for src in sources:
                for attempt in (1, 2):
                    p = subprocess.run([a.ours, "import", src, "--to", dialect, "--json"], env=env, capture_output=True, text=True)
                    if p.returncode != 0:
                        problems.append(f"import {dialect} {os.path.basename(src)}: {p.stderr.strip()[:200]}")
                        break
                    r = json.loads(p.stdout)
                    if attempt == 2 and (r["created"] or r["appended"]):
                        problems.append(f"import {dialect} {os.path.basename(src)} again wrote {r['appended']} entries")
        agents = {"pi": os.path.join(home, ".pi", "agent", "sessions"), "omp": os.path.join(home, ".omp", "agent", "sessions")}
        for dialect, root in agents.items():
            files = sorted(glob.glob(os.path.join(root, "*", "*.jsonl")))
            if len(files) != len(sources):
                problems.append(f"{dialect}: {len(files)} sessions imported from {len(sources)} sources")
            for f in files:
                if dialect == "omp":
                    blobs = os.path.join(os.path.dirname(f), "blobs")
                    if not os.path.exists(blobs) and os.path.isdir(os.path.join(home, ".omp", "agent", "blobs")):
                        shutil.copytree(os.path.join(home, ".omp", "agent", "blobs"), blobs)
                problems += rt.compare(dialect, f, a.verbose)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for p in problems:
        print(p)
    print(f"{len(problems)} difference(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
