#!/usr/bin/env bash
# Builds everything (the server and CLI as scripts/build.sh does, then the tests and
# benchmarks) and runs the whole test suite: core unit tests, service tests over a real gRPC
# channel, and end-to-end tests against the real server binary. Arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
