#!/usr/bin/env python3
"""Files we write must load in the real references with the same tree and context.

Writes sessions with our code, then asks both our `session` command and the real pi /
omp (through ../shared/conformance/ref-cli.sh, installed by ../shared/conformance/setup.sh)
the same read-only questions about them, and diffs the JSON answers.

Sessions written by us:
  * `cargo xtask gen-session` output (every line built by session-model's builders),
    both dialects;
  * the files our `append`, `rename` (omp: the title slot written in place), `extract`
    and `fork` commands leave next to a copy of each scenario of a conformance corpus
    (default: ../shared/conformance/out/public);
  * the sessions the facade's examples write (crates/session/examples/agent_turns.rs,
    omp_session.rs);
  * a copy of each scenario that went on elsewhere (a custom entry and a user message),
    and a copy of what we wrote merged with it (`merge`);
  * the generated sessions synced between two homes through a folder (`sync`): the
    copy downloaded with its `cwd` rewritten, then both continued and merged;
  * omp: the files `persist_copy`, `fork`, `move_to` (plus an atomic batch),
    `create_empty_session_file` and `new_session` write beside each such copy
    (crates/session/examples/lifecycle_files.rs).

  python3 scripts/ref-roundtrip.py [--corpus DIR] [--entries N] [--limit N] [-v]

Exit status 1 when any answer differs. Needs the references installed; says so and
exits 2 when they are not.
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
OURS = os.path.join(ROOT, "target", "release", "session")
REF = os.path.join(SHARED, "ref-cli.sh")
QUERIES = [["info"], ["entries"], ["tree"], ["context"], ["branch"]]


def run(cmd: list[str], cwd: str) -> tuple[int, object]:
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, timeout=120)
    if p.returncode != 0:
        return p.returncode, p.stderr.decode("utf-8", "replace").strip()[:200]
    try:
        return 0, json.loads(p.stdout)
    except json.JSONDecodeError as e:
        return 99, f"not JSON: {e}"


def compare(dialect: str, path: str, verbose: bool) -> list[str]:
    """Asks both sides every query about `path` (each on a fresh copy) and returns differences."""
    problems = []
    extra = ["--blob-dir", os.path.join(os.path.dirname(path), "blobs")] if dialect == "omp" else []
    for q in QUERIES:
        answers = []
        for side in ("ours", "ref"):
            work = tempfile.mkdtemp(prefix="roundtrip-")
            try:
                for name in os.listdir(os.path.dirname(path)):
                    src = os.path.join(os.path.dirname(path), name)
                    (shutil.copytree if os.path.isdir(src) else shutil.copyfile)(src, os.path.join(work, name))
                target = os.path.join(work, os.path.basename(path))
                args = [q[0], target, *q[1:], *[a.replace(os.path.dirname(path), work) for a in extra]]
                cmd = [OURS, "--dialect", dialect, "--as-agent", *args] if side == "ours" else [REF, "--dialect", dialect, *args]
                code, out = run(cmd, work)
                answers.append((code, json.loads(json.dumps(out).replace(work, "{dir}"))))
            finally:
                shutil.rmtree(work, ignore_errors=True)
        (oc, ours), (rc, ref) = answers
        if (oc == 0) != (rc == 0) or (oc == 0 and ours != ref):
            problems.append(f"{dialect} {q[0]} {os.path.basename(path)}: ours={str(ours)[:160]} ref={str(ref)[:160]}")
        elif verbose:
            print(f"  ok {dialect} {q[0]} {os.path.basename(path)}")
    return problems


def written_by_us(corpus: str, limit: int, scratch: str) -> list[tuple[str, str]]:
    """Runs our append/extract/fork on copies of corpus scenarios; returns the files we wrote."""
    out = []
    for dialect in ("pi", "omp"):
        base = os.path.join(corpus, dialect)
        if not os.path.isdir(base):
            continue
        for scen in sorted(os.listdir(base))[:limit]:
            src = os.path.join(base, scen)
            if not os.path.isdir(src) or "damaged" in scen:
                continue
            work = os.path.join(scratch, f"{dialect}-{scen}")
            shutil.copytree(src, work, ignore=shutil.ignore_patterns("expected.json"))
            files = sorted(f for f in os.listdir(work) if f.endswith(".jsonl"))
            if not files:
                continue
            first = os.path.join(work, files[0])
            before = set(os.listdir(work))
            blob = ["--blob-dir", os.path.join(work, "blobs")] if dialect == "omp" else []
            code, ids = run([OURS, "--dialect", dialect, "entries", first, *blob], work)
            # A copy that goes on elsewhere, merged below into a copy of what we write here.
            theirs = os.path.join(work, "elsewhere-" + files[0])
            shutil.copyfile(first, theirs)
            went_on_elsewhere(dialect, theirs, work, blob)
            subprocess.run([OURS, "--dialect", dialect, "append", first, "--custom-type", "roundtrip", "--data", '{"n":1}', *blob], cwd=work, capture_output=True)
            subprocess.run([OURS, "--dialect", dialect, "rename", first, "Round trip", *blob], cwd=work, capture_output=True)
            if code == 0 and ids:
                leaf = [i for i in ids if isinstance(i, str)][len(ids) // 2]
                subprocess.run([OURS, "--dialect", dialect, "extract", first, "--leaf", leaf, *blob], cwd=work, capture_output=True)
            subprocess.run([OURS, "--dialect", dialect, "fork", first, "--cwd", "/var/tmp", "--session-dir", work, *blob], cwd=work, capture_output=True)
            merged = os.path.join(work, "merged-" + files[0])
            shutil.copyfile(first, merged)
            p = subprocess.run([OURS, "--dialect", dialect, "merge", merged, theirs], cwd=work, capture_output=True, text=True)
            if p.returncode != 0:
                raise SystemExit(f"merge failed on {first}: {p.stderr.strip()[:300]}")
            with open(merged, encoding="utf-8") as f:
                text = f.read()
            if text.count('"id":"e15e0001"') != 1 or '"customType":"elsewhere"' not in text:
                raise SystemExit(f"{merged}: the other copy's entries are not merged in once")
            out.append((dialect, first))
            out += [(dialect, os.path.join(work, f)) for f in sorted(set(os.listdir(work)) - before) if f.endswith(".jsonl")]
            if dialect == "omp":
                out += lifecycle_files(first, os.path.join(work, "blobs"))
    return out


def went_on_elsewhere(dialect: str, path: str, work: str, blob: list[str]) -> None:
    """Continues the copy `path` as another machine would: a custom entry through our
    command, then a user message line as the agent writes it."""
    subprocess.run([OURS, "--dialect", dialect, "append", path, "--custom-type", "elsewhere", "--data", '{"n":2}', *blob],
                   cwd=work, capture_output=True, check=True)
    code, ids = run([OURS, "--dialect", dialect, "entries", path, *blob], work)
    if code != 0 or not ids:
        raise SystemExit(f"entries failed on {path}: {ids}")
    leaf = [i for i in ids if isinstance(i, str)][-1]
    line = {"type": "message", "id": "e15e0001", "parentId": leaf, "timestamp": "2026-01-02T00:00:00.000Z",
            "message": {"role": "user", "content": "from elsewhere", "timestamp": 1767312000000}}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line, separators=(",", ":")) + "\n")


def synced_files(scratch: str, sources: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Two homes whose clones of one project differ in path sync each source session
    through a folder: B downloads it (its `cwd` rewritten for B), both go on with a
    custom entry of their own, and A, B, A sync again (a merge on both sides). Returns
    both machines' copies."""
    out = []
    remote = os.path.join(scratch, "sync-remote")
    homes = {}
    for tag in ("a", "b"):
        home = os.path.join(scratch, f"sync-{tag}", "home")
        project = os.path.join(scratch, f"sync-{tag}", "src", f"app-{tag}")
        os.makedirs(os.path.join(project, ".git"))
        with open(os.path.join(project, ".git", "config"), "w") as f:
            f.write('[remote "origin"]\n\turl = git@example.org:me/app.git\n')
        os.makedirs(home)
        homes[tag] = (home, project)

    def session(tag: str, *args: str) -> subprocess.CompletedProcess:
        home, project = homes[tag]
        env = {**os.environ, "HOME": home, "XDG_CONFIG_HOME": os.path.join(home, ".config"),
               "XDG_STATE_HOME": os.path.join(home, ".state"), "XDG_CACHE_HOME": os.path.join(home, ".cache"),
               "SESSION_NO_CACHE": "1"}
        for var in ("PI_CODING_AGENT_DIR", "OMP_CODING_AGENT_DIR", "PI_CODING_AGENT_SESSION_DIR"):
            env.pop(var, None)
        p = subprocess.run([OURS, *args], cwd=project, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"session {' '.join(args)} ({tag}): {p.stderr.strip()[:300]}")
        return p

    def find(tag: str, dialect: str, name: str) -> str:
        home, _ = homes[tag]
        root = os.path.join(home, ".pi" if dialect == "pi" else ".omp", "agent", "sessions")
        found = [os.path.join(d, name) for d, _, names in os.walk(root) if name in names]
        if len(found) != 1:
            raise SystemExit(f"{name} in {root}: {found}")
        return found[0]

    placed = []
    for dialect, src in sources:
        # A's copy of the session, moved into A's bucket of its clone (our `move`).
        tmp = os.path.join(scratch, "sync-src", os.path.basename(src))
        os.makedirs(os.path.dirname(tmp), exist_ok=True)
        shutil.copyfile(src, tmp)
        session("a", "--dialect", dialect, "move", tmp, "--cwd", homes["a"][1])
        placed.append((dialect, os.path.basename(src)))
    def sync(tag: str) -> None:
        session(tag, "sync", "--to", remote, "--map", f"example.org/me/app={homes[tag][1]}")

    sync("a")
    sync("b")
    for tag in ("a", "b"):
        for dialect, name in placed:
            session(tag, "--dialect", dialect, "append", find(tag, dialect, name),
                    "--custom-type", f"machine-{tag}", "--data", '{"n":3}')
    for tag in ("a", "b", "a"):
        sync(tag)
    for tag in ("a", "b"):
        for dialect, name in placed:
            copy = find(tag, dialect, name)
            with open(copy, encoding="utf-8") as f:
                text = f.read()
            # Both machines' entries, once each: the sync merged.
            for t in ("a", "b"):
                if text.count(f'"customType":"machine-{t}"') != 1:
                    raise SystemExit(f"{copy}: machine {t}'s entry is not there exactly once")
            out.append((dialect, copy))
    return out


