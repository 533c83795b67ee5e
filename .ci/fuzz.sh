#!/usr/bin/env bash
# CI's fuzz step (called by .ci/run): every cargo-fuzz target of fuzz/ for a short
# fixed slice, seeded from testdata/; fails on any crash (see fuzz/README.md).
# Installs the pinned cargo-fuzz when it is missing; the whole step (install, build,
# runs) is meant to stay within about five minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.2 # keep in step with CARGO_FUZZ_VERSION in xtask/src/fuzz.rs
SLICE_SECS=20             # per target; `cargo xtask fuzz` alone runs 300 s each

if ! cargo fuzz --version 2>/dev/null | grep -qF "$CARGO_FUZZ_VERSION"; then
  echo "== fuzz: installing cargo-fuzz $CARGO_FUZZ_VERSION"
  # A debug build: cargo-fuzz only drives cargo and libFuzzer, and compiles in half the time.
  cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION" --debug
fi
echo "== fuzz ($SLICE_SECS s per target)"
cargo xtask fuzz --time "$SLICE_SECS"
