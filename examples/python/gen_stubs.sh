#!/usr/bin/env bash
# Generates the Python gRPC stubs of the public API into examples/python/gen/ with the
# system protoc and Debian's grpc_python_plugin (packages protobuf-compiler and
# protobuf-compiler-grpc; scripts/install-deps.sh installs both). The generated code is
# for /usr/bin/python3 with python3-grpcio and python3-protobuf.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$here/gen}"
mkdir -p "$out"
protoc --proto_path="$root/proto" \
  --python_out="$out" --grpc_python_out="$out" \
  --plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin \
  "$root/proto/oobleck/planner/v1/planner.proto"
echo "stubs written to $out/oobleck/planner/v1/"
