#!/usr/bin/env python3
"""Pins are shared with the real omp: `session pin` and omp's own `/pin` write one list.

In a home of its own, omp 18.3.4's `toggleSessionPin` (src/session/session-pins.ts, run by
Bun) pins ids of its own while our `session pin` pins omp sessions, at the same time, in
`<agent dir>/session-pins.json`; both take omp's cross-process lock of the file. Then:

  1. every pin of both sides is in the list (no read-modify-write lost another's);
  2. the file's bytes are what omp writes for that list (`JSON.stringify(ids, null, "\\t")`);
  3. omp's `loadPinnedSessionIds` reads exactly the pins our `ls --json` marks `pinned`;
  4. after `session unpin` of half our sessions and omp's toggles taking its own pins
     off, both sides read the same remaining list.

  python3 scripts/omp-pins-roundtrip.py [--count N] [-v]

Run `cargo build --release` first. Exit status 1 when a check fails; 2 when the
references are not installed.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared", "conformance")
OURS = os.path.join(ROOT, "target", "release", "session")


def runtime_dir() -> str:
    env = os.environ.get("SESSION_CONFORMANCE_RUNTIME") or os.environ.get("HARNESS_RUNTIME")
    if env:
        return os.path.abspath(env)
    in_tree = os.path.join(SHARED, ".runtime")
    if os.path.exists(in_tree):
        return in_tree
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "session-conformance")


TOGGLE = """
import { loadPinnedSessionIds, toggleSessionPin } from "%(pins)s";
const [dir, mode, count] = [process.argv[2], process.argv[3], Number(process.argv[4])];
if (mode === "toggle") {
    for (let i = 0; i < count; i++) await toggleSessionPin(`omp-side-${i}`, dir);
}
console.log(JSON.stringify([...(await loadPinnedSessionIds(dir))]));
"""


def slot() -> str:
    base = '{"type":"title","v":1,"title":"","updatedAt":"2026-01-01T00:00:00.000Z","pad":""}'
    return base.replace('"pad":""', '"pad":"%s"' % (" " * (255 - len(base))))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=20, help="sessions pinned by each side")
    ap.add_argument("-v", action="store_true", help="print each step")
    a = ap.parse_args()
    rt = runtime_dir()
    bun = os.path.join(rt, "bin", "bun")
    pins = os.path.join(rt, "omp", "node_modules", "@oh-my-pi", "pi-coding-agent", "src", "session", "session-pins.ts")
    if not (os.path.exists(bun) and os.path.exists(pins)):
        print(f"omp 18.3.4 is not installed under {rt} (see ../shared/conformance/setup.sh)", file=sys.stderr)
        return 2
    if not os.path.exists(OURS):
        print(f"{OURS} is missing: run cargo build --release", file=sys.stderr)
        return 2
    failed = 0

    def check(ok: bool, what: str) -> None:
        nonlocal failed
        print(("ok    " if ok else "FAIL  ") + what)
        failed += 0 if ok else 1

    with tempfile.TemporaryDirectory(prefix="omp-pins-") as tmp:
        home = os.path.join(tmp, "home")
        agent = os.path.join(home, ".omp", "agent")
        bucket = os.path.join(agent, "sessions", "--w--")
        os.makedirs(bucket)
        ids = [f"019a0000-0000-7000-8000-{i:012x}" for i in range(a.count)]
        files = []
        for i, sid in enumerate(ids):
            f = os.path.join(bucket, f"2026-01-01T00-00-00-000Z_{sid}.jsonl")
            header = {"type": "session", "version": 3, "id": sid, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"}
            with open(f, "w") as out:
                out.write(slot() + "\n" + json.dumps(header, separators=(",", ":")) + "\n")
            files.append(f)
        script = os.path.join(tmp, "toggle.ts")
        with open(script, "w") as out:
            out.write(TOGGLE % {"pins": pins})
        env = dict(os.environ, HOME=home, SESSION_NO_CACHE="1")
        for k in ("PI_CODING_AGENT_DIR", "PI_CONFIG_DIR", "XDG_DATA_HOME", "XDG_STATE_HOME"):
            env.pop(k, None)

        def omp(mode: str, count: int) -> set[str]:
            p = subprocess.run([bun, script, agent, mode, str(count)], capture_output=True, text=True, env=env, timeout=300)
            if p.returncode != 0:
                raise RuntimeError(p.stderr[-2000:])
            return set(json.loads(p.stdout.strip().splitlines()[-1]))

        def ours(*args: str) -> str:
            p = subprocess.run([OURS, *args], capture_output=True, text=True, env=env, timeout=120)
            if p.returncode != 0:
                raise RuntimeError(f"session {' '.join(args)}: {p.stderr}")
            return p.stdout

        # 1. Both sides at once.
        toggler = subprocess.Popen([bun, script, agent, "toggle", str(a.count)], stdout=subprocess.PIPE, env=env, text=True)
        for f in files:
            ours("pin", f)
        toggler.communicate(timeout=300)
        path = os.path.join(agent, "session-pins.json")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        listed = json.loads(text)
        want = set(ids) | {f"omp-side-{i}" for i in range(a.count)}
        check(set(listed) == want and len(listed) == len(want), f"all {len(want)} pins of both sides are in the list")
        # 2. omp's bytes.
        check(text == json.dumps(listed, indent="\t", ensure_ascii=False), "the list is written as omp writes it")
        # 3. omp reads what our ls marks pinned.
        ls = json.loads(ours("--json", "ls", "--all"))
        marked = {s["id"] for s in ls if s.get("pinned")}
        check(marked == set(ids) and omp("read", 0) >= marked, "omp's pins are what our ls marks pinned")
        # 4. Taking pins off on both sides.
        for f in files[: a.count // 2]:
            ours("unpin", f)
        after = omp("toggle", a.count)
        check(after == set(ids[a.count // 2 :]), "after unpinning on both sides both read the same list")
        if a.v:
            print(json.dumps(sorted(after), indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
