"""The drop-in's link to the planner service: settings, one channel per address, and the
mapping of the service's errors onto Python exceptions that name the field.

Settings (each also a keyword argument where the drop-in takes one):
  OOBLECK_PLANNER_ADDRESS        the service (default 127.0.0.1:50051); TLS CA, server name
                                 and token as the CLI: OOBLECK_PLAN_TLS_CA,
                                 OOBLECK_PLAN_TLS_SERVER_NAME, OOBLECK_PLAN_AUTH_TOKEN_FILE
  OOBLECK_PLANNER_COST_MODEL     "oobleck-sosp23" (default, Oobleck's own) or "1f1b"
  OOBLECK_PLANNER_OOBLECK_BRANCH whose semantics to follow: "sosp23-artifact" (default) or
                                 "develop" (see BRANCHES)
  OOBLECK_PLANNER_TIMEOUT_S      deadline of one call (default 120)
"""

import os
import threading
from dataclasses import dataclass

from oobleck_planner import channel as _channel

COST_MODEL_ENV = "OOBLECK_PLANNER_COST_MODEL"
BRANCH_ENV = "OOBLECK_PLANNER_OOBLECK_BRANCH"
TIMEOUT_ENV = "OOBLECK_PLANNER_TIMEOUT_S"
DEFAULT_COST_MODEL = "oobleck-sosp23"
DEFAULT_BRANCH = "sosp23-artifact"
DEFAULT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Branch:
    """What differs between Oobleck's branches for the planner: how the keys of a layer's
    in-node all-reduce dict count a stage's GPUs, and which GPU counts a stage may take."""
    name: str
    allreduce_key_minus_one: bool  # key g - 1 (sosp23-artifact) or g (develop)
    stage_gpus: str                # StageGpus enum name of the proto

    def allreduce_key(self, num_gpus):
        return num_gpus - 1 if self.allreduce_key_minus_one else num_gpus


BRANCHES = {
    # execution_result.h of sosp23-artifact: allreduce_in_node_.at(num_gpus_ - 1); its
    # get_rank_grid repeats each rank num_gpus_per_node / stage GPUs times, so a stage's
    # GPUs divide the node's.
    "sosp23-artifact": Branch("sosp23-artifact", True, "STAGE_GPUS_DIVISORS"),
    # develop: allreduce_in_node_.at(num_gpus_), and its divide and conquer gives every stage
    # a power of two GPUs (STAGE_GPUS_EQUAL_HALVES, docs/COST_MODEL.md#stages-and-templates).
    "develop": Branch("develop", False, "STAGE_GPUS_EQUAL_HALVES"),
}


class PlannerError(Exception):
    """An answer of the planner service that is not a plan; the message is the service's
    (it names the field and the value)."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


class InvalidArgument(PlannerError, ValueError):
    """INVALID_ARGUMENT: an input is malformed (the message names the field)."""


class FailedPrecondition(PlannerError, RuntimeError):
    """FAILED_PRECONDITION: the inputs are well formed but admit no answer (e.g. instance
    counts that do not fit the nodes)."""


class NotFound(PlannerError, LookupError):
    """NOT_FOUND: e.g. a profile fingerprint the service no longer holds."""


class ServiceUnavailable(PlannerError, ConnectionError):
    """The service could not be reached (UNAVAILABLE, DEADLINE_EXCEEDED)."""


def branch(name=None):
    name = name or os.environ.get(BRANCH_ENV) or DEFAULT_BRANCH
    if name not in BRANCHES:
        raise ValueError(f"{BRANCH_ENV} / branch: {name!r} is not one of "
                         f"{sorted(BRANCHES)}")
    return BRANCHES[name]


def cost_model(name=None):
    return name or os.environ.get(COST_MODEL_ENV) or DEFAULT_COST_MODEL


def timeout_s():
    value = os.environ.get(TIMEOUT_ENV)
    if not value:
        return DEFAULT_TIMEOUT_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1
    if not seconds > 0:
        raise ValueError(f"{TIMEOUT_ENV}: {value!r} is not a positive number of seconds")
    return seconds


_lock = threading.Lock()
_stubs = {}  # (address, CA, server name, token file) -> (channel, PlannerStub)


def _settings_key():
    env = os.environ
    return (env.get(_channel.ADDRESS_ENV) or _channel.DEFAULT_ADDRESS,
            env.get(_channel.TLS_CA_ENV) or "", env.get(_channel.TLS_SERVER_NAME_ENV) or "",
            env.get(_channel.AUTH_TOKEN_FILE_ENV) or "")


def target():
    """The address the calls go to now (it keys the inline-profile fingerprints)."""
    return _settings_key()[0]


def stub():
    """A PlannerStub on a channel opened as the CLI opens it, one per setting of the
    environment (a test or a process may point the drop-in elsewhere between calls)."""
    key = _settings_key()
    with _lock:
        if key not in _stubs:
            from oobleck_planner.v1.planner_pb2_grpc import PlannerStub
            address, ca, server_name, token = key
            chan = _channel.connect(address, ca, server_name, token)
            _stubs[key] = (chan, PlannerStub(chan))
        return _stubs[key][1]


def call(method_name, request):
    """stub().<method_name>(request) with the deadline, the service's errors raised as the
    exceptions above."""
    import grpc
    try:
        return getattr(stub(), method_name)(request, timeout=timeout_s())
    except grpc.RpcError as error:
        raise translate(error, method_name) from None


def translate(error, method_name):
    import grpc
    code = error.code() if hasattr(error, "code") else None
    details = error.details() if hasattr(error, "details") else str(error)
    message = f"oobleck-planner {method_name}: {details}"
    kinds = {
        grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
        grpc.StatusCode.OUT_OF_RANGE: InvalidArgument,
        grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
        grpc.StatusCode.RESOURCE_EXHAUSTED: FailedPrecondition,
        grpc.StatusCode.NOT_FOUND: NotFound,
        grpc.StatusCode.UNAVAILABLE: ServiceUnavailable,
        grpc.StatusCode.DEADLINE_EXCEEDED: ServiceUnavailable,
    }
    if code == grpc.StatusCode.UNAVAILABLE:
        message += f" (is the planner running at {target()}? set {_channel.ADDRESS_ENV})"
    return kinds.get(code, PlannerError)(message, code)
