#!/usr/bin/env python3
"""Records the real references' answers for hand-written conformance cases.

  python3 scripts/record-cases.py DIR... [--ref-cli PATH] [--timeout S] [--mtime-base MS]

A case is a directory .../<dialect>/<case-name>/ (dialect: pi or omp) holding the session
file(s) written by hand (*.jsonl; omp cases may have blobs/) and queries.json, a JSON array
of argument arrays in which "{dir}" stands for the case's copy, for example
  [["info", "{dir}/a.jsonl"], ["context", "{dir}/a.jsonl", "--leaf", ""],
   ["ls", "{dir}", "--cwd", "/tmp"]]
Every case under each DIR gets an expected.json in the format ../shared/conformance/check.py
reads (session-harness-expected/1), made the way the corpus generator makes it
(../shared/conformance/lib/common.mjs, recordQuery): each query runs
`ref-cli.sh --dialect <dialect> ARGS` once on a fresh temporary copy of the case's inputs,
with the copy as working directory and the case's mtimes applied; `result` is the JSON the
reference printed (null where it failed), `error` the message it failed with, and
`files_after` every file under the copy the query created, changed (`{"text": ...}`, blobs
`{"sha256", "size"}`) or deleted (null), with the copy's path replaced by "{dir}" and the
reference's private home directory by "{home}". A query that does not answer within the
timeout is recorded as an error "did not answer within S s", which check.py's
--lenient-crashes treats as a hang of the reference.

mtimes are fixed: the case's *.jsonl files in name order get MTIME_BASE + (i+1) hours
(or the values of an optional mtimes.json {file: epoch ms} in the case directory).
Standard library only.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_REF_CLI = os.path.join(HERE, "..", "..", "shared", "conformance", "ref-cli.sh")
CASE_FILES = ("expected.json", "queries.json", "mtimes.json", "README.md")

REFERENCES = {
    "pi": {"name": "pi", "package": "@earendil-works/pi-coding-agent", "version": "1.6.0",
           "runtime": "node v22.23.3"},
    "omp": {"name": "omp", "package": "@oh-my-pi/pi-coding-agent", "version": "18.3.4",
            "runtime": "bun 1.3.14"},
}
# the references' private home directories (agent dir, caches), made per process
HOME_RE = re.compile(r"/(?:private/)?[^\"\s]*?/harness-(?:pi|omp)-home-[A-Za-z0-9]+")


def find_cases(root: str) -> list[str]:
    out = []
    for d, _dirs, files in os.walk(root):
        if "queries.json" in files:
            out.append(d)
    return sorted(out)


def copy_inputs(src: str, dst: str) -> None:
    for name in os.listdir(src):
        if name in CASE_FILES:
            continue
        s, t = os.path.join(src, name), os.path.join(dst, name)
        if os.path.isdir(s):
            shutil.copytree(s, t, copy_function=shutil.copyfile)
            os.chmod(t, 0o755)
            for r, dirs, _files in os.walk(t):
                for n in dirs:
                    os.chmod(os.path.join(r, n), 0o755)
        else:
            shutil.copyfile(s, t)


def apply_mtimes(d: str, mtimes: dict) -> None:
    for f, ms in mtimes.items():
        p = os.path.join(d, f)
        if os.path.exists(p):
            os.utime(p, ns=(int(ms) * 1_000_000, int(ms) * 1_000_000))


def snapshot(d: str) -> dict[str, bytes]:
    out = {}
    for r, _dirs, files in os.walk(d):
        for f in files:
            p = os.path.join(r, f)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            with open(p, "rb") as fh:
                out[os.path.relpath(p, d).replace(os.sep, "/")] = fh.read()
    return out


def diff_snapshots(before: dict, after: dict) -> dict:
    changed = {}
    for k, v in after.items():
        if before.get(k) != v:
            if k.startswith("blobs/"):
                changed[k] = {"sha256": hashlib.sha256(v).hexdigest(), "size": len(v)}
            else:
                changed[k] = {"text": v.decode("utf-8", "replace")}
    for k in before:
        if k not in after:
            changed[k] = None
    return changed


def replace_deep(v, work: str):
    if isinstance(v, str):
        return HOME_RE.sub("{home}", v.replace(work, "{dir}"))
    if isinstance(v, list):
        return [replace_deep(x, work) for x in v]
    if isinstance(v, dict):
        return {replace_deep(k, work): replace_deep(x, work) for k, x in v.items()}
    return v


def case_mtimes(case: str, base: int) -> dict:
    p = os.path.join(case, "mtimes.json")
    if os.path.exists(p):
        with open(p, encoding="utf-8") as fh:
            return json.load(fh)
    files = sorted(f for f in os.listdir(case) if f.endswith(".jsonl"))
    return {f: base + (i + 1) * 3_600_000 for i, f in enumerate(files)}


def record_query(case: str, dialect: str, args: list, mtimes: dict, opts) -> dict:
    work = os.path.realpath(tempfile.mkdtemp(prefix="harness-q-"))
    try:
        copy_inputs(case, work)
        apply_mtimes(work, mtimes)
        before = snapshot(work)
        real = [a.replace("{dir}", work) for a in args]
        error = None
        result = None
        try:
            p = subprocess.run(["bash", opts.ref_cli, "--dialect", dialect, *real], cwd=work,
                               capture_output=True, timeout=opts.timeout, start_new_session=True)
            if p.returncode == 0:
                try:
                    result = json.loads(p.stdout.decode("utf-8", "replace"))
                except ValueError as e:
                    error = f"reference printed no JSON value ({e})"
            else:
                msg = p.stderr.decode("utf-8", "replace").strip()
                lines = [ln for ln in msg.splitlines() if ln.startswith("error: ")]
                msg = lines[-1][len("error: "):] if lines else (msg or f"exit status {p.returncode}")
                error = msg
        except subprocess.TimeoutExpired:
            error = f"did not answer within {opts.timeout:g}s"
        after = snapshot(work)
        files_after = diff_snapshots(before, after)
        q = {"args": args, "result": replace_deep(result, work)}
        if error is not None:
            q["error"] = replace_deep(error, work)[:500]
        if files_after:
            q["files_after"] = replace_deep(files_after, work)
        return q
    finally:
        shutil.rmtree(work, ignore_errors=True)


def write_expected(path: str, exp: dict) -> None:
    queries = exp.pop("queries")
    lines = ["{"]
    for k, v in exp.items():
        lines.append(f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))},")
    lines.append('"queries":[')
    for i, q in enumerate(queries):
        lines.append(json.dumps(q, separators=(",", ":")) + ("," if i < len(queries) - 1 else ""))
    lines.append("]}")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def record_case(case: str, opts) -> int:
    dialect = os.path.basename(os.path.dirname(case))
    if dialect not in REFERENCES:
        print(f"record-cases: {case}: the parent directory must be pi or omp (is {dialect!r})", file=sys.stderr)
        return 1
    with open(os.path.join(case, "queries.json"), encoding="utf-8") as fh:
        queries = json.load(fh)
    if not isinstance(queries, list) or not all(isinstance(q, list) and q and all(isinstance(a, str) for a in q) for q in queries):
        print(f"record-cases: {case}/queries.json: must be a JSON array of non-empty arrays of strings", file=sys.stderr)
        return 1
    mtimes = case_mtimes(case, opts.mtime_base)
    recorded = [record_query(case, dialect, q, mtimes, opts) for q in queries]
    exp = {
        "format": "session-harness-expected/1",
        "reference": REFERENCES[dialect],
        "scenario": os.path.basename(case),
        "mtimes": mtimes,
        "queries": recorded,
    }
    write_expected(os.path.join(case, "expected.json"), exp)
    n_err = sum(1 for q in recorded if "error" in q)
    print(f"[{dialect}] {os.path.basename(case)}: {len(recorded)} queries" + (f", {n_err} reference errors" if n_err else ""))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--ref-cli", default=DEFAULT_REF_CLI, help="the references' CLI (default: ../shared/conformance/ref-cli.sh)")
    ap.add_argument("--timeout", type=float, default=20, help="seconds a query may take before it is recorded as a hang")
    ap.add_argument("--mtime-base", type=int, default=1767268800000, help="epoch ms the default mtimes count from (2026-01-01T12:00Z)")
    opts = ap.parse_args()
    opts.ref_cli = os.path.abspath(opts.ref_cli)
    if not os.path.exists(opts.ref_cli):
        print(f"record-cases: {opts.ref_cli} not found; install the references with ../shared/conformance/setup.sh or pass --ref-cli", file=sys.stderr)
        return 2
    cases = [c for d in opts.dirs for c in find_cases(d)]
    if not cases:
        print(f"record-cases: no case (queries.json) under {' '.join(opts.dirs)}", file=sys.stderr)
        return 1
    return max(record_case(c, opts) for c in cases)


if __name__ == "__main__":
    sys.exit(main())
