# Sourced by scripts/test.sh: `step NAME COMMAND...` runs one step of the
# test command and records its wall time; when the shell exits (passed or
# failed) a table of every step's time is printed and written to
# target/test-times.txt, so where the test command's time goes is always
# on record (docs/testing.md keeps the figures).
WS_STEP_NAMES=()
WS_STEP_SECS=()
WS_STEP_T0=$(date +%s)
step() {
  local name=$1 t0 rc=0
  shift
  t0=$(date +%s)
  "$@" || rc=$?
  WS_STEP_NAMES+=("$name")
  WS_STEP_SECS+=("$(( $(date +%s) - t0 ))")
  printf '== step %-12s %5d s%s\n' "$name" "${WS_STEP_SECS[-1]}" "$([ $rc = 0 ] || echo "  FAILED (exit $rc)")"
  return $rc
}
step_table() {
  local rc=$? i total
  total=$(( $(date +%s) - WS_STEP_T0 ))
  {
    echo "step          seconds"
    for i in "${!WS_STEP_NAMES[@]}"; do
      printf '%-12s %8d\n' "${WS_STEP_NAMES[$i]}" "${WS_STEP_SECS[$i]}"
    done
    printf '%-12s %8d  (%s)\n' total "$total" "$([ $rc = 0 ] && echo passed || echo "failed, exit $rc")"
  } | { mkdir -p target 2>/dev/null; tee target/test-times.txt 2>/dev/null || cat; }
  return $rc
}
trap step_table EXIT
