#!/usr/bin/env bash
# Called by scripts/setup.sh: Azurite, the Azure Storage emulator the az://
# tests start (tests/s3/emulators.py), installed with `npm ci` from the
# pinned lock file requirements/azurite/package-lock.json (azurite 3.37.0
# and every package under it) into $WS_CACHE/tools/azurite-<hash>, once per
# machine and lock file, and linked as $WS_VENV/bin/azurite-blob.
# Lifecycle scripts are not run (--ignore-scripts): Azurite needs none.
# Azurite sends telemetry unless started with --disableTelemetry, which the
# tests always pass. Needs Node.js 20 or newer and npm.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/env.sh
source scripts/env.sh
for tool in node npm; do
  command -v "$tool" >/dev/null 2>&1 || { echo "setup: '$tool' is not installed: install Node.js 20 or newer (Azurite, the Azure emulator the tests start)" >&2; exit 1; }
done
lock=requirements/azurite/package-lock.json
hash=$(cat requirements/azurite/package.json "$lock" | sha256sum | cut -c1-16)
dir=$WS_CACHE/tools/azurite-$hash
mkdir -p "$WS_CACHE/tools"
(
  flock 9
  if [ ! -f "$dir/.complete" ]; then
    echo "setup: installing Azurite (npm ci, $lock) into $dir (once per machine)"
    rm -rf "$dir"
    mkdir -p "$dir"
    cp requirements/azurite/package.json "$lock" "$dir/"
    (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
    touch "$dir/.complete"
  fi
) 9>"$dir.lock"
mkdir -p "$WS_VENV/bin"
ln -sfn "$dir/node_modules/.bin/azurite-blob" "$WS_VENV/bin/azurite-blob"
echo "setup: Azurite $(node -p "require('$dir/node_modules/azurite/package.json').version") at $WS_VENV/bin/azurite-blob"
