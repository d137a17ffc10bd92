#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang (-fsanitize=fuzzer,address,undefined)
# into build-fuzz/ and runs each for a bounded time from its seed corpus in fuzz/corpus/.
# Fails on any crash, sanitizer report, leak or timeout; the reproducer is left in
# build-fuzz/artifacts/<target>/ (replay: build-fuzz/bin/<target>_fuzzer FILE).
#
#   scripts/ci-fuzz.sh                      # every target, FUZZ_SECONDS (60) each
#   FUZZ_SECONDS=600 scripts/ci-fuzz.sh plan_request
#   FUZZ_JOBS=1 scripts/ci-fuzz.sh          # one target at a time (default: one per core)
#
# clang and libFuzzer are installed here rather than by scripts/install-deps.sh, so the
# main build (and the Docker image) stay lean.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cmake-generator.sh

seconds="${FUZZ_SECONDS:-60}"
targets=("$@")
[ ${#targets[@]} -gt 0 ] ||
  targets=(profile_json cluster_file stored_profile plan_request render_answer rpc_structure)

packages=(clang libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# -O2 as before (the fuzzers' deadlines and the poll-gap threshold are set against its speed);
# line tables only: a report's stack trace needs no more, and full -g costs CPU in every file.
cmake -S fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" >/dev/null
targets_to_build=()
for t in "${targets[@]}"; do targets_to_build+=("${t}_fuzzer"); done
cmake --build build-fuzz -j"$(nproc)" --target "${targets_to_build[@]}"

# Runs one target for $seconds; prints its summary (or its failure) and returns non-zero on
# a failure.
fuzz_one() {
  local t="$1"
  # New inputs go to a scratch corpus so the seeds in the repository stay as reviewed.
  local work="build-fuzz/corpus/$t" artifacts="build-fuzz/artifacts/$t"
  rm -rf "$work" "$artifacts"
  mkdir -p "$work" "$artifacts"
  echo "fuzz: $t for ${seconds} s"
  if ! "build-fuzz/bin/${t}_fuzzer" "$work" "fuzz/corpus/$t" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="$artifacts/" >"build-fuzz/$t.log" 2>&1; then
    echo "fuzz: $t FAILED; last lines of build-fuzz/$t.log:"
    tail -n 40 "build-fuzz/$t.log"
    # A search that ran on past its deadline: where it went longest without polling.
    if grep -q "^poll gap" "build-fuzz/$t.log"; then
      echo "fuzz: $t: the longest stretches between two polls of a search:"
      grep -A 16 "^poll gap" "build-fuzz/$t.log" | head -n 80
    fi
    ls -l "$artifacts"
    return 1
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "build-fuzz/$t.log" |
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
