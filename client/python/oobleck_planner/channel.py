"""One channel to every oobleck-planner replica, made as the CLI `oobleck-plan` makes it.

The address is HOST:PORT, a comma-separated list of IP:PORT, or any gRPC target such as
dns:///planner:50051 (a name that resolves to every replica, e.g. a headless Service). The
channel uses the API's service config (proto/oobleck/planner/v1/service_config.json, copied
into this package): round_robin over every address, and the idempotent calls (Plan, Replan,
PlanTemplates[Stream], ListProfiles, GetStats) retried on UNAVAILABLE, so a replica that
dies costs a retry, not an error (docs/API.md#several-replicas).

Security follows the CLI (client/channel_security.cc): plaintext without a CA; TLS with a
CA file; a bearer token only over TLS. The environment variables the CLI reads stand in for
arguments not given.
"""

import ipaddress
import json
import os

DEFAULT_ADDRESS = "127.0.0.1:50051"
ADDRESS_ENV = "OOBLECK_PLANNER_ADDRESS"
TLS_CA_ENV = "OOBLECK_PLAN_TLS_CA"
TLS_SERVER_NAME_ENV = "OOBLECK_PLAN_TLS_SERVER_NAME"
AUTH_TOKEN_FILE_ENV = "OOBLECK_PLAN_AUTH_TOKEN_FILE"

SERVICE_CONFIG_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                   "service_config.json")
# A CA bundle or token is a few KiB; anything this large is the wrong file (as the CLI).
MAX_SECURITY_FILE_BYTES = 1 << 20


def _family(part):
    host, _, port = part.rpartition(":")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        return None
    try:
        return ipaddress.ip_address(host.strip("[]") if host.startswith("[") else host).version
    except ValueError:
        return None


def planner_target(server):
    """The gRPC target for an address (see the module comment); ValueError naming the part
    of a list that is not IP:PORT."""
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


def channel_options(tls_server_name=""):
    with open(SERVICE_CONFIG_PATH) as f:
        config = json.dumps(json.load(f))
    options = [("grpc.service_config", config), ("grpc.enable_retries", 1)]
    if tls_server_name:
        options.append(("grpc.ssl_target_name_override", tls_server_name))
    return options


def _read_small_file(path, what):
    if os.path.getsize(path) > MAX_SECURITY_FILE_BYTES:
        raise ValueError(f"{what}: {path} is larger than {MAX_SECURITY_FILE_BYTES} bytes")
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        raise ValueError(f"{what}: {path} is empty")
    return data


def channel_credentials(grpc, tls_ca_file="", auth_token_file=""):
    """None (plaintext) without a CA file; TLS with one; plus "authorization: Bearer <token>"
    on every call with a token file. ValueError naming the setting for a bad combination."""
    if not tls_ca_file:
        if auth_token_file:
            raise ValueError(f"an auth token file ({auth_token_file}) needs a TLS CA file "
                             f"(--tls-ca, {TLS_CA_ENV}): the token is only sent over TLS")
        return None
    credentials = grpc.ssl_channel_credentials(
        root_certificates=_read_small_file(tls_ca_file, "TLS CA"))
    if not auth_token_file:
        return credentials
    token = _read_small_file(auth_token_file, "auth token file").decode().strip()
    if not token:
        raise ValueError(f"auth token file: {auth_token_file} holds no token")
    return grpc.composite_channel_credentials(credentials,
                                              grpc.access_token_call_credentials(token))


def open_channel(grpc, server, credentials=None, tls_server_name=""):
    """An insecure channel, or a secure one with `credentials`, to every replica."""
    target = planner_target(server)
    options = channel_options(tls_server_name)
    if credentials is None:
        return grpc.insecure_channel(target, options=options)
    return grpc.secure_channel(target, credentials, options=options)


def connect(address=None, tls_ca_file=None, tls_server_name=None, auth_token_file=None):
    """A channel to the planner. Each argument left None is read from the environment:
    OOBLECK_PLANNER_ADDRESS (default 127.0.0.1:50051), OOBLECK_PLAN_TLS_CA,
    OOBLECK_PLAN_TLS_SERVER_NAME and OOBLECK_PLAN_AUTH_TOKEN_FILE (as the CLI reads them)."""
    import grpc

    def setting(value, variable, default=""):
        return value if value is not None else (os.environ.get(variable) or default)

    credentials = channel_credentials(grpc, setting(tls_ca_file, TLS_CA_ENV),
                                      setting(auth_token_file, AUTH_TOKEN_FILE_ENV))
    return open_channel(grpc, setting(address, ADDRESS_ENV, DEFAULT_ADDRESS), credentials,
                        setting(tls_server_name, TLS_SERVER_NAME_ENV))
