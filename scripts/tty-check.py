#!/usr/bin/env python3
"""Checks the `session` command in a real terminal, driven through tmux (send-keys,
capture-pane, pipe-pane):

* `ls` at 60 and at 200 columns: a table no wider than the terminal (display cells,
  wide characters counted twice), its header and every session on it; at 200 columns
  a first message that 60 columns cut shows whole;
* a scan drawn on the terminal: the progress line appears on stderr while `ls`
  scans (`SESSION_PROGRESS_AFTER_MS=0` draws it at once) and is gone from the screen
  once the table is printed; with stderr not a terminal nothing is drawn;
* the picker (`session pick`, and plain `session`) over a generated home of 10,000 sessions, at 80x24,
  200x50 and 40x10: the first paint shows sessions within the width, typing filters,
  the preview shows the transcript, Enter runs a stub `pi` (SESSION_PI_BIN) with
  `--session PATH` in the session's directory, `d` asks before the trash and the file
  leaves the sessions folder only after `y`, a resized window is drawn again, and `q`
  gives the terminal back; without a terminal it exits 2.

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


def done(screen):
    """Whether the command typed has finished: `[done]` printed, not the `echo '[done]'`
    of the command line itself."""
    return any(l.rstrip().endswith("[done]") and "echo" not in l for l in screen.splitlines())


def wait_for(target, needle, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        screen = tmux("capture-pane", "-p", "-t", target).stdout
        if done(screen) if needle == "[done]" else needle in screen:
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


def pick_home(home, proj, n):
    """Writes `n` pi sessions of the project `proj` quickly (one user and one assistant
    message each); session k's first message is "question k about …", its answer
    "answer k: zebra<k>"."""
    bucket = os.path.join(home, ".pi", "agent", "sessions", "--" + proj.strip("/").replace("/", "-") + "--")
    os.makedirs(bucket)
    usage = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
    for k in range(n):
        sid = f"019b76da-a800-7000-8000-{k:012d}"
        ts = 1767225601000 + k * 60000
        header = {"type": "session", "version": 3, "id": sid, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": proj}
        user = {"type": "message", "id": f"{k:08x}", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z",
                "message": {"role": "user", "content": f"question {k} about the parser number {k * 7}", "timestamp": ts}}
        answer = {"type": "message", "id": f"a{k:07x}", "parentId": f"{k:08x}", "timestamp": "2026-01-01T00:00:02.000Z",
                  "message": {"role": "assistant", "content": [{"type": "text", "text": f"answer {k}: zebra{k}"}],
                              "api": "x", "provider": "x", "model": "m", "usage": usage, "stopReason": "stop",
                              "timestamp": ts + 1}}
        with open(os.path.join(bucket, f"2026-01-01T00-00-00-000Z_{sid}.jsonl"), "w") as f:
            f.write(json.dumps(header) + "\n" + json.dumps(user) + "\n" + json.dumps(answer) + "\n")
    return bucket


def screen_of(target):
    return tmux("capture-pane", "-p", "-t", target).stdout


def wait_until(target, ok, what, timeout=20.0):
    deadline = time.time() + timeout
    screen = ""
    while time.time() < deadline:
        screen = screen_of(target)
        if ok(screen):
            return screen
        time.sleep(0.02)
    raise PickFailure(f"{what} never showed in {target}:\n{screen}")


class PickFailure(Exception):
    pass


def start_pick(name, cols, rows, command, env, cwd):
    """Opens a window of `cols`x`rows` with a shell in `cwd` and starts `command` in
    it; returns the seconds from typing the command to the first session on screen."""
    tmux("new-session", "-d", "-s", name, "-x", str(cols), "-y", str(rows), "env -i sh")
    exports = " ".join(f"{k}='{v}'" for k, v in env.items())
    tmux("send-keys", "-t", name, f"export {exports}; cd '{cwd}'; clear", "Enter")
    wait_until(name, lambda s: "export" not in s, "a clear screen")
    start = time.time()
    tmux("send-keys", "-t", name, f"{command}; echo '[done]'", "Enter")
    wait_until(name, lambda s: "question " in s, "the first paint")
    return time.time() - start


def widest(screen):
    return max((cells(l.rstrip()) for l in screen.splitlines()), default=0)


def check_pick(binary, tmp, failures):
    home = os.path.join(tmp, "pick-home")
    proj = os.path.join(tmp, "proj")
    os.makedirs(proj)
    started = time.time()
    bucket = pick_home(home, proj, 10000)
    made = time.time() - started
    log = os.path.join(tmp, "stub-pi.log")
    stub = os.path.join(tmp, "stub-pi")
    with open(stub, "w") as f:
        f.write(f"#!/bin/sh\n{{ printf 'argv:'; printf ' %s' \"$@\"; echo; echo \"cwd: $(pwd)\"; }} > '{log}'\n")
    os.chmod(stub, 0o755)
    env = {"HOME": home, "PATH": "/usr/bin:/bin", "TERM": "xterm-256color", "NO_COLOR": "1",
           "XDG_CACHE_HOME": os.path.join(tmp, "cache"), "SESSION_PI_BIN": stub}
    # The listing cache made once, as any earlier run makes it.
    subprocess.run([binary, "ls"], cwd=proj, env=env, capture_output=True, check=True)
    timings = {}
    pick = f"{binary} pick"
    try:
        # First paint at each size: sessions, within the width; q gives the terminal back.
        for cols, rows in ((80, 24), (200, 50), (40, 10)):
            name = f"pick{cols}"
            # Plain `session` on a terminal is the picker too.
            command = binary if cols == 40 else pick
            timings[f"{cols}x{rows}"] = start_pick(name, cols, rows, command, env, proj)
            screen = wait_until(name, lambda s: "10000/10000" in s, "every session counted")
            if widest(screen) > cols:
                failures.append(f"pick at {cols}x{rows}: a line of {widest(screen)} cells:\n{screen}")
            if "question 9999 about" not in screen:
                failures.append(f"pick at {cols}x{rows}: the newest session is not first:\n{screen}")
            if cols >= 80 and "answer 9999: zebra9999" not in screen:
                wait_until(name, lambda s: "answer 9999: zebra9999" in s, "the preview of the newest session")
            if cols == 200 and "PROJECT" not in screen:
                failures.append(f"pick at 200 columns: no PROJECT column:\n{screen}")
            tmux("send-keys", "-t", name, "q")
            screen = wait_until(name, done, "the shell after q")
            if "MODIFIED" in screen:
                failures.append(f"pick at {cols}x{rows}: the picker stayed on the screen after q:\n{screen}")
            tmux("kill-session", "-t", name)

        # Typing filters, the preview follows, Enter runs the agent in the session's folder.
        name = "pickopen"
        start_pick(name, 80, 24, pick, env, proj)
        tmux("send-keys", "-t", name, "-l", "/question 4242")
        start = time.time()
        screen = wait_until(name, lambda s: any(l.startswith("> question 4242") for l in s.splitlines())
                            and "answer 4242: zebra4242" in s, "the filtered list and its preview")
        timings["filter+preview"] = time.time() - start
        first = [l for l in screen.splitlines() if "question" in l and not l.startswith(">")][0]
        if "question 4242 about" not in first:
            failures.append(f"pick: the best match is not first:\n{screen}")
        tmux("send-keys", "-t", name, "Enter")
        after = wait_until(name, done, "the shell after Enter")
        want = os.path.join(bucket, "2026-01-01T00-00-00-000Z_019b76da-a800-7000-8000-000000004242.jsonl")
        got = open(log).read() if os.path.exists(log) else "(the stub never ran)"
        if got != f"argv: --session {want}\ncwd: {proj}\n":
            failures.append(f"pick: Enter ran the agent as\n{got}\nnot with --session {want} in {proj}:\n{after}")
        tmux("kill-session", "-t", name)

        # The trash asks first; the file leaves only after y. A resize redraws.
        name = "picktrash"
        start_pick(name, 80, 24, pick, env, proj)
        victim = os.path.join(bucket, "2026-01-01T00-00-00-000Z_019b76da-a800-7000-8000-000000004243.jsonl")
        tmux("send-keys", "-t", name, "-l", "/question 4243")
        wait_until(name, lambda s: "answer 4243: zebra4243" in s, "the session to trash")
        tmux("send-keys", "-t", name, "Escape")
        # The filter's cursor goes; a key sent sooner after Esc would read as Alt+key.
        wait_until(name, lambda s: "▏" not in s.splitlines()[0], "the list after Esc")
        tmux("send-keys", "-t", name, "d")
        wait_until(name, lambda s: "to the trash? [y/N]" in s, "the question")
        if not os.path.exists(victim):
            failures.append("pick: the session left before the answer")
        tmux("send-keys", "-t", name, "n")
        wait_until(name, lambda s: "nothing moved to the trash" in s, "the refusal")
        if not os.path.exists(victim):
            failures.append("pick: the session left after n")
        tmux("send-keys", "-t", name, "d")
        wait_until(name, lambda s: "to the trash? [y/N]" in s, "the question again")
        tmux("send-keys", "-t", name, "y")
        wait_until(name, lambda s: "moved to the trash; session trash restore" in s, "the move")
        if os.path.exists(victim):
            failures.append("pick: the session is still in its folder after y")
        trash = os.path.join(home, ".pi", "agent", "session-trash")
        kept = [f for _, _, fs in os.walk(trash) for f in fs if f == os.path.basename(victim)]
        if not kept:
            failures.append(f"pick: the trashed session is not in {trash}")
        tmux("resize-window", "-t", name, "-x", "40", "-y", "10")
        screen = wait_until(name, lambda s: len(s.splitlines()) <= 10 and "NAME / FIRST" in s
                            and "AGENT" not in s, "the list redrawn at 40x10")
        if widest(screen) > 40:
            failures.append(f"pick: after a resize to 40x10 a line of {widest(screen)} cells:\n{screen}")
        tmux("resize-window", "-t", name, "-x", "200", "-y", "50")
        wait_until(name, lambda s: "PROJECT" in s, "the list redrawn at 200x50")
        tmux("send-keys", "-t", name, "q")
        wait_until(name, done, "the shell after q")
        tmux("kill-session", "-t", name)
    except PickFailure as e:
        failures.append(f"pick: {e}")

    # Without a terminal: said on stderr, exit status 2 (plain `session` too).
    for argv in ([binary, "pick"], [binary]):
        r = subprocess.run(argv, cwd=proj, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if r.returncode != 2 or "terminal" not in r.stderr:
            failures.append(f"{' '.join(argv[1:]) or '(no command)'} without a terminal: exit {r.returncode}, "
                            f"{r.stderr[:300]!r}")
    print(f"tty-check: pick: home of 10000 sessions made in {made:.1f} s; first paint (typing the command to "
          "sessions on screen, through tmux): " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in timings.items()))


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
            if not any(l.split()[:2] in (["MODIFIED", "AGENT"], ["PIN", "MODIFIED"]) for l in lines):
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

        check_pick(binary, tmp, failures)
    finally:
        tmux("kill-server", check=False)
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print(f"tty-check: {f}", file=sys.stderr)
    print(f"tty-check: {'FAILED' if failures else 'ok'} (ls at 60 and 200 columns, progress line, pick)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
