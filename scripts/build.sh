#!/usr/bin/env bash
# Configures build/ and builds what the README's first command needs: the server
# (build/bin/oobleck-planner) and the CLI (build/bin/oobleck-plan), CMake's `product` target.
# scripts/test.sh builds the rest (CMake's `all`: tests and benchmarks); the Python client
# (client/python) needs no build. Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cmake-generator.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build build -j"$(nproc)" --target product
