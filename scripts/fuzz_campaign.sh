#!/usr/bin/env bash
# A fuzz campaign, run by hand outside CI (hours, not minutes): every target
# (or those named) until it has executed RUNS inputs (default 10 million) or
# MAX_SECONDS have passed (default 6 hours per target), through
# scripts/fuzz.sh (AddressSanitizer, the corpus kept and grown in
# fuzz/corpus/TARGET, crashes left in fuzz/artifacts/TARGET). Prints and
# appends to fuzz/campaign.log the table docs/robustness.md records:
# executions, seconds, corpus files and the result per target. Exit 1 if a
# target crashed or fell short of RUNS.
#
#   scripts/fuzz_campaign.sh                    every target, 10M runs each
#   RUNS=1000000 scripts/fuzz_campaign.sh slices
#   WEIGHTSTREAM_FUZZ_SANITIZER=none scripts/fuzz_campaign.sh http_responses
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
RUNS=${RUNS:-10000000}
MAX_SECONDS=${MAX_SECONDS:-21600}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
status=0
WEIGHTSTREAM_FUZZ_RUNS=$RUNS scripts/fuzz.sh "$MAX_SECONDS" "$@" | tee "$out" || status=1
took=$(( $(date +%s) - start ))
{
  echo "== fuzz campaign $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD), $(nproc) cores, ${took}s in all, goal $RUNS runs per target, sanitizer ${WEIGHTSTREAM_FUZZ_SANITIZER:-address}"
  sed -n '/^fuzz: [0-9]*s per target/,$p' "$out" | tail -n +2
} | tee -a fuzz/campaign.log
# Each target's line: name, executions, "execs", corpus files, ...
while read -r name execs _ corpus _ _ result; do
  if [ "$execs" = "?" ] || [ "$execs" -lt "$RUNS" ]; then
    echo "fuzz_campaign: $name ran $execs of $RUNS executions" >&2
    status=1
  fi
done < <(sed -n '/^fuzz: [0-9]*s per target/,$p' "$out" | tail -n +2)
exit $status
