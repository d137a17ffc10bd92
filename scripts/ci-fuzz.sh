#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang (-fsanitize=fuzzer,address,undefined)
# into build-fuzz/ and runs each for a bounded time from its seed corpus in fuzz/corpus/.
# Fails on any crash, sanitizer report, leak or timeout; the reproducer is left in
# build-fuzz/artifacts/<target>/ (replay: build-fuzz/bin/<target>_fuzzer FILE).
#
#   scripts/ci-fuzz.sh                      # every target, FUZZ_SECONDS (60) each
#   FUZZ_SECONDS=600 scripts/ci-fuzz.sh plan_request
#
# clang and libFuzzer are installed here rather than by scripts/install-deps.sh, so the
# main build (and the Docker image) stay lean.
set -euo pipefail
cd "$(dirname "$0")/.."

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

cmake -S fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  >/dev/null
targets_to_build=()
for t in "${targets[@]}"; do targets_to_build+=("${t}_fuzzer"); done
cmake --build build-fuzz -j"$(nproc)" --target "${targets_to_build[@]}"

status=0
for t in "${targets[@]}"; do
  # New inputs go to a scratch corpus so the seeds in the repository stay as reviewed.
  work="build-fuzz/corpus/$t"
  artifacts="build-fuzz/artifacts/$t"
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
    status=1
  else
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "build-fuzz/$t.log" |
      sed "s/^/fuzz: $t /"
  fi
done
exit $status
