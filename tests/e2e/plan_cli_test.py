"""End to end: `oobleck-plan plan` and `replan` against the real oobleck-planner binary; the
JSON that plan prints is accepted back by replan, and replan's JSON by the next replan.

Run by ctest (e2e_plan_cli) with /usr/bin/python3.
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_support  # noqa: E402


class PlanCliTest(e2e_support.ExampleServerTestCase):

    def cluster(self):
        return os.path.join(e2e_support.ARGS.example_data, "clusters", "ditto-exp2.json")

    def test_plan_replan_json_round_trip(self):
        out = self.cli("plan", "--cluster", self.cluster(), "--global-batch", "64", "128",
                       "--json").stdout
        planned = json.loads(out)
        ids = [n["id"] for n in planned["request"]["nodes"]]
        # The cluster file's generated ids, <gpu>-<k>.
        self.assertEqual(sorted(ids), ["rtx3090-0", "rtx3090-1", "rtx4090-0", "rtx4090-1",
                                       "v100-0", "v100-1"])
        self.assertEqual([s["global_batch"] for s in planned["sweep"]], [64, 128])
        plan = planned["plan"]
        self.assertEqual(sum(p["microbatches"] for p in plan["pipelines"]), 64)
        self.assertAlmostEqual(plan["iteration_time_ms"],
                               plan["pipeline_time_ms"] + plan["allreduce_ms"], places=6)
        plan_file = self.save("plan.json", out)

        victim = plan["pipelines"][0]["node_ids"][0]
        out = self.cli("replan", "--plan", plan_file, "--fail", victim, "--json").stdout
        first = json.loads(out)
        self.assertNotIn(victim, [n["id"] for n in first["request"]["nodes"]])
        self.assertIn(first["strategy"], ["optimal", "keep-pipelines", "oobleck-fallback"])
        self.assertAlmostEqual(first["old_iteration_time_ms"], plan["iteration_time_ms"], places=6)
        for copy in first["copies"]:
            self.assertNotEqual(copy["source_node_id"], victim)
        first_file = self.save("replan1.json", out)

        # Replaying the failure on the new plan changes nothing.
        replay = json.loads(self.cli("replan", "--plan", first_file, "--fail", victim,
                                     "--json").stdout)
        self.assertEqual(replay["strategy"], "unchanged")
        self.assertEqual(replay["ignored_failed_node_ids"], [victim])
        self.assertEqual(replay["copies"], [])

        # A node joins back: the table shows where its layers come from.
        out = self.cli("replan", "--plan", first_file, "--join", f"{victim}:{victim.split('-')[0]}",
                       "--tolerance", "0").stdout
        self.assertIn("replan (", out)
        self.assertIn("PIPELINE", out)

    def test_fault_tolerance_and_horizon_flags(self):
        cluster = os.path.join(e2e_support.ARGS.example_data, "clusters", "ditto-exp3.json")
        out = self.cli("plan", "--cluster", cluster, "--global-batch", "64",
                       "--fault-tolerance", "2", "--json").stdout
        planned = json.loads(out)
        self.assertEqual(planned["request"]["fault_tolerance"], 2)
        self.assertGreaterEqual(len(planned["plan"]["pipelines"]), 3)
        self.assertEqual(planned["plan"]["fault_tolerance"], len(planned["plan"]["pipelines"]) - 1)
        plan_file = self.save("ft.json", out)
        # Two failures at once, in two pipelines: no layer is lost.
        victims = [p["node_ids"][0] for p in planned["plan"]["pipelines"][:2]]
        out = self.cli("replan", "--plan", plan_file, "--fail", *victims,
                       "--horizon-iterations", "50").stdout
        self.assertRegex(out, r"downtime \d+\.\d+ s \(copies \d+\.\d+ s\); tolerates \d+")
        err = self.cli("plan", "--cluster", cluster, "--global-batch", "64",
                       "--fault-tolerance", "40", expect_code=1).stderr
        self.assertIn("FAILED_PRECONDITION: global_batch[0] = 64: fault_tolerance = 40 needs 41 "
                      "pipelines; the nodes fit at most", err)
        err = self.cli("replan", "--plan", plan_file, "--fail", victims[0],
                       "--horizon-iterations", "-1", expect_code=2).stderr
        self.assertIn("--horizon-iterations must be a finite number >= 0", err)

    def test_objective_cost_and_budget_flags(self):
        """Prices from the cluster file's gpu_types (per GPU) reach the plan."""
        with open(self.cluster()) as f:
            cluster = json.load(f)
        cluster["profile"] = os.path.normpath(
            os.path.join(os.path.dirname(self.cluster()), cluster["profile"]))
        prices = {"v100": 0.45, "rtx3090": 0.30, "rtx4090": 0.90}
        for gpu, price in prices.items():
            cluster["gpu_types"][gpu]["price_per_hour"] = price
        priced = self.save("priced.json", json.dumps(cluster))
        fastest = json.loads(self.cli("plan", "--cluster", priced, "--global-batch", "64",
                                      "--json").stdout)
        cheapest = json.loads(self.cli("plan", "--cluster", priced, "--global-batch", "64",
                                       "--objective", "cost", "--json").stdout)
        self.assertEqual(cheapest["request"]["objective"], "cost")
        for answer in (fastest, cheapest):
            plan = answer["plan"]
            gpus = {t["name"]: t["gpus_per_node"] for t in answer["request"]["cluster"]["node_types"]}
            node_type = {n["id"]: n["node_type"] for n in answer["request"]["nodes"]}
            expected = sum(prices[node_type[i]] * gpus[node_type[i]]
                           for p in plan["pipelines"] for i in p["node_ids"])
            self.assertAlmostEqual(plan["price_per_hour"], expected, places=9)
        cost = lambda a: a["plan"]["price_per_hour"] * a["plan"]["iteration_time_ms"]
        self.assertLessEqual(cost(cheapest), cost(fastest) * (1 + 1e-9))
        table = self.cli("plan", "--cluster", priced, "--global-batch", "64",
                         "--objective", "cost").stdout
        self.assertIn("per hour", table)
        err = self.cli("plan", "--cluster", priced, "--global-batch", "64",
                       "--budget-per-hour", "0.1", expect_code=1).stderr
        self.assertIn("FAILED_PRECONDITION: global_batch[0] = 64: budget_per_hour = 0.1 is below "
                      "the price of every plan", err)
        err = self.cli("plan", "--cluster", priced, "--global-batch", "64",
                       "--objective", "fastest", expect_code=2).stderr
        self.assertIn("--objective must be time or cost", err)

    def test_table_lists_pipelines_idle_nodes_and_sweep(self):
        out = self.cli("plan", "--cluster", self.cluster(), "--global-batch", "4", "64",
                       "--max-nodes-per-pipeline", "1").stdout
        self.assertIn("global batch 4 micro-batches", out)
        self.assertIn("IDLE_NODE", out)  # a V100 node alone cannot hold GPT-2 XL
        self.assertIn("no feasible pipeline template of 1..1 nodes includes a v100 node", out)
        self.assertIn("GLOBAL_BATCH", out)

    def test_usage_and_errors(self):
        plan_file = self.save("p.json", self.cli("plan", "--cluster", self.cluster(),
                                                 "--global-batch", "8", "--json").stdout)
        err = self.cli("plan", "--cluster", self.cluster(), expect_code=2).stderr
        self.assertIn("plan needs --global-batch", err)
        err = self.cli("replan", "--plan", plan_file, expect_code=2).stderr
        self.assertIn("replan needs --fail ID ... and/or --join ID:TYPE", err)
        err = self.cli("replan", "--plan", plan_file, "--join", "x", expect_code=2).stderr
        self.assertIn("--join values must be ID:TYPE", err)
        err = self.cli("replan", "--plan", plan_file, "--join", "x:h100", expect_code=1).stderr
        self.assertIn('INVALID_ARGUMENT: joined_nodes[0].node_type "h100"', err)
        not_a_plan = self.save("other.json", '{"results": []}')
        err = self.cli("replan", "--plan", not_a_plan, "--fail", "a", expect_code=1).stderr
        self.assertIn('has no "request" and "plan"', err)
        everyone = [n["id"] for n in json.load(open(plan_file))["request"]["nodes"]]
        err = self.cli("replan", "--plan", plan_file, "--fail", *everyone, expect_code=1).stderr
        self.assertIn("FAILED_PRECONDITION", err)
        self.assertIn("no surviving replica", err)


if __name__ == "__main__":
    e2e_support.main()
