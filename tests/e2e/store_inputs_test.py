#!/usr/bin/python3
"""Hardening round 3 against real processes: a one-member etcd (Debian's etcd-server) and
real oobleck-planner replicas, plus the real oobleck-plan CLI.

  item 3: a value under <prefix>profiles/ whose "format" is 200,000 nested arrays killed
          every replica (SIGSEGV) and every replica started afterwards; now it is skipped
          with "skipped profile in etcd: ... nested deeper" and every replica serves. The
          CLI died the same way on a cluster file of 100,000 nested "[": now exit code 1.
  item 9: a replica started while etcd is down answered Plan/ListProfiles with NOT_FOUND
          (not retried); now UNAVAILABLE "not yet synced with etcd" until it has read etcd,
          then it plans as usual.
"""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_support  # noqa: E402
from e2e_support import RunningServer, run_cli, stubs, wait_until_serving  # noqa: E402
from etcd_cluster import EtcdCluster  # noqa: E402
from production_test import example_layers  # noqa: E402
from replication_test import plan_request  # noqa: E402

RPC_TIMEOUT_S = 10
PREFIX = "/oobleck-planner/"


def figures(**values):
    print("figures: " + " ".join(f"{k}={v}" for k, v in values.items()), flush=True)


class StoreInputsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import grpc
        cls.grpc = grpc
        cls.s = stubs()
        cls.pb = cls.s.planner_pb2
        cls.etcd = EtcdCluster(1)

    @classmethod
    def tearDownClass(cls):
        cls.etcd.stop()

    def start_planner(self):
        planner = RunningServer(extra_args=["--etcd_endpoints", self.etcd.endpoints,
                                            "--etcd_timeout_ms", "1000", "--threads", "1"])
        self.addCleanup(planner.stop)
        return planner

    def stub(self, planner):
        channel = self.grpc.insecure_channel(planner.address)
        self.addCleanup(channel.close)
        return self.s.planner_pb2_grpc.PlannerStub(channel)

    def upload(self, planner, model="gpt2-xl"):
        request = self.pb.LoadProfileRequest(model=model, gpu_type="rtx4090", microbatch_size=1,
                                             layers=example_layers(self.pb, 0), replace=True)
        return self.stub(planner).LoadProfile(request, timeout=RPC_TIMEOUT_S)

    def listed(self, planner):
        response = self.stub(planner).ListProfiles(self.pb.ListProfilesRequest(),
                                                   timeout=RPC_TIMEOUT_S)
        return {(p.model, p.gpu_type, p.microbatch_size) for p in response.profiles}

    def wait_for(self, predicate, limit_s, what):
        deadline = time.monotonic() + limit_s
        while not predicate():
            if time.monotonic() > deadline:
                self.fail(f"{what} not within {limit_s} s")
            time.sleep(0.02)

    def test_deeply_nested_value_in_etcd_is_skipped_and_every_replica_serves(self):
        replicas = [self.start_planner() for _ in range(2)]
        for replica in replicas:
            with self.grpc.insecure_channel(replica.address) as channel:
                wait_until_serving(channel)
        self.upload(replicas[0])
        poison_key = PREFIX + "profiles/poison+rtx4090+mb1.json"
        depth = 200_000
        self.etcd.put(poison_key, '{"format": ' + "[" * depth + "]" * depth + "}")
        self.addCleanup(self.etcd.delete, poison_key)
        for replica in replicas:
            self.wait_for(lambda: poison_key in replica.stderr(), 5, "the report")
        late = self.start_planner()
        with self.grpc.insecure_channel(late.address) as channel:
            wait_until_serving(channel)
        for replica in replicas + [late]:
            self.assertIsNone(replica.process.poll(), replica.stderr()[-2000:])
            self.assertIn("skipped profile in etcd", replica.stderr())
            self.assertIn("nested deeper than 64 levels", replica.stderr())
            self.assertIn(("gpt2-xl", "rtx4090", 1), self.listed(replica))
            self.assertNotIn(("poison", "rtx4090", 1), self.listed(replica))
            plan = self.stub(replica).Plan(plan_request(self.pb), timeout=RPC_TIMEOUT_S)
            self.assertGreater(plan.plan.iteration_time_ms, 0)

    def test_replica_started_during_an_etcd_outage_answers_unavailable_until_synced(self):
        grpc = self.grpc
        first = self.start_planner()
        with grpc.insecure_channel(first.address) as channel:
            wait_until_serving(channel)
        self.upload(first)
        self.etcd.kill(0)
        restarted = False
        try:
            late = self.start_planner()
            time.sleep(0.5)
            calls = {
                "Plan": lambda: self.stub(late).Plan(plan_request(self.pb), timeout=2),
                "ListProfiles": lambda: self.stub(late).ListProfiles(
                    self.pb.ListProfilesRequest(), timeout=2),
            }
            for name, call in calls.items():
                with self.assertRaises(grpc.RpcError, msg=name) as error:
                    call()
                self.assertEqual(error.exception.code(), grpc.StatusCode.UNAVAILABLE, name)
                self.assertIn("not yet synced with etcd", error.exception.details())
            self.etcd.start(0)
            self.etcd.wait_healthy([0])
            restarted = True
            start = time.monotonic()
            with grpc.insecure_channel(late.address) as channel:
                wait_until_serving(channel)
            synced_s = time.monotonic() - start
            plan = self.stub(late).Plan(plan_request(self.pb), timeout=RPC_TIMEOUT_S)
            self.assertGreater(plan.plan.iteration_time_ms, 0)
            figures(serving_after_etcd_back_s=f"{synced_s:.2f}")
        finally:
            if not restarted:
                self.etcd.start(0)
                self.etcd.wait_healthy([0])

    def test_cli_refuses_a_deeply_nested_cluster_file_with_exit_code_1(self):
        with open(os.path.join(self.etcd.dir, "deep-cluster.json"), "w") as f:
            f.write("[" * 100_000 + "]" * 100_000)  # closed: the old parser built it
        result = run_cli("--server", "127.0.0.1:1", "templates", "--cluster",
                         os.path.join(self.etcd.dir, "deep-cluster.json"))
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("nested deeper than 64 levels", result.stderr)


if __name__ == "__main__":
    e2e_support.main()