def lifecycle_files(session: str, blobs: str) -> list[tuple[str, str]]:
    """Runs omp's lifecycle operations (crates/session/examples/lifecycle_files.rs) beside `session`."""
    p = subprocess.run(["cargo", "run", "-q", "--release", "-p", "agent-session-store", "--example", "lifecycle_files", "--", session, blobs],
                       cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        # Not a smaller check: a run that cannot write these files fails.
        raise SystemExit(f"lifecycle_files failed on {session}: {p.stderr.strip()[:300]}")
    files = [line for line in p.stdout.splitlines() if line.endswith(".jsonl")]
    for f in files:
        # A moved session's directory gets the blob store the queries read.
        target = os.path.join(os.path.dirname(f), "blobs")
        if os.path.isdir(blobs) and not os.path.exists(target):
            shutil.copytree(blobs, target)
    return [("omp", f) for f in files]


def example_files(scratch: str) -> list[tuple[str, str]]:
    """The sessions the facade's examples write, kept in `scratch`: the example agent's pi
    session (crates/session/examples/agent_turns.rs: typed turns with a tool call and its
    result, a branch with a summary) and omp_session.rs's omp session and its fork."""
    out = []
    for example, dialect in (("agent_turns", "pi"), ("omp_session", "omp")):
        keep = os.path.join(scratch, example)
        p = subprocess.run(["cargo", "run", "-q", "--release", "-p", "agent-session-store", "--example", example, "--", "--keep", keep],
                           cwd=ROOT, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"{example} failed: {p.stderr.strip()[:300]}")
        files = [line for line in p.stdout.splitlines() if line.startswith(keep) and line.endswith(".jsonl")]
        if not files:
            raise SystemExit(f"{example} printed no kept file")
        out += [(dialect, f) for f in files]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=os.path.join(SHARED, "out", "public"))
    ap.add_argument("--entries", type=int, default=300)
    ap.add_argument("--limit", type=int, default=12, help="scenarios per dialect")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    probe = subprocess.run([REF, "--dialect", "pi", "--help"], capture_output=True)
    if not os.path.exists(REF) or b"setup.sh" in probe.stderr:
        print("the references are not installed: run ../shared/conformance/setup.sh first", file=sys.stderr)
        return 2
    subprocess.run(["cargo", "build", "-q", "--release", "-p", "session-cli"], cwd=ROOT, check=True)
    scratch = tempfile.mkdtemp(prefix="roundtrip-src-")
    try:
        files = []
        for dialect in ("pi", "omp"):
            d = os.path.join(scratch, f"gen-{dialect}")
            os.makedirs(d)
            f = os.path.join(d, f"generated-{dialect}.jsonl")
            subprocess.run(["cargo", "xtask", "gen-session", "--entries", str(a.entries), "--seed", "11", "--dialect", dialect, f], cwd=ROOT, check=True)
            files.append((dialect, f))
        files += synced_files(scratch, list(files))
        files += example_files(scratch)
        files += written_by_us(a.corpus, a.limit, scratch)
        problems = []
        for dialect, f in files:
            problems += compare(dialect, f, a.verbose)
        for p in problems:
            print("DIFF", p)
        print(f"{len(files)} files written by us, {len(files) * len(QUERIES)} queries, {len(problems)} differences")
        return 1 if problems else 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
