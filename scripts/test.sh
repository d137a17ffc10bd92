#!/usr/bin/env bash
# Builds and runs the whole test suite: core unit tests, service tests over a real gRPC
# channel, and end-to-end tests against the real server binary.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
