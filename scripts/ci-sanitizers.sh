#!/usr/bin/env bash
# Builds the test suite with AddressSanitizer and UndefinedBehaviorSanitizer (clang, -O2)
# into build-asan/, the build scripts/ci-fuzz.sh shares (scripts/sanitize-build.sh), and
# runs it: core unit tests, service tests and the end-to-end tests (which then drive the
# sanitized server and CLI binaries). Any report fails the run.
#
#   scripts/ci-sanitizers.sh              # every test
#   scripts/ci-sanitizers.sh -L e2e       # extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/sanitize-build.sh
# Everything in it: the tests, the binaries the e2e tests drive, and the fuzz targets (which
# then cost scripts/ci-fuzz.sh no compile).
cmake --build build-asan -j"$(nproc)"

# Leaks of the uninstrumented system gRPC/protobuf singletons at exit are not ours; every
# other sanitizer finding aborts the test.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
# The style and deploy checks read files, not binaries: scripts/test.sh runs them once.
ctest --test-dir build-asan --output-on-failure -j"$(nproc)" -LE '^(style|deploy)$' "$@"
