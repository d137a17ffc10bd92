#!/usr/bin/env python3
"""Fails when the repository reads, or tells a user to read, a path outside the checkout.

A clone into an empty folder must build, run the README and pass every test on its own
(examples/README.md lists the data it ships). Two checks over the tracked files:
  1. no file names the sibling data folder the project once read (a `shared` folder next to
     the checkout) or an absolute path of the machine it was developed on (FORBIDDEN);
  2. every `profile` a cluster file names (examples/clusters/, bench/) resolves, relative to
     the file, to a directory inside the repository that exists.

  scripts/check-standalone-paths.py [--root DIR]   # exit 0 when clean, 1 listing each hit
"""

import argparse
import json
import os
import re
import subprocess
import sys

# Written in pieces so that this file does not match itself.
FORBIDDEN = re.compile("|".join([
    re.escape("../" + "shared"),
    re.escape("shared" + "/data"),
    re.escape("SHARED" + "_DATA"),
    re.escape("shared" + "-data"),
    r"(?<![\w.])/" + "work/",
]))
SKIP_DIRS = {".git", "__pycache__"}


def tracked_files(root):
    """Files git tracks, or (in a copy without .git) every file outside build trees."""
    if os.path.isdir(os.path.join(root, ".git")) or os.path.isfile(os.path.join(root, ".git")):
        listed = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                                capture_output=True).stdout
        return [p for p in listed.decode().split("\0") if p]
    found = []
    for directory, dirs, files in os.walk(root):
        rel = os.path.relpath(directory, root)
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS
                   and not (rel == "." and d.startswith("build"))]
        found += [os.path.normpath(os.path.join(rel, f)) for f in files]
    return found


def outside_references(root, paths):
    hits = []
    for path in paths:
        try:
            with open(os.path.join(root, path), encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary files, or deleted but not yet committed
        for number, line in enumerate(lines, 1):
            if FORBIDDEN.search(line):
                hits.append(f"{path}:{number}: names a path outside the repository: "
                            f"{line.strip()[:120]}")
    return hits


def cluster_profiles(root, paths):
    hits = []
    real_root = os.path.realpath(root)
    for path in paths:
        if not path.endswith(".json"):
            continue
        if not (path.startswith("examples/clusters/") or path.startswith("bench/")):
            continue
        with open(os.path.join(root, path)) as f:
            cluster = json.load(f)
        if not isinstance(cluster, dict):
            continue
        named = [("profile", cluster.get("profile"))]
        for name, gpu in (cluster.get("gpu_types") or {}).items():
            named.append((f"gpu_types.{name}.profile", gpu.get("profile")))
        for key, value in named:
            if not value:
                continue
            resolved = os.path.realpath(os.path.join(root, os.path.dirname(path), value))
            if os.path.commonpath([resolved, real_root]) != real_root:
                hits.append(f"{path}: {key} {value!r} resolves outside the repository "
                            f"({resolved})")
            elif not os.path.isdir(resolved):
                hits.append(f"{path}: {key} {value!r} is not a directory ({resolved})")
    return hits


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    root = os.path.abspath(parser.parse_args().root)
    paths = tracked_files(root)
    hits = outside_references(root, paths) + cluster_profiles(root, paths)
    for hit in hits:
        print(hit)
    print(f"{len(paths)} files checked, {len(hits)} paths outside the repository")
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main())
