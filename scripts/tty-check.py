#!/usr/bin/env python3
"""Checks the `session` command in a real terminal, driven through tmux (send-keys,
capture-pane, pipe-pane):

* `ls` at 60 and at 200 columns: a table no wider than the terminal (display cells,
  wide characters counted twice), its header and every session on it; at 200 columns
  a first message that 60 columns cut shows whole;
* a scan drawn on the terminal: the progress line appears on stderr while `ls`
  scans (`SESSION_PROGRESS_AFTER_MS=0` draws it at once) and is gone from the screen
  once the table is printed; with stderr not a terminal nothing is drawn.

Usage: python3 scripts/tty-check.py [--bin PATH]   (default: target/release/session)
Exits 1 with what failed. Needs tmux.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata

SOCKET = f"session-tty-check-{os.getpid()}"
LONG = "a first message long enough to be cut at sixty columns, with 日本語 wide characters in it"


def tmux(*args, check=True):
    return subprocess.run(["tmux", "-L", SOCKET, *args], check=check, capture_output=True, text=True)


def cells(line):
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 0 if unicodedata.combining(c) else 1 for c in line)


def session_file(bucket, k, text):
    sid = f"019b76da-a800-7000-8000-{k:012d}"
    header = {"type": "session", "version": 3, "id": sid, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/work"}
    entry = {"type": "message", "id": f"{k:08x}", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z",
             "message": {"role": "user", "content": text, "timestamp": 1767225601000 + k}}
    path = os.path.join(bucket, f"2026-01-01T00-00-00-000Z_{sid}.jsonl")
    with open(path, "w") as f:
        f.write(json.dumps(header, ensure_ascii=False) + "\n" + json.dumps(entry, ensure_ascii=False) + "\n")


def wait_for(target, needle, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        screen = tmux("capture-pane", "-p", "-t", target).stdout
        if needle in screen:
            return screen
        time.sleep(0.05)
    raise SystemExit(f"tty-check: {needle!r} never showed in {target}:\n{screen}")


def run_in_pane(name, cols, command, env, log=None):
    """Starts a shell in a new tmux window of `cols` columns, optionally logging every
    byte written to it, and types `command` into it."""
    tmux("new-session", "-d", "-s", name, "-x", str(cols), "-y", "40", "env -i sh")
    if log:
        tmux("pipe-pane", "-o", "-t", name, f"cat >> {log}")
        # tmux starts the pipe's command on its own time: type nothing until it runs,
        # or the first bytes (and on a loaded machine all of them) are never logged.
        deadline = time.time() + 20.0
        while not os.path.exists(log):
            if time.time() > deadline:
                raise SystemExit(f"tty-check: tmux never started the pipe writing {log}")
            time.sleep(0.05)
    exports = " ".join(f"{k}='{v}'" for k, v in env.items())
    tmux("send-keys", "-t", name, f"export {exports}; clear; {command}; echo '[done]'", "Enter")
    return wait_for(name, "[done]")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/session")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    if not shutil.which("tmux"):
        raise SystemExit("tty-check: tmux is not installed (apt-get install tmux)")
    failures = []
    tmp = tempfile.mkdtemp(prefix="session-tty-")
    try:
        home = os.path.join(tmp, "home")
        bucket = os.path.join(home, ".pi", "agent", "sessions", "--work--")
        os.makedirs(bucket)
        session_file(bucket, 1, LONG)
        session_file(bucket, 2, "short")
        env = {"HOME": home, "PATH": "/usr/bin:/bin", "TERM": "xterm-256color", "NO_COLOR": "1"}
        screens = {}
        for cols in (60, 200):
            screen = run_in_pane(f"ls{cols}", cols, f"{binary} --dialect pi ls --cwd /work", env)
            screens[cols] = screen
            lines = [l for l in screen.splitlines() if l.strip() and "[done]" not in l and "export " not in l]
            if not any(l.startswith("MODIFIED") for l in lines):
                failures.append(f"ls at {cols} columns: no table header:\n{screen}")
            widest = max((cells(l) for l in lines), default=0)
            if widest > cols:
                failures.append(f"ls at {cols} columns: a line of {widest} cells:\n{screen}")
            if "2 session(s)" not in screen:
                failures.append(f"ls at {cols} columns: not every session listed:\n{screen}")
        if LONG in screens[60]:
            failures.append("ls at 60 columns: the long first message was not cut")
        if LONG not in screens[200]:
            failures.append(f"ls at 200 columns: the long first message is cut:\n{screens[200]}")

        # A scan long enough to draw: many sessions, no listing cache.
        many = os.path.join(home, ".pi", "agent", "sessions", "--many--")
        os.makedirs(many)
        for k in range(3000):
            session_file(many, 100 + k, f"message {k}")
        log = os.path.join(tmp, "pane.log")
        scan_env = dict(env, SESSION_PROGRESS_AFTER_MS="0", SESSION_NO_CACHE="1")
        screen = run_in_pane("progress", 100, f"{binary} --text --dialect pi ls --cwd /many | tail -n 1", scan_env, log)
        with open(log, "rb") as f:
            raw = f.read().decode("utf-8", "replace")
        if "scanning [" not in raw:
            failures.append(f"progress: no progress line was drawn on the terminal:\n{raw[-2000:]}")
        if "scanning [" in screen:
            failures.append(f"progress: the progress line stayed on the screen:\n{screen}")
        if "3000 session(s)" not in screen:
            failures.append(f"progress: the listing did not finish:\n{screen}")
        # stderr not a terminal: nothing drawn.
        quiet = subprocess.run([binary, "--dialect", "pi", "ls", "--cwd", "/many"], capture_output=True, text=True,
                               env=dict(scan_env))
        if quiet.returncode != 0 or "scanning" in quiet.stderr:
            failures.append(f"progress: drawn without a terminal: {quiet.stderr[:300]!r}")
    finally:
        tmux("kill-server", check=False)
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print(f"tty-check: {f}", file=sys.stderr)
    print(f"tty-check: {'FAILED' if failures else 'ok'} (ls at 60 and 200 columns, progress line)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
