"""End to end: production features of the real oobleck-planner binary.

- Durable profiles (--data_dir): kill -9 in the middle of a stream of LoadProfile calls,
  restart, and every acknowledged profile is back with the same fingerprint; a damaged
  file is reported and skipped.
- TLS (--tls_cert/--tls_key) and a bearer token (--auth_token_file), with a certificate
  generated here by the openssl CLI, from Python, the CLI and the Python example.
- One structured log line per RPC with its request id, status code and latency, and
  Prometheus metrics on --metrics_address.
Run by ctest (e2e_production) with /usr/bin/python3.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_support  # noqa: E402
from e2e_support import (RPC_TIMEOUT_S, RunningServer, run_cli, stubs,  # noqa: E402
                         wait_until_serving)

TOKEN = "e2e-token_0123456789abcdef"
PUBLISHED_4_NODES_MS = "27245.21"  # Oobleck's planner, GPT-2 XL, 4 RTX 4090 nodes


def example_layers(pb, variant):
    """The example GPT-2 XL profile as ProfileLayers, with layer 0's forward time shifted
    by `variant` so that every profile of the stream has its own fingerprint."""
    profile_dir = os.path.join(e2e_support.example_profiles_dir(), "gpt2-xl", "rtx4090")
    with open(os.path.join(profile_dir, "mb1.json")) as f:
        layers = json.load(f)
    with open(os.path.join(profile_dir, "allreduce_in_node.json")) as f:
        in_node = json.load(f)
    with open(os.path.join(profile_dir, "allreduce_across_nodes.json")) as f:
        across = json.load(f)
    out = pb.ProfileLayers()
    for i, layer in enumerate(layers):
        out.layers.add(forward_ms=layer["forward"] + (variant * 1e-3 if i == 0 else 0),
                       backward_ms=layer["backward"], param_bytes=layer["mem_required"][0],
                       activation_bytes=layer["mem_required"][1],
                       allreduce_in_node_ms={int(k): v for k, v in in_node[i].items()},
                       allreduce_across_nodes_ms={int(k): v for k, v in across[i].items()})
    return out


def list_fingerprints(channel):
    s = stubs()
    planner = s.planner_pb2_grpc.PlannerStub(channel)
    response = planner.ListProfiles(s.planner_pb2.ListProfilesRequest(), timeout=RPC_TIMEOUT_S)
    return {(p.model, p.gpu_type, p.microbatch_size): (p.fingerprint, p.num_layers)
            for p in response.profiles}


class DurableProfilesTest(unittest.TestCase):

    def setUp(self):
        self.data_dir = tempfile.mkdtemp(prefix="oobleck-data-")

    def tearDown(self):
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def test_acknowledged_profiles_survive_kill_9(self):
        import grpc
        pb = stubs().planner_pb2
        pb_grpc = stubs().planner_pb2_grpc
        acknowledged = {}  # key -> fingerprint the server answered with
        lock = threading.Lock()
        stop = threading.Event()
        layers = [example_layers(pb, variant) for variant in range(200)]

        server = RunningServer(extra_args=["--data_dir", self.data_dir])
        try:
            channel = grpc.insecure_channel(server.address)
            wait_until_serving(channel)
            planner = pb_grpc.PlannerStub(channel)

            def stream(writer):
                for i in range(50):
                    if stop.is_set():
                        return
                    model = f"durable-{writer}-{i}"
                    request = pb.LoadProfileRequest(model=model, gpu_type="rtx4090",
                                                    microbatch_size=1,
                                                    layers=layers[writer * 50 + i])
                    try:
                        response = planner.LoadProfile(request, timeout=RPC_TIMEOUT_S)
                    except grpc.RpcError:
                        return  # the server is gone
                    with lock:
                        acknowledged[(model, "rtx4090", 1)] = response.profile.fingerprint

            writers = [threading.Thread(target=stream, args=(w,)) for w in range(4)]
            for writer in writers:
                writer.start()
            deadline = time.monotonic() + RPC_TIMEOUT_S
            while time.monotonic() < deadline:
                with lock:
                    if len(acknowledged) >= 40:
                        break
                time.sleep(0.001)
            # Writers are still sending: the kill lands in the middle of calls.
            server.process.kill()
            server.process.wait(timeout=10)
            stop.set()
            for writer in writers:
                writer.join(timeout=RPC_TIMEOUT_S)
            channel.close()
        finally:
            server.stop()
        with lock:
            acked = dict(acknowledged)
        self.assertGreaterEqual(len(acked), 40)

        with RunningServer(extra_args=["--data_dir", self.data_dir]) as restarted:
            with grpc.insecure_channel(restarted.address) as channel:
                wait_until_serving(channel)
                stored = list_fingerprints(channel)
            for key, fingerprint in acked.items():
                self.assertIn(key, stored, f"acknowledged profile {key} was lost")
                self.assertEqual(stored[key][0], fingerprint, f"profile {key} changed")
            # Unacknowledged calls may or may not have landed, but whatever did is whole.
            for key, (_, num_layers) in stored.items():
                self.assertEqual(num_layers, 50, key)
            self.assertIn(f"reloaded {len(stored)} stored profile(s)", restarted.stderr())

    def test_damaged_file_is_reported_and_skipped(self):
        import grpc
        pb = stubs().planner_pb2
        with RunningServer(extra_args=["--data_dir", self.data_dir]) as server:
            with grpc.insecure_channel(server.address) as channel:
                wait_until_serving(channel)
                planner = stubs().planner_pb2_grpc.PlannerStub(channel)
                for model in ("kept", "damaged"):
                    planner.LoadProfile(pb.LoadProfileRequest(
                        model=model, gpu_type="rtx4090", microbatch_size=1,
                        layers=example_layers(pb, 0)), timeout=RPC_TIMEOUT_S)
        damaged = os.path.join(self.data_dir, "damaged+rtx4090+mb1.json")
        with open(damaged, "r+b") as f:
            f.truncate(os.path.getsize(damaged) // 2)  # a partial copy
        with RunningServer(extra_args=["--data_dir", self.data_dir]) as server:
            with grpc.insecure_channel(server.address) as channel:
                wait_until_serving(channel)
                self.assertEqual(set(list_fingerprints(channel)), {("kept", "rtx4090", 1)})
            self.assertIn("skipped stored profile", server.stderr())
            self.assertIn("damaged+rtx4090+mb1.json", server.stderr())


class TlsAndTokenTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        import grpc
        cls.dir = tempfile.mkdtemp(prefix="oobleck-tls-")
        cls.cert = os.path.join(cls.dir, "cert.pem")
        cls.key = os.path.join(cls.dir, "key.pem")
        cls.token_file = os.path.join(cls.dir, "token")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                        "-keyout", cls.key, "-out", cls.cert],
                       check=True, capture_output=True, timeout=60)
        with open(cls.token_file, "w") as f:
            f.write(TOKEN + "\n")
        cls.server = RunningServer(
            profile_dir=e2e_support.example_profiles_dir(),
            extra_args=["--tls_cert", cls.cert, "--tls_key", cls.key,
                        "--auth_token_file", cls.token_file])
        with open(cls.cert, "rb") as f:
            cls.tls = grpc.ssl_channel_credentials(root_certificates=f.read())

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def channel(self, token):
        import grpc
        credentials = self.tls
        if token:
            credentials = grpc.composite_channel_credentials(
                credentials, grpc.access_token_call_credentials(token))
        return grpc.secure_channel(self.server.address, credentials)

    def stats_code(self, token):
        import grpc
        s = stubs()
        with self.channel(token) as channel:
            try:
                s.planner_pb2_grpc.PlannerStub(channel).GetStats(s.planner_pb2.GetStatsRequest(),
                                                                 timeout=RPC_TIMEOUT_S)
                return grpc.StatusCode.OK
            except grpc.RpcError as error:
                return error.code()

    def test_health_is_reachable_without_a_token(self):
        with self.channel(None) as channel:
            wait_until_serving(channel)

    def test_token_is_required(self):
        import grpc
        self.assertEqual(self.stats_code(TOKEN), grpc.StatusCode.OK)
        self.assertEqual(self.stats_code(None), grpc.StatusCode.UNAUTHENTICATED)
        self.assertEqual(self.stats_code("not-the-token"), grpc.StatusCode.UNAUTHENTICATED)

    def test_plaintext_is_refused(self):
        import grpc
        s = stubs()
        with grpc.insecure_channel(self.server.address) as channel:
            with self.assertRaises(grpc.RpcError) as raised:
                s.planner_pb2_grpc.PlannerStub(channel).GetStats(s.planner_pb2.GetStatsRequest(),
                                                                 timeout=10)
        self.assertEqual(raised.exception.code(), grpc.StatusCode.UNAVAILABLE)

    def test_cli_with_tls_and_token(self):
        ok = run_cli("--server", self.server.address, "--tls-ca", self.cert,
                     "--auth-token-file", self.token_file, "list-profiles")
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("gpt2-xl", ok.stdout)
        no_token = run_cli("--server", self.server.address, "--tls-ca", self.cert, "stats")
        self.assertEqual(no_token.returncode, 1)
        self.assertIn("UNAUTHENTICATED", no_token.stderr)
        usage = run_cli("--server", self.server.address, "--auth-token-file", self.token_file,
                        "stats")
        self.assertEqual(usage.returncode, 2)
        self.assertIn("--auth-token-file needs --tls-ca", usage.stderr)

    def test_python_example_with_tls_and_token(self):
        script = os.path.join(e2e_support.ARGS.source_dir, "examples", "python",
                              "plan_templates.py")
        base = [sys.executable, script, "--server", self.server.address,
                "--nodes", "4", "--cost-model", "oobleck-sosp23",
                "--microbatches", "0", "--tls-ca", self.cert]
        result = subprocess.run(base + ["--auth-token-file", self.token_file],
                                capture_output=True, text=True, timeout=RPC_TIMEOUT_S)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(PUBLISHED_4_NODES_MS, result.stdout)
        refused = subprocess.run(base, capture_output=True, text=True, timeout=RPC_TIMEOUT_S)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("UNAUTHENTICATED", refused.stderr)


class RequestLogTest(unittest.TestCase):

    def test_one_line_per_call_with_request_id_code_and_latency(self):
        import grpc
        s = stubs()
        pb = s.planner_pb2
        with RunningServer(profile_dir=e2e_support.example_profiles_dir()) as server:
            with grpc.insecure_channel(server.address) as channel:
                wait_until_serving(channel)
                planner = s.planner_pb2_grpc.PlannerStub(channel)
                _, call = planner.GetStats.with_call(
                    pb.GetStatsRequest(), metadata=(("x-request-id", "trace-42"),),
                    timeout=RPC_TIMEOUT_S)
                self.assertIn(("x-request-id", "trace-42"), tuple(call.initial_metadata()))
                with self.assertRaises(grpc.RpcError) as raised:
                    planner.PlanTemplates(pb.PlanTemplatesRequest(model="no-such-model"),
                                          timeout=RPC_TIMEOUT_S)
                generated_id = dict(raised.exception.initial_metadata()).get("x-request-id")
                self.assertTrue(generated_id)
            # The server writes the line as the call ends; give it a moment.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and server.stderr().count(" rpc=") < 2:
                time.sleep(0.05)
            lines = [line for line in server.stderr().splitlines() if " rpc=" in line]
        self.assertEqual(len(lines), 2, lines)  # health checks are not logged
        # A line is written when its call's resources are released, after the client has
        # its answer, so two calls in a row may be logged in either order.
        stats = [line for line in lines if "/GetStats " in line]
        templates = [line for line in lines if "/PlanTemplates " in line]
        self.assertEqual((len(stats), len(templates)), (1, 1), lines)
        self.assertRegex(stats[0], r"^ts=\S+Z rpc=/oobleck.planner.v1.Planner/GetStats "
                                   r"request_id=trace-42 code=OK latency_ms=[0-9.]+ peer=\S+$")
        self.assertRegex(templates[0], rf"rpc=/oobleck.planner.v1.Planner/PlanTemplates "
                                       rf"request_id={generated_id} code=INVALID_ARGUMENT "
                                       rf"latency_ms=[0-9.]+ peer=\S+ message=\".+\"$")


class MetricsTest(unittest.TestCase):

    def test_prometheus_endpoint_counts_calls_and_reads_the_cache(self):
        import re
        import urllib.request
        import grpc
        s = stubs()
        pb = s.planner_pb2
        with RunningServer(profile_dir=e2e_support.example_profiles_dir(),
                           extra_args=["--metrics_address", "127.0.0.1:0"]) as server:
            url = None
            deadline = time.monotonic() + 10
            while url is None and time.monotonic() < deadline:
                match = re.search(r"metrics on (http://\S+/metrics)", server.stderr())
                url = match.group(1) if match else None
                time.sleep(0.05)
            self.assertIsNotNone(url, "the server did not print its metrics address")
            with grpc.insecure_channel(server.address) as channel:
                wait_until_serving(channel)
                planner = s.planner_pb2_grpc.PlannerStub(channel)
                request = pb.PlanTemplatesRequest(
                    model="gpt2-xl", cost_model="oobleck-sosp23", min_nodes=1, max_nodes=2,
                    cluster=pb.Cluster(inter_node_bytes_per_s=12.5e9, node_types=[pb.NodeType(
                        name="rtx4090", gpu_type="rtx4090", gpus_per_node=1,
                        gpu_memory_bytes=24 << 30, intra_node_bytes_per_s=25e9, count=2)]))
                for _ in range(2):  # a miss per mix, then hits
                    planner.PlanTemplates(request, timeout=RPC_TIMEOUT_S)
                # The streaming variant is counted under its own name (and hits the cache).
                updates = list(planner.PlanTemplatesStream(request, timeout=RPC_TIMEOUT_S))
                self.assertTrue(updates[-1].HasField("response"))
                with self.assertRaises(grpc.RpcError):
                    planner.PlanTemplates(pb.PlanTemplatesRequest(), timeout=RPC_TIMEOUT_S)
            # The call is counted as it ends, which may be just after the client returns.
            deadline = time.monotonic() + 10
            while True:
                with urllib.request.urlopen(url, timeout=10) as response:
                    text = response.read().decode()
                plan = 'method="/oobleck.planner.v1.Planner/PlanTemplates"'
                if re.search(r'oobleck_planner_rpcs_total\{code="INVALID_ARGUMENT",' + plan,
                             text) or time.monotonic() > deadline:
                    break
                time.sleep(0.05)

        def value(pattern):
            match = re.search(r"^" + pattern + r" (\S+)$", text, re.MULTILINE)
            self.assertIsNotNone(match, f"{pattern} not in:\n{text}")
            return float(match.group(1))

        self.assertEqual(value(r'oobleck_planner_rpcs_total\{code="OK",' + plan + r"\}"), 2)
        self.assertEqual(
            value(r'oobleck_planner_rpcs_total\{code="INVALID_ARGUMENT",' + plan + r"\}"), 1)
        self.assertEqual(
            value(r'oobleck_planner_rpc_duration_seconds_count\{code="OK",' + plan + r"\}"), 2)
        self.assertEqual(value("oobleck_planner_template_cache_misses_total"), 2)
        self.assertEqual(value("oobleck_planner_template_cache_hits_total"), 4)
        stream = 'method="/oobleck.planner.v1.Planner/PlanTemplatesStream"'
        self.assertEqual(value(r'oobleck_planner_rpcs_total\{code="OK",' + stream + r"\}"), 1)
        self.assertEqual(value("oobleck_planner_profiles_loaded"), 1)
        self.assertEqual(value("oobleck_planner_search_slots"), 2)
        self.assertNotIn("grpc.health.v1.Health", text)


class SecurityFlagsTest(unittest.TestCase):

    def test_token_without_tls_is_refused_at_start(self):
        with tempfile.NamedTemporaryFile("w", suffix=".token") as token:
            token.write(TOKEN)
            token.flush()
            result = subprocess.run([e2e_support.ARGS.server_bin, "--address", "127.0.0.1:0",
                                     "--auth_token_file", token.name],
                                    capture_output=True, text=True, timeout=30)
        self.assertEqual(result.returncode, 2)
        self.assertIn("--auth_token_file needs --tls_cert", result.stderr)


if __name__ == "__main__":
    e2e_support.main()
