#!/usr/bin/env bash
# Redraws the pictures the README shows, from the real binaries: starts build/bin/
# oobleck-planner on a free loopback port with the bundled GPT-2 XL profile, then with
# build/bin/oobleck-plan draws into docs/img/
#   plan-ditto-exp3.svg            the plan of examples/clusters/ditto-exp3.json
#   replan-ditto-exp3-failure.svg  the replan after the first node of its first pipeline fails
#   template-ditto-exp2.svg        the 1F1B schedule of ditto-exp2's optimal template
# Re-run it after a change to the planner or the pictures (scripts/build.sh first).
#
#   scripts/make-readme-pictures.sh [EXAMPLE_DATA_DIR]   # default: examples
set -euo pipefail
cd "$(dirname "$0")/.."
data="${1:-examples}"
server_bin=build/bin/oobleck-planner
cli_bin=build/bin/oobleck-plan
for bin in "$server_bin" "$cli_bin"; do
  [ -x "$bin" ] || { echo "$bin missing: run scripts/build.sh first" >&2; exit 1; }
done
out=docs/img
mkdir -p "$out"
work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"$server_bin" --address 127.0.0.1:0 --profile_dir examples/profiles --log_requests=false \
  >"$work/server.out" 2>"$work/server.err" &
server_pid=$!
address=""
for _ in $(seq 1 150); do  # up to 30 s
  address="$(sed -n 's/^listening on \([^ ]*\).*/\1/p' "$work/server.out" | head -n 1)"
  [ -n "$address" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.2
done
if [ -z "$address" ]; then
  echo "the server did not start:" >&2
  cat "$work/server.err" >&2
  exit 1
fi

plan() { "$cli_bin" --server "$address" "$@"; }
plan plan --cluster "$data/clusters/ditto-exp3.json" --global-batch 64 --json \
  --svg "$out/plan-ditto-exp3.svg" >"$work/plan.json"
# The first node of the first pipeline fails.
victim="$(/usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["plan"]["pipelines"][0]["node_ids"][0])' <"$work/plan.json")"
plan replan --plan "$work/plan.json" --fail "$victim" --svg "$out/replan-ditto-exp3-failure.svg" >/dev/null
plan templates --cluster "$data/clusters/ditto-exp2.json" --all-nodes --progress=false \
  --svg "$out/template-ditto-exp2.svg" >/dev/null
echo "pictures in $out/ (replan: $victim failed)"
