#!/usr/bin/python3
"""Replicated planner on a real etcd (issue 13): a 3-member etcd cluster and three real
oobleck-planner processes with --etcd_endpoints, all on loopback ports picked here and
killed at the end.

The steps share one cluster and run in order (test_1 ... test_6):
  1. an upload through replica A is listed and planned by B within 1 s; replace and an
     operator's delete reach every replica too;
  2. a hand-written value that does not parse is reported and skipped;
  3. a replica started while etcd is unreachable is NOT_SERVING and says why (and, in
     step 5, turns SERVING once its etcd member is back);
  4. kill -9 of A under a steady Plan/Replan load through the failover channel
     (client/python/oobleck_planner/channel.py): no call fails;
  5. one etcd member down: uploads and plans go on; two down (no quorum): uploads get
     UNAVAILABLE naming etcd, plans still answer; members back: everything converges and
     nothing acknowledged is lost;
  6. templates one replica computed are shared hits on another (GetStats tells them apart).
Figures (calls, retries, failures, time to converge) are printed as "figures: ...".
"""

import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_support  # noqa: E402
from e2e_support import RunningServer, stubs, wait_until_serving  # noqa: E402
from etcd_cluster import EtcdCluster, free_port  # noqa: E402
from production_test import example_layers  # noqa: E402

RPC_TIMEOUT_S = 10
PROPAGATION_LIMIT_S = 1.0
ETCD_TIMEOUT_MS = 1000


def planner_channel_module():
    sys.path.insert(0, os.path.join(e2e_support.ARGS.source_dir, "client", "python"))
    from oobleck_planner import channel
    return channel


def figures(**values):
    print("figures: " + " ".join(f"{k}={v}" for k, v in values.items()), flush=True)


def plan_request(pb, nodes=4):
    node_type = pb.NodeType(name="rtx4090", gpu_type="rtx4090", gpus_per_node=1,
                            gpu_memory_bytes=24 << 30, intra_node_bytes_per_s=25e9)
    return pb.PlanRequest(
        model="gpt2-xl", microbatches=8, missing_allreduce_in_node=pb.MISSING_ALLREDUCE_RING,
        cluster=pb.Cluster(node_types=[node_type], inter_node_bytes_per_s=12.5e9),
        nodes=[pb.Node(id=f"10.0.0.{k + 1}", node_type="rtx4090") for k in range(nodes)],
        global_batch=[16])


class ReplicationTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import grpc
        cls.grpc = grpc
        cls.s = stubs()
        cls.pb = cls.s.planner_pb2
        cls.etcd = EtcdCluster(3)
        cls.planners = []
        try:
            for _ in range(3):
                cls.planners.append(cls.start_planner(cls.etcd.endpoints))
            for planner in cls.planners:
                with grpc.insecure_channel(planner.address) as channel:
                    wait_until_serving(channel)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for planner in cls.planners:
            planner.stop()
        cls.etcd.stop()

    @classmethod
    def start_planner(cls, endpoints):
        return RunningServer(extra_args=["--etcd_endpoints", endpoints, "--etcd_timeout_ms",
                                         str(ETCD_TIMEOUT_MS), "--threads", "1"])

    def stub(self, planner):
        channel = self.grpc.insecure_channel(planner.address)
        self.addCleanup(channel.close)
        return self.s.planner_pb2_grpc.PlannerStub(channel)

    def upload(self, planner, variant, replace=True, model="gpt2-xl"):
        request = self.pb.LoadProfileRequest(model=model, gpu_type="rtx4090", microbatch_size=1,
                                             layers=example_layers(self.pb, variant),
                                             replace=replace)
        return self.stub(planner).LoadProfile(request, timeout=RPC_TIMEOUT_S)

    def fingerprints(self, planner):
        response = self.stub(planner).ListProfiles(self.pb.ListProfilesRequest(),
                                                   timeout=RPC_TIMEOUT_S)
        return {(p.model, p.gpu_type, p.microbatch_size): p.fingerprint
                for p in response.profiles}

    def wait_for(self, predicate, limit_s, what):
        """Seconds until predicate() holds; fails after limit_s. A replica that answers
        UNAVAILABLE (not yet synced with etcd) has not got there yet."""
        start = time.monotonic()
        while True:
            try:
                if predicate():
                    return time.monotonic() - start
            except self.grpc.RpcError as e:
                if e.code() != self.grpc.StatusCode.UNAVAILABLE:
                    raise
            if time.monotonic() - start > limit_s:
                self.fail(f"{what} not within {limit_s} s")
            time.sleep(0.01)

    def test_1_upload_replace_delete_reach_every_replica(self):
        a, b, c = self.planners
        key = ("gpt2-xl", "rtx4090", 1)
        loaded = self.upload(a, variant=1)
        fingerprint = loaded.profile.fingerprint
        seen_s = max(self.wait_for(lambda p=p: self.fingerprints(p).get(key) == fingerprint,
                                   PROPAGATION_LIMIT_S, "the upload on B and C")
                     for p in (b, c))
        plan = self.stub(b).Plan(plan_request(self.pb), timeout=RPC_TIMEOUT_S)
        self.assertGreater(plan.plan.iteration_time_ms, 0)

        # Not replacing what another replica stored: refused with the key named.
        with self.assertRaises(self.grpc.RpcError) as error:
            self.upload(b, variant=2, replace=False)
        self.assertEqual(error.exception.code(), self.grpc.StatusCode.ALREADY_EXISTS)
        self.assertIn("gpt2-xl/rtx4090/mb1", error.exception.details())

        replaced = self.upload(b, variant=2)
        self.assertTrue(replaced.replaced)
        replace_s = self.wait_for(
            lambda: self.fingerprints(a).get(key) == replaced.profile.fingerprint,
            PROPAGATION_LIMIT_S, "the replacement on A")

        # An operator deletes a profile in etcd: every replica forgets it.
        self.upload(a, variant=3, model="scratch")
        skey = ("scratch", "rtx4090", 1)
        self.wait_for(lambda: skey in self.fingerprints(c), PROPAGATION_LIMIT_S, "scratch on C")
        self.etcd.delete("/oobleck-planner/profiles/scratch+rtx4090+mb1.json")
        delete_s = max(self.wait_for(lambda p=p: skey not in self.fingerprints(p),
                                     PROPAGATION_LIMIT_S, "the delete") for p in (a, b, c))
        figures(upload_seen_s=f"{seen_s:.3f}", replace_seen_s=f"{replace_s:.3f}",
                delete_seen_s=f"{delete_s:.3f}")

    def test_1b_clients_take_every_replica(self):
        addresses = [p.address for p in self.planners]
        for server in (",".join(addresses), "ipv4:" + ",".join(addresses),
                       "dns:///" + addresses[1]):
            listed = e2e_support.run_cli("--server", server, "list-profiles")
            self.assertEqual(listed.returncode, 0, f"{server}: {listed.stderr}")
            self.assertIn("gpt2-xl", listed.stdout)
        # Host names in a list have no gRPC target: a usage error naming the part.
        refused = e2e_support.run_cli("--server", "a.example:1,b.example:2", "list-profiles")
        self.assertEqual(refused.returncode, 2)
        self.assertIn('"a.example:1"', refused.stderr)
        pc = planner_channel_module()
        self.assertEqual(pc.planner_target("10.0.0.1:1,10.0.0.2:2"), "ipv4:10.0.0.1:1,10.0.0.2:2")
        self.assertEqual(pc.planner_target("[::1]:1,[::1]:2"), "ipv6:[::1]:1,[::1]:2")
        self.assertEqual(pc.planner_target("dns:///planner:50051"), "dns:///planner:50051")
        with self.assertRaisesRegex(ValueError, "a.example:1"):
            pc.planner_target("a.example:1,b.example:2")

    def test_2_value_that_does_not_parse_is_reported_and_skipped(self):
        a = self.planners[0]
        bad_key = "/oobleck-planner/profiles/handmade+rtx4090+mb1.json"
        self.etcd.put(bad_key, "{not json")
        self.wait_for(lambda: bad_key in a.stderr(), PROPAGATION_LIMIT_S, "the report")
        self.assertIn("skipped profile in etcd", a.stderr())
        self.assertNotIn(("handmade", "rtx4090", 1), self.fingerprints(a))
        # A replica starting now reads it too, reports it, and serves the others.
        late = self.start_planner(self.etcd.endpoints)
        try:
            with self.grpc.insecure_channel(late.address) as channel:
                wait_until_serving(channel)
            self.assertIn(("gpt2-xl", "rtx4090", 1), self.fingerprints(late))
            self.assertIn(bad_key, late.stderr())
        finally:
            late.stop()
            self.etcd.delete(bad_key)

    def test_3_unreachable_etcd_at_start_is_not_serving_until_read(self):
        health = self.s.health_pb2
        # Nothing listens on this port yet.
        port = free_port()
        planner = self.start_planner(f"127.0.0.1:{port}")
        try:
            with self.grpc.insecure_channel(planner.address) as channel:
                stub = self.s.health_pb2_grpc.HealthStub(channel)
                time.sleep(0.5)
                status = stub.Check(health.HealthCheckRequest(service=""), timeout=2).status
                self.assertEqual(status, health.HealthCheckResponse.NOT_SERVING)
                self.assertIn("cannot read the profiles from etcd", planner.stderr())
                self.assertIn(f"127.0.0.1:{port}", planner.stderr())
        finally:
            planner.stop()

    def test_4_kill_9_of_a_replica_under_load_costs_no_call(self):
        grpc, pb = self.grpc, self.pb
        a = self.planners[0]
        pc = planner_channel_module()
        channel = pc.open_channel(grpc, ",".join(p.address for p in self.planners))
        self.addCleanup(channel.close)
        planner = self.s.planner_pb2_grpc.PlannerStub(channel)
        first = planner.Plan(plan_request(pb), timeout=RPC_TIMEOUT_S)
        replan = pb.ReplanRequest(request=first.request, plan=first.plan,
                                  failed_node_ids=[first.plan.pipelines[0].node_ids[0]])
        counts = {"calls": 0, "failures": 0}
        errors = []
        stop = threading.Event()

        def load():
            while not stop.is_set():
                try:
                    if counts["calls"] % 2 == 0:
                        planner.Plan(plan_request(pb), timeout=RPC_TIMEOUT_S)
                    else:
                        planner.Replan(replan, timeout=RPC_TIMEOUT_S)
                except grpc.RpcError as error:
                    counts["failures"] += 1
                    errors.append(f"{error.code().name}: {error.details()}")
                counts["calls"] += 1

        workers = [threading.Thread(target=load) for _ in range(4)]
        for w in workers:
            w.start()
        try:
            time.sleep(1.5)
            before_kill = counts["calls"]
            a.process.kill()  # SIGKILL
            a.process.wait(timeout=10)
            time.sleep(1.5)
        finally:
            stop.set()
            for w in workers:
                w.join(timeout=30)
        retried = sum(p.stderr().count("previous_attempts=") for p in self.planners[1:])
        figures(calls=counts["calls"], calls_before_kill=before_kill,
                failures=counts["failures"], retries_seen_by_survivors=retried)
        self.assertGreater(counts["calls"] - before_kill, 10, "the load went on after the kill")
        self.assertEqual(counts["failures"], 0, errors[:5])

    def test_5_etcd_quorum_loss_and_recovery(self):
        grpc = self.grpc
        b, c = self.planners[1], self.planners[2]
        key = ("gpt2-xl", "rtx4090", 1)
        acknowledged = {}

        self.etcd.kill(0)
        # A replica whose only endpoint is the dead member starts NOT_SERVING ...
        only_member_0 = self.start_planner(f"127.0.0.1:{self.etcd.client_ports[0]}")
        self.addCleanup(only_member_0.stop)
        health = self.s.health_pb2
        health_stub = self.s.health_pb2_grpc.HealthStub(
            self.grpc.insecure_channel(only_member_0.address))
        # When the killed member led the cluster, the others elect a new leader first.
        start = time.monotonic()
        self.etcd.wait_healthy([1, 2])
        election_s = time.monotonic() - start
        loaded = self.upload(b, variant=10)
        acknowledged[key] = loaded.profile.fingerprint
        self.wait_for(lambda: self.fingerprints(c).get(key) == acknowledged[key],
                      PROPAGATION_LIMIT_S, "an upload with one member down")
        self.assertGreater(self.stub(c).Plan(plan_request(self.pb), timeout=RPC_TIMEOUT_S)
                           .plan.iteration_time_ms, 0)

        self.etcd.kill(1)  # quorum lost
        start = time.monotonic()
        with self.assertRaises(grpc.RpcError) as error:
            self.upload(b, variant=11, model="after-quorum-loss")
        refused_s = time.monotonic() - start
        self.assertEqual(error.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertIn("etcd at ", error.exception.details())
        for planner in (b, c):
            plan = self.stub(planner).Plan(plan_request(self.pb), timeout=RPC_TIMEOUT_S)
            self.assertGreater(plan.plan.iteration_time_ms, 0)
            self.assertEqual(self.fingerprints(planner)[key], acknowledged[key])

        self.assertEqual(health_stub.Check(health.HealthCheckRequest(), timeout=2).status,
                         health.HealthCheckResponse.NOT_SERVING)
        restart = time.monotonic()
        self.etcd.start(0)
        self.etcd.start(1)
        self.etcd.wait_healthy([0, 1, 2])
        quorum_s = time.monotonic() - restart
        # Uploads work again (retried by the caller: the first may meet a leader election).
        deadline = time.monotonic() + 10
        while True:
            try:
                loaded = self.upload(b, variant=12, model="after-recovery")
                break
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        acknowledged[("after-recovery", "rtx4090", 1)] = loaded.profile.fingerprint
        # ... and turns SERVING with every acknowledged profile once its member is back.
        converge_s = self.wait_for(
            lambda: all(all(self.fingerprints(p).get(k) == f for k, f in acknowledged.items())
                        for p in (b, c, only_member_0)),
            5, "convergence after recovery")
        self.assertEqual(health_stub.Check(health.HealthCheckRequest(), timeout=2).status,
                         health.HealthCheckResponse.SERVING)
        # The refused upload's outcome is unknown (etcd may commit the proposal it held once
        # the quorum is back), but whatever it is, every replica agrees on it.
        lost_key = ("after-quorum-loss", "rtx4090", 1)
        self.wait_for(lambda: len({self.fingerprints(p).get(lost_key) for p in (b, c)}) == 1,
                      PROPAGATION_LIMIT_S, "agreement on the refused upload")
        figures(one_member_down_healthy_after_s=f"{election_s:.2f}",
                upload_refused_after_s=f"{refused_s:.2f}", quorum_back_s=f"{quorum_s:.2f}",
                converged_s=f"{time.monotonic() - restart:.2f}",
                converged_after_upload_s=f"{converge_s:.3f}")

    def test_6_template_computed_on_one_replica_is_a_shared_hit_on_another(self):
        b, c = self.planners[1], self.planners[2]
        pb = self.pb
        # Three types (two derived) and up to 5 nodes: a search of some 50 mixes.
        types = []
        for name, speed in (("rtx4090", 1.0), ("slow", 0.5), ("slower", 0.3)):
            t = pb.NodeType(name=name, gpu_type=name, gpus_per_node=2, count=2,
                            gpu_memory_bytes=24 << 30, intra_node_bytes_per_s=25e9)
            if name != "rtx4090":
                t.derive.measured_gpu_type = "rtx4090"
                t.derive.relative_speed = speed
            types.append(t)
        request = pb.PlanTemplatesRequest(
            model="gpt2-xl", microbatches=8, min_nodes=1, max_nodes=5,
            missing_allreduce_in_node=pb.MISSING_ALLREDUCE_RING,
            cluster=pb.Cluster(node_types=types, inter_node_bytes_per_s=12.5e9))
        stats = pb.GetStatsRequest()
        published_before = self.stub(b).GetStats(stats, timeout=RPC_TIMEOUT_S).shared_cache_published
        on_b = self.stub(b).PlanTemplates(request, timeout=60)
        mixes = len(on_b.results)
        self.assertGreater(mixes, 10)
        self.assertFalse(any(r.shared_cache_hit for r in on_b.results))
        publish_s = self.wait_for(
            lambda: self.stub(b).GetStats(stats, timeout=RPC_TIMEOUT_S).shared_cache_published
            - published_before >= mixes, 5, "publishing B's templates")
        before = self.stub(c).GetStats(stats, timeout=RPC_TIMEOUT_S)
        on_c = self.stub(c).PlanTemplates(request, timeout=60)
        after = self.stub(c).GetStats(stats, timeout=RPC_TIMEOUT_S)
        self.assertTrue(all(r.shared_cache_hit and r.cache_hit for r in on_c.results),
                        f"{sum(r.shared_cache_hit for r in on_c.results)} of {mixes} shared "
                        f"hits; C's stats: {after}; C's log: {c.stderr()[-1500:]}")
        self.assertEqual(after.shared_cache_hits - before.shared_cache_hits, mixes)
        self.assertEqual(after.cache_hits, before.cache_hits, "no local hit on C")
        for x, y in zip(on_b.results, on_c.results):
            self.assertEqual(x.template.iteration_time_ms, y.template.iteration_time_ms)
            self.assertEqual(list(x.template.node_order), list(y.template.node_order))
        # Again on C: now from C's own memory.
        again = self.stub(c).PlanTemplates(request, timeout=60)
        self.assertTrue(all(r.cache_hit and not r.shared_cache_hit for r in again.results))
        figures(mixes=mixes, cold_planning_ms_on_b=f"{on_b.planning_time_ms:.1f}",
                shared_hit_planning_ms_on_c=f"{on_c.planning_time_ms:.1f}",
                published_within_s=f"{publish_s:.3f}")


if __name__ == "__main__":
    e2e_support.main()
