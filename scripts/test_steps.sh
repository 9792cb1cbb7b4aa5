# Sourced by scripts/test.sh: `step NAME COMMAND...` runs one step of the
# test command and records its wall time; when the shell exits (passed or
# failed) a table of every step's time is printed and written to
# target/test-times.txt, so where the test command's time goes is always
# on record (docs/testing.md keeps the figures).
#
# `step_bg NAME COMMAND...` starts a step in the background (its output to
# target/test-logs/NAME.log) and `step_join NAME` waits for it, prints its
# output and fails if it failed: for steps that mostly wait on the network
# or the disk (downloads, installs), which then overlap the compiling
# steps instead of adding to them. The table marks such steps "overlapped".
WS_STEP_NAMES=()
WS_STEP_SECS=()
WS_STEP_NOTES=()
WS_STEP_T0=$(date +%s)
declare -A WS_BG_PID=()
declare -A WS_BG_T0=()
WS_STEP_LOGS=target/test-logs

_step_record() { # NAME SECONDS RC NOTE
  WS_STEP_NAMES+=("$1")
  WS_STEP_SECS+=("$2")
  WS_STEP_NOTES+=("$4")
  printf '== step %-16s %5d s%s%s\n' "$1" "$2" "${4:+  ($4)}" "$([ "$3" = 0 ] || echo "  FAILED (exit $3)")"
}

step() {
  local name=$1 t0 rc=0
  shift
  t0=$(date +%s)
  "$@" || rc=$?
  _step_record "$name" "$(($(date +%s) - t0))" "$rc" ""
  return $rc
}

step_bg() {
  local name=$1
  shift
  mkdir -p "$WS_STEP_LOGS"
  WS_BG_T0[$name]=$(date +%s)
  # Its end time too: the table shows how long it ran, not when it was joined.
  { rc=0; "$@" >"$WS_STEP_LOGS/$name.log" 2>&1 || rc=$?; date +%s >"$WS_STEP_LOGS/$name.end"; exit $rc; } &
  WS_BG_PID[$name]=$!
  echo "== step $name: started in the background (log: $WS_STEP_LOGS/$name.log)"
}

step_join() {
  local name=$1 rc=0
  wait "${WS_BG_PID[$name]}" || rc=$?
  unset "WS_BG_PID[$name]"
  cat "$WS_STEP_LOGS/$name.log"
  # Its own wall time, start to end: it ran beside the steps in between.
  _step_record "$name" "$(($(cat "$WS_STEP_LOGS/$name.end" 2>/dev/null || date +%s) - WS_BG_T0[$name]))" "$rc" "overlapped"
  return $rc
}

step_table() {
  local rc=$? i total pid
  # A failed run leaves no background step behind.
  for pid in "${WS_BG_PID[@]}"; do kill "$pid" 2>/dev/null || true; done
  total=$(($(date +%s) - WS_STEP_T0))
  {
    echo "step              seconds"
    for i in "${!WS_STEP_NAMES[@]}"; do
      printf '%-16s %8d%s\n' "${WS_STEP_NAMES[$i]}" "${WS_STEP_SECS[$i]}" "${WS_STEP_NOTES[$i]:+  (${WS_STEP_NOTES[$i]})}"
    done
    printf '%-16s %8d  (%s)\n' total "$total" "$([ $rc = 0 ] && echo passed || echo "failed, exit $rc")"
  } | { mkdir -p target 2>/dev/null; tee target/test-times.txt 2>/dev/null || cat; }
  return $rc
}
trap step_table EXIT
