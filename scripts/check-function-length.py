#!/usr/bin/python3
"""Lists every function in core/, client/, server/ and bench/ over the limit (80 lines); fails if any.

Functions are found by universal-ctags (scripts/install-deps.sh installs it), a real C++
parser: a function spans from the line of its name to the line of its closing brace
(ctags' `end` field), whether its signature takes one line or several. Lambdas count as
functions of their own; they are inside the function that holds them, which counts them too.

    scripts/check-function-length.py [--max-lines N] [--root DIR] [PATH ...]

PATHs (default: core client server bench) are relative to the repository root. Exit 0 when no function in them
is longer, 1 when some is (each printed as path:line: name (N lines)), 2 when ctags is
missing or fails.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

MAX_LINES = 80

def functions(root, paths):
    """(path, line, end, name) of every function definition ctags finds under paths."""
    ctags = shutil.which("ctags")
    if ctags is None:
        sys.exit("check-function-length: universal-ctags not found; run scripts/install-deps.sh")
    command = [ctags, "--languages=C++", "--langmap=C++:+.h", "--kinds-C++=f",
               "--fields=+ne", "--output-format=json", "-R", "-f", "-"] + paths
    result = subprocess.run(command, cwd=root, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"check-function-length: ctags failed: {result.stderr.strip()}")
    found = []
    for line in result.stdout.splitlines():
        tag = json.loads(line)
        if tag.get("_type") != "tag" or tag.get("kind") != "function":
            continue
        if "end" not in tag:
            sys.exit(f"check-function-length: no end line for {tag['name']} in {tag['path']}")
        found.append((tag["path"], tag["line"], tag["end"], tag.get("scope", ""), tag["name"]))
    return sorted(found)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-lines", type=int, default=MAX_LINES)
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    parser.add_argument("paths", nargs="*", default=["core", "client", "server", "bench"])
    args = parser.parse_args()
    root = os.path.realpath(args.root)
    found = functions(root, args.paths)
    if not found:
        sys.exit(f"check-function-length: no functions found under {args.paths} in {root}")
    failing = 0
    for path, line, end, scope, name in found:
        length = end - line + 1
        if length <= args.max_lines:
            continue
        qualified = f"{scope}::{name}" if scope else name
        print(f"{path}:{line}: {qualified} ({length} lines)")
        failing += 1
    print(f"{len(found)} functions checked; {failing} longer than {args.max_lines} lines")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
