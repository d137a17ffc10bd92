#!/usr/bin/env bash
# Runs Oobleck's own planning tests (templates, instantiation, dynamic reconfiguration)
# unchanged against oobleck-planner: our server answers, oobleck_planner.oobleck shadows
# Oobleck's two planner modules, tests/oobleck_compat stands in for torch, deepspeed,
# transformers and the other ML packages those tests import but do not use.
#
#   scripts/run-oobleck-tests.sh OOBLECK_CHECKOUT [extra pytest arguments]
#
# OOBLECK_CHECKOUT: a clone of SymbioticLab/Oobleck (any branch; the test files of the check
# that exist there are run; a `develop` checkout gets OOBLECK_PLANNER_OOBLECK_BRANCH=develop
# unless that is set). Needs a built server (scripts/build.sh; or OOBLECK_PLANNER_BIN)
# unless OOBLECK_PLANNER_ADDRESS names a running one, and Debian's python3-pytest,
# python3-pytest-mock, python3-pytest-order, python3-grpcio (scripts/install-deps.sh).
# Prints the tests passed / failed / skipped and the wall time; exits non-zero on failures.
set -euo pipefail

if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 OOBLECK_CHECKOUT [pytest arguments]" >&2
  exit 2
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
checkout=$(cd "$1" && pwd)
shift
python=/usr/bin/python3  # Debian's python3-grpcio is installed for this interpreter

check_files=(
  tests/planning/test_pipeline_template.py
  tests/planning/test_instantiator.py
  tests/sosp23/test_generate_pipeline_template.py
  tests/sosp23/test_instantiate_pipeline.py
  tests/sosp23/test_dynamic_reconfiguration.py
  tests/engine/test_reconfiguration.py
)
present=()
for file in "${check_files[@]}"; do
  [ -f "$checkout/$file" ] && present+=("$file")
done
if [ ${#present[@]} -eq 0 ]; then
  echo "$checkout holds none of: ${check_files[*]}" >&2
  exit 2
fi

work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

if [ -z "${OOBLECK_PLANNER_ADDRESS:-}" ]; then
  server_bin=${OOBLECK_PLANNER_BIN:-$repo/build/bin/oobleck-planner}
  if [ ! -x "$server_bin" ]; then
    echo "no server binary at $server_bin (build it, or set OOBLECK_PLANNER_BIN or" \
         "OOBLECK_PLANNER_ADDRESS)" >&2
    exit 2
  fi
  "$server_bin" --address 127.0.0.1:0 >"$work/server.out" 2>"$work/server.err" &
  server_pid=$!
  for _ in $(seq 1 300); do
    address=$(sed -n 's/.*listening on \([^ ]*:[0-9]*\).*/\1/p' "$work/server.out" | head -1)
    [ -n "$address" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.err" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$address" ] || { echo "the server did not start" >&2; exit 1; }
  export OOBLECK_PLANNER_ADDRESS=$address
fi

# Oobleck's branches key the in-node all-reduce dict differently (oobleck_planner.oobleck):
# follow the checkout's branch unless OOBLECK_PLANNER_OOBLECK_BRANCH says otherwise.
if [ -z "${OOBLECK_PLANNER_OOBLECK_BRANCH:-}" ]; then
  branch=$(git -C "$checkout" rev-parse --abbrev-ref HEAD 2>/dev/null || true)
  if [ "$branch" = develop ]; then
    export OOBLECK_PLANNER_OOBLECK_BRANCH=develop
  fi
fi
echo "Oobleck checkout: $checkout"
echo "semantics of:     ${OOBLECK_PLANNER_OOBLECK_BRANCH:-sosp23-artifact}"
echo "planner:          $OOBLECK_PLANNER_ADDRESS"
echo "test files:       ${present[*]}"
start=$(date +%s.%N)
status=0
(cd "$checkout" &&
  PYTHONPATH="$repo/client/python:$repo/tests/oobleck_compat:$checkout${PYTHONPATH:+:$PYTHONPATH}" \
  "$python" -m pytest -p standin_modules -p oobleck_planner.oobleck.shadow \
    -p no:cacheprovider -q -rfE --junitxml="$work/results.xml" "${present[@]}" "$@") ||
  status=$?
end=$(date +%s.%N)
"$python" - "$work/results.xml" "$start" "$end" <<'PY'
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else list(root)
count = lambda key: sum(int(s.get(key, 0)) for s in suites)
total, failed = count("tests"), count("failures") + count("errors")
skipped = count("skipped")
print(f"passed {total - failed - skipped} failed {failed} skipped {skipped} of {total} "
      f"collected; wall time {float(sys.argv[3]) - float(sys.argv[2]):.2f} s")
PY
exit "$status"
