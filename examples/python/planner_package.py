"""Imports the oobleck_planner package (client/python) for the examples here: the installed
one (`pip install --no-build-isolation ./client/python`, client/python/README.md), else the
one in this checkout, so the examples run from a plain clone with Debian's /usr/bin/python3
(python3-grpcio and python3-protobuf; scripts/install-deps.sh) and no build.
"""

import os
import sys

CHECKOUT_PACKAGE_DIR = os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client", "python"))


def load():
    """(grpc, oobleck_planner, planner_pb2, planner_pb2_grpc), or exits with what to do."""
    try:
        import grpc
    except ImportError as error:
        sys.exit(f"cannot import gRPC ({error}): use /usr/bin/python3 (python3-grpcio is "
                 f"installed for it by scripts/install-deps.sh)")
    try:
        import oobleck_planner
    except ImportError:
        sys.path.insert(0, CHECKOUT_PACKAGE_DIR)
        import oobleck_planner
    from oobleck_planner.v1 import planner_pb2, planner_pb2_grpc
    return grpc, oobleck_planner, planner_pb2, planner_pb2_grpc
