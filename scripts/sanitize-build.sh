# Sourced by scripts/ci-sanitizers.sh and scripts/ci-fuzz.sh: configures the one sanitizer
# build both use, build-asan/ (clang; OOBLECK_SANITIZE in the top-level CMakeLists.txt). Every
# object there is compiled once with ASan, UBSan and libFuzzer's coverage instrumentation, and
# serves both the sanitized test suite and the fuzz targets (build-asan/bin/*_fuzzer).
#
# clang and libFuzzer are installed here rather than by scripts/install-deps.sh, so the
# main build (and the Docker image) stay lean.
. scripts/cmake-generator.sh

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

# A build-asan/ of the former GCC sanitizer build cannot switch compilers in place.
if [ -f build-asan/CMakeCache.txt ] &&
    ! grep -q "^OOBLECK_SANITIZE:BOOL=ON" build-asan/CMakeCache.txt; then
  rm -rf build-asan
fi
# -O2: the fuzzers' deadlines and the poll-gap threshold are set against its speed (the
# sanitized tests ran at GCC's -O1 before). Line tables only: a report's stack trace
# needs no more, and full -g costs CPU in every file. No -DNDEBUG: library asserts (JSON,
# absl) stay checked.
cmake -S . -B build-asan -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only" \
  -DOOBLECK_SANITIZE=ON -DOOBLECK_BUILD_BENCH=OFF >/dev/null
