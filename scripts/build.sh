#!/usr/bin/env bash
# Configures and builds everything into build/ (server: build/bin/oobleck-planner,
# CLI: build/bin/oobleck-plan). Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build build -j"$(nproc)"
