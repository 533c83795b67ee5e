#!/usr/bin/env python3
"""Sessions on a server are shared with the real omp: each side loads what the other wrote.

omp 18.3.4's own `SessionManager` on its own server storages (`SqlSessionStorage` through
`bun:sql` on the machine's PostgreSQL and MariaDB and on a SQLite file, `RedisSessionStorage` through
Bun's Redis client on its Redis; scripts/omp-server.ts) and our `session --store URL` work on one table / one
key prefix:

  1. omp writes the corpus generator's scenarios (../shared/conformance/lib/common.mjs,
     damaged ones left out) into the storage; both sides answer `info`, `entries`, `tree`,
     `context`, `context --transcript` and `branch` for every session and `ls` for every
     scenario directory, and the answers must be equal;
  2. we write into the same storage: `append`, `rename` (the title kept in the title
     columns / hash), `extract` and `fork` on omp's sessions, and `push` of a generated
     session (`cargo xtask gen-session`); omp then answers the same queries about every
     session we wrote or changed, and the answers must equal ours.

Blobs stay on the file system on both sides (one `--blob-dir`). Each run uses a table /
key prefix of its own and drops it after.

  python3 scripts/omp-server-roundtrip.py [--count N] [--seed S] [--backend postgres,redis,sqlite,mysql] [-v]

Exit status 1 when any answer differs; 2 when the references are not installed or a
server does not answer.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared", "conformance")
OURS = os.path.join(ROOT, "target", "release", "session")
QUERIES = [["info"], ["entries"], ["tree"], ["context"], ["context", "--transcript"], ["branch"]]
PG_SOCKET = "/var/run/postgresql"
PG_DB = "test"
MY_DB = "test"
REFUSED: list[str] = []  # queries both sides refused (equal answers, listed so none goes unseen)


def runtime_dir() -> str:
    env = os.environ.get("SESSION_CONFORMANCE_RUNTIME") or os.environ.get("HARNESS_RUNTIME")
    if env:
        return os.path.abspath(env)
    in_tree = os.path.join(SHARED, ".runtime")
    if os.path.exists(in_tree):
        return in_tree
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "session-conformance")


class Backend:
    """One table or key prefix of a server, named for both sides."""

    def __init__(self, kind: str, tag: str):
        self.kind = kind
        if kind == "postgres":
            self.name = f"omp_rt_{tag}"
            self.ours = f"postgres:///{PG_DB}?host={PG_SOCKET}&table={self.name}"
            self.omp = {"kind": "postgres", "url": f"postgres://{os.environ.get('USER', 'root')}@127.0.0.1:5432/{PG_DB}", "table": self.name}
        elif kind == "mysql":
            self.name = f"omp_rt_{tag}"
            self.ours = f"mysql://root@127.0.0.1:3306/{MY_DB}?table={self.name}"
            self.omp = {"kind": "mysql", "url": f"mysql://root@127.0.0.1:3306/{MY_DB}", "table": self.name}
        elif kind == "sqlite":
            self.name = f"omp_rt_{tag}"
            self.db = os.path.join(tempfile.gettempdir(), f"omp-rt-{tag}.db")
            self.ours = f"sqlite://{self.db}?table={self.name}"
            self.omp = {"kind": "sqlite", "path": self.db, "table": self.name}
        else:
            self.name = f"omp-rt:{tag}:"
            self.ours = f"redis://127.0.0.1:6379/0?prefix={self.name}"
            self.omp = {"kind": "redis", "url": "redis://127.0.0.1:6379/0", "prefix": self.name}

    def reachable(self) -> bool:
        if self.kind == "sqlite":
            return True
        if self.kind == "mysql":
            return subprocess.run(["mysqladmin", "-uroot", "-h127.0.0.1", "status"], capture_output=True).returncode == 0
        if self.kind == "postgres":
            return subprocess.run(["pg_isready", "-q", "-h", PG_SOCKET], capture_output=True).returncode == 0
        p = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", "6379", "ping"], capture_output=True, text=True)
        return p.stdout.strip() == "PONG"

    def drop(self) -> None:
        if self.kind == "mysql":
            subprocess.run(["mysql", "-uroot", "-h127.0.0.1", MY_DB, "-e", f"DROP TABLE IF EXISTS {self.name}"], capture_output=True)
            return
        if self.kind == "sqlite":
            for p in (self.db, self.db + "-journal", self.db + "-wal", self.db + "-shm"):
                if os.path.exists(p):
                    os.remove(p)
            shutil.rmtree(self.db + ".locks", ignore_errors=True)
            return
        if self.kind == "postgres":
            subprocess.run(["psql", "-q", "-h", PG_SOCKET, "-d", PG_DB, "-c", f"DROP TABLE IF EXISTS {self.name}"], capture_output=True)
            return
        keys = subprocess.run(["redis-cli", "-h", "127.0.0.1", "--scan", "--pattern", f"{self.name}*"], capture_output=True, text=True).stdout.split("\n")
        keys = [k for k in keys if k]
        for i in range(0, len(keys), 200):
            subprocess.run(["redis-cli", "-h", "127.0.0.1", "del", *keys[i:i + 200]], capture_output=True)


def omp_job(job: dict, scratch: str) -> dict:
    """Runs scripts/omp-server.ts on `job` and returns its answer."""
    rt = runtime_dir()
    path = os.path.join(scratch, f"job-{time.monotonic_ns()}.json")
    with open(path, "w") as f:
        json.dump(job, f)
    cmd = [os.path.join(rt, "bin", "bun"), "--preload", os.path.join(SHARED, "lib", "omp-preload.ts"),
           "--preload", os.path.join(ROOT, "scripts", "omp-storage-preload.ts"), os.path.join(ROOT, "scripts", "omp-server.ts"), path]
    p = subprocess.run(cmd, cwd=scratch, capture_output=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"omp-server.ts failed: {p.stderr.decode('utf-8', 'replace').strip()[-2000:]}")
    return json.loads(p.stdout)


def ours(backend: Backend, args: list[str], cwd: str) -> tuple[bool, object]:
    p = subprocess.run([OURS, "--store", backend.ours, "--dialect", "omp", "--as-agent", *args], cwd=cwd, capture_output=True, timeout=120)
    if p.returncode != 0:
        return False, p.stderr.decode("utf-8", "replace").strip()[:300]
    try:
        return True, json.loads(p.stdout)
    except json.JSONDecodeError as e:
        return False, f"not JSON: {e}"


def queries_for(files: list[str], dirs: list[str], blobs: str) -> list[list[str]]:
    qs = [[q[0], f, *q[1:], "--blob-dir", blobs] for f in files for q in QUERIES]
    return qs + [["ls", d, "--cwd", "/tmp", "--blob-dir", blobs] for d in dirs]


def compare(backend: Backend, qs: list[list[str]], scratch: str, verbose: bool) -> list[str]:
    """Asks omp (one process, one fresh storage) and us (one process a query) every query."""
    theirs = omp_job({"backend": backend.omp, "blobs": qs[0][-1], "queries": [q[:-2] for q in qs]}, scratch)["answers"]
    problems = []
    for q, t in zip(qs, theirs):
        ok, mine = ours(backend, q, scratch)
        if not ok and "result" not in t:
            REFUSED.append(f"{backend.kind} {' '.join(q[:2])}: {t['error'][:120]}")
        if ok != ("result" in t) or (ok and mine != t["result"]):
            problems.append(f"{backend.kind} {' '.join(q[:2])}{' ' + ' '.join(q[2:-2]) if q[2:-2] else ''}: ours={str(mine)[:200]} omp={str(t.get('result', t.get('error')))[:200]}")
        elif verbose:
            print(f"  ok {backend.kind} {q[0]} {os.path.basename(q[1])}")
    return problems


def we_write(backend: Backend, omp_files: list[str], root: str, blobs: str, scratch: str) -> tuple[list[str], list[str], list[str]]:
    """Writes into the storage with our command; returns the sessions written, the directories and failures."""
    written, dirs, failures = [], [os.path.join(root, "ours-fork"), os.path.join(root, "ours-push")], []
    b = ["--blob-dir", blobs]

    def step(args: list[str]) -> object:
        ok, out = ours(backend, [*args, *b], scratch)
        if not ok:
            failures.append(f"{backend.kind} ours {' '.join(args[:2])}: {out}")
            return None
        return out

    seen_dirs = set()
    for f in omp_files:
        d = os.path.dirname(f)
        if d in seen_dirs:
            continue
        seen_dirs.add(d)
        ids = step(["entries", f]) or []
        step(["append", f, "--custom-type", "roundtrip", "--data", '{"n":1}'])
        step(["rename", f, "Round trip on a server"])
        written.append(f)
        ids = [i for i in ids if isinstance(i, str)]
        if ids:
            out = step(["extract", f, "--leaf", ids[len(ids) // 2]])
            if isinstance(out, dict) and out.get("path"):
                written.append(out["path"])
        out = step(["fork", f, "--cwd", "/var/tmp", "--session-dir", dirs[0]])
        if isinstance(out, dict) and out.get("path"):
            written.append(out["path"])
    gen = os.path.join(scratch, "generated-omp.jsonl")
    subprocess.run(["cargo", "xtask", "gen-session", "--entries", "200", "--seed", "12", "--dialect", "omp", gen], cwd=ROOT, check=True, capture_output=True)
    target = os.path.join(dirs[1], "2026-01-01T00-00-00-000Z_generated.jsonl")
    os.makedirs(dirs[1], exist_ok=True)
    shutil.copyfile(gen, target)
    if step(["push", target, "--to", backend.ours]) is not None:
        written.append(target)
    os.remove(target)
    return written, dirs, failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=12, help="generator scenarios (damaged ones are left out)")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--backend", default="postgres,redis,sqlite,mysql")
    ap.add_argument("--no-build", action="store_true", help="use target/release/session as it is")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    rt = runtime_dir()
    if not os.path.exists(os.path.join(rt, "omp", "node_modules", "@oh-my-pi", "pi-coding-agent", "dist", "omp-lib.js")):
        print("the references are not installed: run ../shared/conformance/setup.sh first", file=sys.stderr)
        return 2
    if not a.no_build:
        subprocess.run(["cargo", "build", "-q", "--release", "-p", "session-cli"], cwd=ROOT, check=True)
    tag = f"{os.getpid()}_{time.time_ns() % 10**9}"
    problems, total = [], 0
    for kind in a.backend.split(","):
        backend = Backend(kind, tag)
        if not backend.reachable():
            print(f"error: {kind} does not answer (see .ci/run for how to start it)", file=sys.stderr)
            return 2
        scratch = tempfile.mkdtemp(prefix="omp-server-rt-")
        try:
            blobs = os.path.join(scratch, "blobs")
            os.makedirs(blobs)
            # session paths in the storage only; nothing is written under them on disk
            root = os.path.join(scratch, "server")
            gen = omp_job({"backend": backend.omp, "blobs": blobs, "gen": {"seed": a.seed, "count": a.count, "dir": root}}, scratch)
            files = gen["files"]
            dirs = sorted({os.path.dirname(f) for f in files})
            if not files:
                problems.append(f"{kind}: omp wrote no session")
                continue
            qs = queries_for(files, dirs, blobs)
            problems += compare(backend, qs, scratch, a.verbose)
            total += len(qs)
            written, our_dirs, failures = we_write(backend, files, root, blobs, scratch)
            problems += failures
            qs = queries_for(written, dirs + our_dirs, blobs)
            problems += compare(backend, qs, scratch, a.verbose)
            total += len(qs)
            print(f"{kind}: omp wrote {len(files)} sessions, we wrote {len(written)}, {len(problems)} differences so far")
        finally:
            backend.drop()
            shutil.rmtree(scratch, ignore_errors=True)
    for p in problems:
        print("DIFF", p)
    for r in REFUSED:
        print("refused by both:", r)
    print(f"{total} queries on {a.backend}, {len(REFUSED)} refused by both, {len(problems)} differences")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
