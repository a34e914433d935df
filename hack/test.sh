#!/usr/bin/env bash
# make test: lint, the unit tests, then the e2e suite on the local stack. On a machine where the stack is not up,
# what the stack needs (hack/stack.sh build: the Kubernetes and node binaries, the OpenStack root file system, the
# host's packages, the images) is built beside lint and the unit tests, which leave much of the machine idle while
# they download modules and link; the e2e suite then starts the stack from the caches. The last line gives each
# stage's minutes, so that a run's time is measured on the machine it ran on, fresh or warm.
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
mkdir -p bin

log() { printf '[test %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

t0=$SECONDS
stages=()
# stage NAME CMD...: runs CMD and records its minutes under NAME.
stage() {
  local name=$1 s=$SECONDS rc=0
  shift
  log "stage $name"
  "$@" || rc=$?
  stages+=("$name $(minutes $((SECONDS - s)))$( ((rc == 0)) || echo ' (failed)')")
  return "$rc"
}
minutes() { awk -v s="$1" 'BEGIN { printf "%.1f", s / 60 }'; }

build_pid="" build_start=0 e2e_ran=0
report() {
  local rc=$?
  if [[ -n $build_pid ]] && kill -0 "$build_pid" 2>/dev/null; then
    kill -- -"$build_pid" 2>/dev/null || kill "$build_pid" 2>/dev/null || true
    stages+=("stack-build (stopped)")
  fi
  local line="" st
  for st in "${stages[@]}"; do line+="$st; "; done
  line="stage minutes: ${line}total $(minutes $((SECONDS - t0)))$( ((rc == 0)) || echo " (failed, exit $rc)")"
  # The same line, and each e2e test's time, longest first, for a record of the run (bin/test-times.txt).
  {
    echo "$(date -u +%FT%TZ) $(git describe --tags --always --dirty 2>/dev/null) $(nproc) cores: $line"
    [[ $e2e_ran == 1 && -f bin/e2e.log ]] && grep -E '^--- (PASS|FAIL|SKIP)' bin/e2e.log | sed -E 's/^--- ([A-Z]+): ([^ ]+) \(([0-9.]+)s\)/\3 \2 \1/' | sort -rn
  } >bin/test-times.txt || true
  log "$line"
}
trap report EXIT

if hack/stack.sh status >/dev/null 2>&1; then
  log "the local stack runs: the e2e suite attaches to it (its images are those it was brought up with)"
else
  log "building what the stack needs beside lint and the unit tests (hack/stack.sh build; its log: bin/stack-build.log)"
  build_start=$SECONDS
  # A process group of its own, so that a failed stage stops the whole build; its progress lines go to the log and
  # the console.
  rm -f bin/.stack-build.took
  set -m
  (
    s=$SECONDS
    hack/stack.sh build 2>&1 | tee bin/stack-build.log | sed -u 's/^/  /' >&2
    echo $((SECONDS - s)) >bin/.stack-build.took
  ) &
  build_pid=$!
  set +m
fi

stage lint "$MAKE" lint
stage unit "$MAKE" test-unit

if [[ -n $build_pid ]]; then
  log "waiting for the stack's build (hack/stack.sh build)"
  rc=0 waited=$SECONDS
  wait "$build_pid" || rc=$?
  build_pid=""
  took=$(cat bin/.stack-build.took 2>/dev/null || echo $((SECONDS - build_start)))
  stages+=("stack-build $(minutes "$took") (beside lint and unit; waited for it $(minutes $((SECONDS - waited))))$( ((rc == 0)) || echo ' (failed)')")
  ((rc == 0)) || { log "the stack's build failed: bin/stack-build.log"; exit "$rc"; }
fi

e2e_ran=1
stage e2e "$MAKE" test-e2e
