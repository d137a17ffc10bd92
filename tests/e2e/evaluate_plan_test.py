"""End to end: Evaluate of our own plans against the real oobleck-planner. A plan answer of
`oobleck-plan plan --json` (and a replan answer) is evaluated by `oobleck-plan evaluate --plan`
and by the Python package's `oobleck_planner.evaluate`, and the iteration time is the one the
answer reported, bit for bit; a broken plan gets the service's error naming the field.

Run by ctest (e2e_evaluate_plan) with /usr/bin/python3.
"""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_support  # noqa: E402


class EvaluatePlanTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.server = e2e_support.RunningServer(profile_dir=e2e_support.example_profiles_dir())
        cls.tmp = tempfile.TemporaryDirectory()
        try:
            cluster = os.path.join(e2e_support.ARGS.example_data, "clusters", "ditto-exp2.json")
            cls.plan_file = os.path.join(cls.tmp.name, "plan.json")
            planned = cls.cli("plan", "--cluster", cluster, "--global-batch", "64", "--json")
            if planned.returncode != 0:
                raise AssertionError(planned.stderr)
            with open(cls.plan_file, "w", encoding="utf-8") as f:
                f.write(planned.stdout)
            cls.planned = json.loads(planned.stdout)
        except BaseException:
            cls.server.stop()
            cls.tmp.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.tmp.cleanup()

    @classmethod
    def cli(cls, *args):
        return e2e_support.run_cli("--server", cls.server.address, *args)

    def test_cli_evaluates_a_plan_answer_to_its_own_iteration_time(self):
        out = self.cli("evaluate", "--plan", self.plan_file, "--json")
        self.assertEqual(out.returncode, 0, out.stderr)
        evaluated = json.loads(out.stdout)
        plan = self.planned["plan"]
        self.assertEqual(evaluated["iteration_time_ms"], plan["iteration_time_ms"])
        self.assertEqual(evaluated["breakdown_ms"]["pipeline"], plan["pipeline_time_ms"])
        self.assertEqual(sorted(evaluated["breakdown_ms"]), ["bubbles", "p2p", "pipeline", "sync"])
        self.assertEqual(evaluated["unmodelled"], ["update_ms", "memory_per_gpu.reserve_bytes"])
        stages = sum(len(p["template"]["stages"]) for p in plan["pipelines"])
        self.assertEqual(len(evaluated["memory_per_gpu"]), stages)
        table = self.cli("evaluate", "--plan", self.plan_file)
        self.assertEqual(table.returncode, 0, table.stderr)
        self.assertIn("not modelled: update_ms", table.stdout)
        # A Sailor flag does not go with --plan: a usage error.
        usage = self.cli("evaluate", "--plan", self.plan_file, "--model", "gpt2-xl")
        self.assertEqual(usage.returncode, 2, usage.stderr)
        self.assertIn("--model is for plans in Sailor's format", usage.stderr)

    def test_python_package_evaluates_plan_and_replan_answers(self):
        import grpc
        sys.path.insert(0, os.path.join(e2e_support.ARGS.source_dir, "client", "python"))
        import oobleck_planner
        from google.protobuf import json_format
        from oobleck_planner.v1 import planner_pb2
        request = json_format.ParseDict(self.planned["request"], planner_pb2.PlanRequest())
        with oobleck_planner.connect(self.server.address) as channel:
            planner = oobleck_planner.PlannerStub(channel)
            answer = planner.Plan(request, timeout=60)
            evaluated = oobleck_planner.evaluate(planner, plan=answer, timeout=30)
            self.assertEqual(evaluated.iteration_time_ms, answer.plan.iteration_time_ms)
            self.assertEqual(evaluated.sync_ms, answer.plan.allreduce_ms)
            self.assertEqual(evaluated.cost_model, "1f1b")
            self.assertEqual(list(evaluated.unmodelled_fields),
                             ["update_ms", "memory_per_gpu.reserve_bytes"])
            # The CLI's saved answer, as JSON text, evaluates to the figure it holds.
            with open(self.plan_file, encoding="utf-8") as f:
                saved = oobleck_planner.evaluate(planner, plan=f.read(), timeout=30)
            self.assertEqual(saved.iteration_time_ms, self.planned["plan"]["iteration_time_ms"])
            # A Replan answer too.
            replan = planner_pb2.ReplanRequest(request=answer.request, plan=answer.plan,
                                               failed_node_ids=[answer.plan.pipelines[0].node_ids[0]])
            replanned = planner.Replan(replan, timeout=60)
            evaluated = oobleck_planner.evaluate(planner, plan=replanned, timeout=30)
            self.assertEqual(evaluated.iteration_time_ms, replanned.plan.iteration_time_ms)
            # A plan over a node the cluster does not have names the field.
            broken = planner_pb2.PlanResponse()
            broken.CopyFrom(answer)
            broken.plan.pipelines[0].node_ids[0] = "zzz"
            with self.assertRaises(grpc.RpcError) as error:
                oobleck_planner.evaluate(planner, plan=broken, timeout=30)
            self.assertEqual(error.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn("job_plan.plan.pipelines[0].node_ids[0] \"zzz\"",
                          error.exception.details())
            with self.assertRaises(ValueError):
                oobleck_planner.evaluate(planner, plan={"plan": {}}, timeout=30)


if __name__ == "__main__":
    e2e_support.main()
