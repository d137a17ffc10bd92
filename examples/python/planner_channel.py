"""One channel to every oobleck-planner replica, as the CLI's --server makes it.

--server is HOST:PORT, a comma-separated list of IP:PORT, or any gRPC target such as
dns:///planner:50051 (a name that resolves to every replica, e.g. a headless Service).
The channel uses the service config next to the API
(proto/oobleck/planner/v1/service_config.json): round_robin over every address, and the
idempotent calls (Plan, Replan, PlanTemplates[Stream], ListProfiles, GetStats) retried on
UNAVAILABLE, so a replica that dies costs a retry, not an error. docs/API.md says why
those calls and not LoadProfile.
"""

import ipaddress
import json
import os

SERVICE_CONFIG_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                   "proto", "oobleck", "planner", "v1", "service_config.json")


def _family(part):
    host, _, port = part.rpartition(":")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        return None
    try:
        return ipaddress.ip_address(host.strip("[]") if host.startswith("[") else host).version
    except ValueError:
        return None


def planner_target(server):
    """The gRPC target for --server (see the module comment); ValueError naming the part of
    a list that is not IP:PORT."""
    if server.startswith(("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:")):
        return server
    if ":/" in server or "," not in server:
        return server
    parts = server.split(",")
    families = {_family(p) for p in parts}
    if None in families or len(families) != 1:
        bad = next(p for p in parts if _family(p) != _family(parts[0]) or _family(p) is None)
        raise ValueError(f"--server: {bad!r} in {server!r} is not an IP:PORT of the same family "
                         "as the first; a list takes IP addresses only (for host names use "
                         "one dns:///NAME:PORT target)")
    return ("ipv4:" if families == {4} else "ipv6:") + server


def channel_options():
    with open(SERVICE_CONFIG_PATH) as f:
        config = json.dumps(json.load(f))
    return [("grpc.service_config", config), ("grpc.enable_retries", 1)]


def open_channel(grpc, server, credentials=None):
    """An insecure channel, or a secure one with `credentials`, to every replica."""
    target = planner_target(server)
    if credentials is None:
        return grpc.insecure_channel(target, options=channel_options())
    return grpc.secure_channel(target, credentials, options=channel_options())
