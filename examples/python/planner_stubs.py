"""Finds and imports the Python gRPC stubs of oobleck-planner's API for the examples here.

The build generates them into build/python/ (scripts/build.sh; proto/CMakeLists.txt);
examples/python/gen_stubs.sh writes them into examples/python/gen/ without building the
C++ code. --stubs DIR picks another directory. They are for Debian's /usr/bin/python3 with
python3-grpcio and python3-protobuf (scripts/install-deps.sh).
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CANDIDATES = [os.path.join(HERE, "..", "..", "build", "python"), os.path.join(HERE, "gen")]


def default_dir():
    """The first directory that holds the stubs: build/python/, then examples/python/gen/."""
    for candidate in CANDIDATES:
        if os.path.exists(os.path.join(candidate, "oobleck", "planner", "v1", "planner_pb2.py")):
            return os.path.normpath(candidate)
    return os.path.normpath(CANDIDATES[0])


def add_argument(parser):
    parser.add_argument("--stubs", default=default_dir(),
                        help="directory holding oobleck/planner/v1/planner_pb2*.py (default: "
                             "build/python/ from scripts/build.sh, else examples/python/gen/ "
                             "from gen_stubs.sh)")


def load(stubs_dir):
    """(grpc, planner_pb2, planner_pb2_grpc), or exits with what to do."""
    sys.path.insert(0, stubs_dir)
    try:
        import grpc
        from oobleck.planner.v1 import planner_pb2, planner_pb2_grpc
    except ImportError as error:
        sys.exit(f"cannot import gRPC or the stubs from {stubs_dir} ({error}): run "
                 f"scripts/build.sh (writes build/python/) or examples/python/gen_stubs.sh, and "
                 f"use /usr/bin/python3 (python3-grpcio is installed for it)")
    return grpc, planner_pb2, planner_pb2_grpc
