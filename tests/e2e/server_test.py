"""End to end: the real oobleck-planner binary over a real socket, from Python gRPC.

Health, reflection (v1alpha), Oobleck's published GPT-2 XL templates, error statuses and
SIGTERM shutdown. Run by ctest (e2e_server) with /usr/bin/python3.
"""

import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_support  # noqa: E402
from e2e_support import RPC_TIMEOUT_S, RunningServer, stubs, wait_until_serving  # noqa: E402

GIB = 1 << 30
# Oobleck's own planner on GPT-2 XL (50 layers), 1 RTX 4090 per node, nodes 1..4, in ms.
PUBLISHED_OOBLECK_MS = {1: 25348.51, 2: 28853.39, 3: 27534.99, 4: 27245.21}


def homogeneous_request(pb, model="gpt2-xl", gpus_per_node=1, nodes=4,
                        cost_model="oobleck-sosp23"):
    return pb.PlanTemplatesRequest(
        model=model,
        cost_model=cost_model,
        min_nodes=1,
        max_nodes=nodes,
        cluster=pb.Cluster(
            inter_node_bytes_per_s=12.5e9,
            node_types=[pb.NodeType(name="rtx4090", gpu_type="rtx4090",
                                    gpus_per_node=gpus_per_node, gpu_memory_bytes=24 * GIB,
                                    intra_node_bytes_per_s=25e9, count=nodes)]))


class PlannerServerTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        import grpc
        cls.s = stubs()
        cls.server = RunningServer(profile_dir=e2e_support.example_profiles_dir())
        try:
            cls.channel = grpc.insecure_channel(cls.server.address)
            wait_until_serving(cls.channel)
            cls.planner = cls.s.planner_pb2_grpc.PlannerStub(cls.channel)
        except BaseException:
            cls.server.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()

    def test_health_reports_serving(self):
        s = self.s
        health = s.health_pb2_grpc.HealthStub(self.channel)
        response = health.Check(s.health_pb2.HealthCheckRequest(service=""),
                                timeout=RPC_TIMEOUT_S)
        self.assertEqual(response.status, s.health_pb2.HealthCheckResponse.SERVING)

    def test_reflection_lists_and_describes_services(self):
        s = self.s
        reflection = s.reflection_pb2_grpc.ServerReflectionStub(self.channel)
        requests = [s.reflection_pb2.ServerReflectionRequest(list_services=""),
                    s.reflection_pb2.ServerReflectionRequest(
                        file_containing_symbol="oobleck.planner.v1.Planner"),
                    s.reflection_pb2.ServerReflectionRequest(
                        file_containing_symbol="grpc.health.v1.Health")]
        responses = list(reflection.ServerReflectionInfo(iter(requests), timeout=RPC_TIMEOUT_S))
        self.assertEqual(len(responses), 3)
        services = {service.name for service in responses[0].list_services_response.service}
        self.assertIn("oobleck.planner.v1.Planner", services)
        self.assertIn("grpc.health.v1.Health", services)
        # grpcurl needs the descriptors too, not just the names.
        for response in responses[1:]:
            self.assertFalse(response.HasField("error_response"), response.error_response)
            self.assertGreater(len(response.file_descriptor_response.file_descriptor_proto), 0)

    def test_homogeneous_gpt2_xl_matches_oobleck_published_values(self):
        pb = self.s.planner_pb2
        response = self.planner.PlanTemplates(homogeneous_request(pb), timeout=RPC_TIMEOUT_S)
        self.assertEqual(response.cost_model, "oobleck-sosp23")
        self.assertEqual(len(response.results), 4)
        for result in response.results:
            self.assertTrue(result.feasible, result.infeasible_reason)
            tmpl = result.template
            self.assertAlmostEqual(tmpl.iteration_time_ms, PUBLISHED_OOBLECK_MS[tmpl.num_nodes],
                                   delta=0.01, msg=f"{tmpl.num_nodes} nodes")
            # The stages cut the 50 layers contiguously over the pipeline's nodes.
            self.assertEqual(tmpl.stages[0].layer_begin, 0)
            self.assertEqual(tmpl.stages[-1].layer_end, 50)
            for before, after in zip(tmpl.stages, tmpl.stages[1:]):
                self.assertEqual(before.layer_end, after.layer_begin)
            self.assertEqual({stage.node_index for stage in tmpl.stages},
                             set(range(tmpl.num_nodes)))
        self.assertEqual(sorted(r.template.num_nodes for r in response.results), [1, 2, 3, 4])

    def test_unknown_model_is_not_found(self):
        import grpc
        pb = self.s.planner_pb2
        with self.assertRaises(grpc.RpcError) as raised:
            self.planner.PlanTemplates(homogeneous_request(pb, model="no-such-model"),
                                       timeout=RPC_TIMEOUT_S)
        self.assertEqual(raised.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.assertIn("no-such-model", raised.exception.details())

    def test_zero_gpus_per_node_is_invalid_argument_naming_the_field(self):
        import grpc
        pb = self.s.planner_pb2
        with self.assertRaises(grpc.RpcError) as raised:
            self.planner.PlanTemplates(homogeneous_request(pb, gpus_per_node=0),
                                       timeout=RPC_TIMEOUT_S)
        self.assertEqual(raised.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("gpus_per_node", raised.exception.details())
        # The path also as a google.rpc.BadRequest in the status details, as grpcurl shows
        # it (google.rpc.Status bytes in the trailer; the stubs for it are not generated,
        # so the serialized Any's type URL and the path are looked for in the bytes).
        details = dict(raised.exception.trailing_metadata()).get("grpc-status-details-bin")
        self.assertIsNotNone(details)
        self.assertIn(b"type.googleapis.com/google.rpc.BadRequest", details)
        self.assertIn(b"cluster.node_types[0].gpus_per_node", details)

    def test_example_python_client(self):
        """examples/python/plan_templates.py against this server, with the oobleck_planner
        package of this checkout (client/python)."""
        script = os.path.join(e2e_support.ARGS.source_dir, "examples", "python",
                              "plan_templates.py")
        result = subprocess.run(
            [sys.executable, script, "--server", self.server.address,
             "--model", "gpt2-xl", "--nodes", "4",
             "--cost-model", "oobleck-sosp23", "--microbatches", "0"],
            capture_output=True, text=True, timeout=RPC_TIMEOUT_S)
        self.assertEqual(result.returncode, 0, result.stderr)
        for value in PUBLISHED_OOBLECK_MS.values():
            self.assertIn(f"{value:.2f}", result.stdout)


class ShutdownTest(unittest.TestCase):

    def test_sigterm_exits_zero_promptly(self):
        import grpc
        with RunningServer(profile_dir=e2e_support.example_profiles_dir()) as server:
            with grpc.insecure_channel(server.address) as channel:
                wait_until_serving(channel)
            started = time.monotonic()
            code = server.terminate(timeout_s=10)
            elapsed_s = time.monotonic() - started
            self.assertEqual(code, 0, server.stderr())
            self.assertLess(elapsed_s, 10)


if __name__ == "__main__":
    e2e_support.main()
