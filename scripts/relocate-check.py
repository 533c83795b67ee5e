#!/usr/bin/env python3
"""`session relocate OLD NEW` checked by the real pi and omp.

For each agent, in a fresh HOME, the reference itself writes sessions under a project
folder, its subfolders and a sibling folder whose name only starts like it (each session
with an artifacts folder, some with a second branch); our `session relocate` moves the
project (a dry run first, which must change nothing, then `--yes`, then once more, which
must find nothing); the reference then lists the old and the new folders, opens every
moved session from its new bucket with the same leaf, branch and context as before, and
resumes the newest session of the new folder (scripts/relocate-ref.mjs does the work).

  python3 scripts/relocate-check.py [--bin target/release/session]

Exit status 1 when a reference disagrees; 2 when the references are not installed
(../shared/conformance/setup.sh installs them).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared", "conformance")
SCRIPT = os.path.join(ROOT, "scripts", "relocate-ref.mjs")


def runtime() -> str:
    rt = os.environ.get("SESSION_CONFORMANCE_RUNTIME")
    if rt:
        return rt
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "session-conformance")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "session"))
    args = ap.parse_args()
    rt = os.path.abspath(runtime())
    node, bun = os.path.join(rt, "bin", "node22"), os.path.join(rt, "bin", "bun")
    preload = os.path.join(SHARED, "lib", "omp-preload.ts")
    if not (os.path.exists(node) and os.path.exists(bun) and os.path.exists(preload)):
        print(f"relocate-check: the references are not installed in {rt} (../shared/conformance/setup.sh)", file=sys.stderr)
        return 2
    ours = os.path.abspath(args.bin)
    failed = False
    for agent, cmd in (("pi", [node]), ("omp", [bun, "--preload", preload])):
        home = tempfile.mkdtemp(prefix=f"relocate-{agent}-")
        try:
            env = {k: v for k, v in os.environ.items() if k not in ("PI_CODING_AGENT_DIR", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME")}
            env.update(HOME=home, SESSION_CONFORMANCE_RUNTIME=rt)
            p = subprocess.run([*cmd, SCRIPT, "--agent", agent, "--ours", ours, "--runtime", rt, "--home", home],
                               env=env, cwd=home, capture_output=True, text=True, timeout=300)
            try:
                report = json.loads(p.stdout.strip().splitlines()[-1])
            except (IndexError, json.JSONDecodeError):
                print(f"relocate-check {agent}: no report (exit {p.returncode}):\n{p.stdout}{p.stderr}", file=sys.stderr)
                failed = True
                continue
            if p.returncode != 0 or report["problems"]:
                failed = True
                print(f"relocate-check {agent}: {len(report['problems'])} problem(s)")
                for line in report["problems"]:
                    print(f"  {line}")
            else:
                print(f"relocate-check {agent}: {report['sessions']} sessions; the moved ones listed, opened and resumed from the new folder")
        finally:
            shutil.rmtree(home, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
