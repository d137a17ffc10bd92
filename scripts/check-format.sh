#!/usr/bin/env bash
# Checks that every tracked C++ file (.cc, .h) is as clang-format leaves it under the
# repository's .clang-format (Google style, 100 columns); lists those that are not and fails.
# Fix them with: scripts/check-format.sh --fix
#
# clang-format 14 (Debian 12's; scripts/install-deps.sh installs it): other versions format
# some constructs differently, so the check uses exactly that one.
set -euo pipefail
cd "$(dirname "$0")/.."
formatter=clang-format-14
if ! command -v "$formatter" >/dev/null; then
  echo "check-format: $formatter not found; run scripts/install-deps.sh" >&2
  exit 2
fi
mapfile -t files < <(git ls-files '*.cc' '*.h' 2>/dev/null || true)
if [ ${#files[@]} -eq 0 ]; then
  # Not a git checkout (e.g. a copy of the tracked files): every C++ file of the tree's parts.
  mapfile -t files < <(find bench client core fuzz server tests -name '*.cc' -o -name '*.h' |
                       sort)
fi
if [ "${1:-}" = "--fix" ]; then
  "$formatter" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$formatter" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: ${#bad[@]} file(s) differ from clang-format (scripts/check-format.sh --fix):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
