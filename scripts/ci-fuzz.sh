#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang (-fsanitize=fuzzer,address,undefined)
# in build-asan/, the sanitizer build scripts/ci-sanitizers.sh shares
# (scripts/sanitize-build.sh), and runs each for a bounded time from its seed corpus in
# fuzz/corpus/. Fails on any crash, sanitizer report, leak or timeout; the reproducer is
# left in build-asan/fuzz/artifacts/<target>/ (replay: build-asan/bin/<target>_fuzzer FILE).
#
#   scripts/ci-fuzz.sh                      # every target, FUZZ_SECONDS (60) each
#   FUZZ_SECONDS=600 scripts/ci-fuzz.sh plan_request
#   FUZZ_JOBS=1 scripts/ci-fuzz.sh          # one target at a time (default: one per core)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-60}"
targets=("$@")
[ ${#targets[@]} -gt 0 ] ||
  targets=(profile_json cluster_file stored_profile plan_request render_answer rpc_structure)

. scripts/sanitize-build.sh
targets_to_build=()
for t in "${targets[@]}"; do targets_to_build+=("${t}_fuzzer"); done
cmake --build build-asan -j"$(nproc)" --target "${targets_to_build[@]}"

# Runs one target for $seconds; prints its summary (or its failure) and returns non-zero on
# a failure.
fuzz_one() {
  local t="$1"
  # New inputs go to a scratch corpus so the seeds in the repository stay as reviewed.
  local work="build-asan/fuzz/corpus/$t" artifacts="build-asan/fuzz/artifacts/$t"
  rm -rf "$work" "$artifacts"
  mkdir -p "$work" "$artifacts"
  echo "fuzz: $t for ${seconds} s"
  if ! "build-asan/bin/${t}_fuzzer" "$work" "fuzz/corpus/$t" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="$artifacts/" >"build-asan/fuzz/$t.log" 2>&1; then
    echo "fuzz: $t FAILED; last lines of build-asan/fuzz/$t.log:"
    tail -n 40 "build-asan/fuzz/$t.log"
    # A search that ran on past its deadline: where it went longest without polling.
    if grep -q "^poll gap" "build-asan/fuzz/$t.log"; then
      echo "fuzz: $t: the longest stretches between two polls of a search:"
      grep -A 16 "^poll gap" "build-asan/fuzz/$t.log" | head -n 80
    fi
    ls -l "$artifacts"
    return 1
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "build-asan/fuzz/$t.log" |
    sed "s/^/fuzz: $t /" || true
}

# Each fuzzer is one thread, so FUZZ_JOBS (default: the cores) of them run at once, each for
# the full $seconds. rpc_structure times its calls against their deadlines and runs a
# threaded server, so it runs alone afterwards, with the machine to itself.
jobs="${FUZZ_JOBS:-$(nproc)}"
status=0
alone=()
running=0
for t in "${targets[@]}"; do
  if [ "$t" = rpc_structure ]; then alone+=("$t"); continue; fi
  if [ "$running" -ge "$jobs" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  # Each summary is printed whole when its target ends (lines of parallel runs never mix).
  (out="$(fuzz_one "$t")" && rc=0 || rc=$?; echo "$out"; exit $rc) &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
for t in "${alone[@]}"; do fuzz_one "$t" || status=1; done
exit $status
