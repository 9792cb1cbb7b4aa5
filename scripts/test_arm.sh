#!/usr/bin/env bash
# The aarch64 (NEON) kernels: cross-compile weightstream-dequant with
# cargo's aarch64-unknown-linux-gnu target and run its tests, the ISA
# parity suite included, under qemu-user: every NEON kernel against the
# scalar reference, bit for bit. Performance on Arm is not measured here
# (emulation); docs/PERFORMANCE.md says so.
#
# Installs what is missing: the Rust target (rustup) and, as root, Debian's
# gcc-aarch64-linux-gnu (linker and C library) and qemu-user-static.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source scripts/env.sh
TARGET=aarch64-unknown-linux-gnu
say() { echo "test_arm: $*"; }

if ! rustup target list --installed 2>/dev/null | grep -qx "$TARGET"; then
  say "adding the Rust target $TARGET (rustup)"
  rustup target add "$TARGET"
fi
missing=()
command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v qemu-aarch64-static >/dev/null || missing+=(qemu-user-static)
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "test_arm: ${missing[*]} missing and not root: install them (apt-get install ${missing[*]})" >&2; exit 1; }
  say "installing ${missing[*]} (apt-get)"
  # One apt-get at a time: scripts/test.sh may run the other installer beside this one.
  flock /var/lock/weightstream-apt.lock apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive flock /var/lock/weightstream-apt.lock apt-get install -y -q "${missing[@]}" >/dev/null
fi

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
# The CPU qemu emulates: `max` has every extension qemu knows; the kernels
# use baseline NEON only, which every model has.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64-static -cpu max -L /usr/aarch64-linux-gnu"
# A target directory of its own: the host build's is not disturbed.
export CARGO_TARGET_DIR="$ROOT/target/aarch64"
say "clippy (warnings are errors) for $TARGET"
cargo clippy --release --locked --target "$TARGET" -p weightstream-dequant --all-targets -- -D warnings
say "cargo test -p weightstream-dequant under qemu-aarch64 (ISA parity: scalar and neon)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
# Both paths must run (the parity suite fails if one it is told of was skipped).
WEIGHTSTREAM_REQUIRE_ISAS=scalar,neon \
  cargo test --release --locked --target "$TARGET" -p weightstream-dequant -- --nocapture >"$log" 2>&1 || status=$?
# The summary: each test binary's result and which paths were skipped.
grep -E "^(scalar|avx2|avx512|avx512-int|neon): |test result|FAILED|panicked|^error" "$log" | awk '!seen[$0]++' || true
if [ "$status" != 0 ]; then
  tail -n 60 "$log" >&2
  exit "$status"
fi
