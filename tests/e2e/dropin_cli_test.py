"""End to end: the oobleck-plan commands and flags of Oobleck's drop-in (issue 26) against the
real oobleck-planner binary: `instantiate` (the Instantiate RPC), --stage-gpus on templates,
plan and replan, and --allreduce-key on load-profile.

Run by ctest (e2e_dropin_cli) with /usr/bin/python3.
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_support  # noqa: E402

# docs/API.md#instantiate's example.
API_TEMPLATES = ("2:4:510", "3:6:363", "4:8:290")
API_ALLREDUCE = ("3:40", "4:52", "5:61", "6:70")


class InstantiateCliTest(e2e_support.ExampleServerTestCase):

    def test_instantiate_table_and_json(self):
        args = ("instantiate", "--template", *API_TEMPLATES, "--num-nodes", "13",
                "--global-batch", "512", "--allreduce-across", *API_ALLREDUCE)
        answer = json.loads(self.cli(*args, "--json").stdout)
        self.assertEqual(answer["instances"], [5, 1, 0])
        self.assertEqual(answer["microbatches"], [80, 112, 0])
        self.assertAlmostEqual(answer["iteration_time_ms"], 40870, places=6)
        self.assertEqual(answer["num_pipelines"], 6)
        out = self.cli(*args).stdout
        self.assertIn("6 pipelines, iteration 40870.00 ms = pipelines 40800.00 + all-reduce 70.00",
                      out)
        rows = [line.split() for line in out.splitlines()[2:]]
        self.assertEqual([r[4:6] for r in rows], [["5", "80"], ["1", "112"], ["0", "0"]])

    def test_fixed_instances_split_the_batch(self):
        answer = json.loads(self.cli(
            "instantiate", "--template", "2:4:510", "3:6:363", "--instances", "2", "3",
            "--global-batch", "512", "--allreduce-across", "5:61", "--json").stdout)
        self.assertEqual(answer["microbatches"], [82, 116])
        self.assertAlmostEqual(answer["iteration_time_ms"], 42169, places=6)

    def test_templates_from_a_saved_templates_answer(self):
        saved = self.save("templates.json", self.cli(
            "templates", "--model", "gpt2-xl", "--nodes", "1-4", "--cost-model",
            "oobleck-sosp23", "--json").stdout)
        with open(saved) as f:
            times = {r["template"]["num_nodes"]: r["template"]["iteration_time_ms"]
                     for r in json.load(f)["results"]}
        answer = json.loads(self.cli(
            "instantiate", "--templates-file", saved, "--num-nodes", "6", "--global-batch", "64",
            "--allreduce-across", "1:0", "2:1", "3:1.5", "4:2", "5:2.5", "6:3", "--json").stdout)
        instances, microbatches = answer["instances"], answer["microbatches"]
        self.assertEqual(len(instances), 4)
        self.assertEqual(sum(x * n for x, n in zip(instances, [1, 2, 3, 4])), 6)
        self.assertEqual(sum(x * b for x, b in zip(instances, microbatches)), 64)
        slowest = max(times[n] * b for n, x, b in zip([1, 2, 3, 4], instances, microbatches)
                      if x > 0)
        self.assertAlmostEqual(answer["pipeline_time_ms"], slowest, places=6)

    def test_errors(self):
        for args, message in [
                (("--template", "2:4", "--num-nodes", "2", "--global-batch", "8"),
                 "--template values must be NODES:STAGES:ITERATION_MS"),
                (("--template", "2:4:5", "--num-nodes", "2"), "instantiate needs --global-batch"),
                (("--template", "2:4:5", "--global-batch", "8"), "instantiate needs --num-nodes"),
                (("--template", "2:4:5", "--num-nodes", "2", "--global-batch", "8",
                  "--allreduce-across", "1=0"), "--allreduce-across values must be PIPELINES:MS"),
                (("--num-nodes", "2", "--global-batch", "8"), "needs either --template"),
                (("--template", "2:4:5", "--num-nodes", "2", "--global-batch", "8", "9"),
                 "instantiate needs one --global-batch N (got 2 values)")]:
            err = self.cli("instantiate", *args, expect_code=2).stderr
            self.assertIn(message, err)
        # The server's checks: every node used, nothing left over.
        err = self.cli("instantiate", "--template", "2:4:510", "4:8:290", "--num-nodes", "7",
                       "--global-batch", "64", "--allreduce-across", "2:1", "3:1",
                       expect_code=1).stderr
        self.assertIn("error: FAILED_PRECONDITION: num_nodes = 7", err)
        err = self.cli("instantiate", "--template", "2:4:0", "--num-nodes", "2",
                       "--global-batch", "64", "--allreduce-across", "1:0", expect_code=1).stderr
        self.assertIn("error: INVALID_ARGUMENT: templates[0].iteration_time_ms", err)
        err = self.cli("instantiate", "--templates-file", self.path("missing.json"),
                       "--num-nodes", "2", "--global-batch", "8", expect_code=1).stderr
        self.assertIn("cannot open", err)


class StageGpusCliTest(e2e_support.ExampleServerTestCase):

    def stage_gpus_of(self, policy):
        data = json.loads(self.cli(
            "templates", "--model", "gpt2-xl", "--nodes", "1-2", "--gpus-per-node", "4",
            "--missing-allreduce", "ring", "--cost-model", "oobleck-sosp23", "--stage-gpus",
            policy, "--json").stdout)
        return {s["gpus"] for r in data["results"] if r["feasible"]
                for s in r["template"]["stages"]}

    def test_templates_stage_gpus(self):
        self.assertLessEqual(self.stage_gpus_of("divisors"), {1, 2, 4})
        self.assertLessEqual(self.stage_gpus_of("equal-halves"), {1, 2, 4})
        # Oobleck develop: stages of a power of two GPUs, also on a node of 3 GPUs.
        for policy, allowed in [("equal-halves", {1, 2}), ("divisors", {1, 3})]:
            data = json.loads(self.cli(
                "templates", "--model", "gpt2-xl", "--nodes", "1", "--gpus-per-node", "3",
                "--missing-allreduce", "ring", "--cost-model", "oobleck-sosp23",
                "--stage-gpus", policy, "--json").stdout)
            gpus = [s["gpus"] for s in data["results"][0]["template"]["stages"]]
            self.assertEqual(sum(gpus), 3, data)
            self.assertLessEqual(set(gpus), allowed, data)
        err = self.cli("templates", "--model", "gpt2-xl", "--nodes", "1", "--stage-gpus",
                       "thirds", expect_code=2).stderr
        self.assertIn('--stage-gpus must be any, divisors or equal-halves (got "thirds")', err)

    def test_plan_and_replan_carry_stage_gpus(self):
        cluster = os.path.join(e2e_support.ARGS.example_data, "clusters", "ditto-exp2.json")
        out = self.cli("plan", "--cluster", cluster, "--global-batch", "64", "--stage-gpus",
                       "divisors", "--json").stdout
        planned = json.loads(out)
        self.assertEqual(planned["request"]["stage_gpus"], "STAGE_GPUS_DIVISORS")
        plan_file = self.save("plan.json", out)
        victim = planned["plan"]["pipelines"][0]["node_ids"][0]
        kept = json.loads(self.cli("replan", "--plan", plan_file, "--fail", victim,
                                   "--json").stdout)
        self.assertEqual(kept["request"]["stage_gpus"], "STAGE_GPUS_DIVISORS")
        changed = json.loads(self.cli("replan", "--plan", plan_file, "--fail", victim,
                                      "--stage-gpus", "equal-halves", "--json").stdout)
        self.assertEqual(changed["request"]["stage_gpus"], "STAGE_GPUS_EQUAL_HALVES")


class AllreduceKeyCliTest(e2e_support.ExampleServerTestCase):

    def test_load_profile_allreduce_key(self):
        # The example's allreduce_in_node.json has the key "1" on every layer.
        source = os.path.join(e2e_support.example_profiles_dir(), "gpt2-xl", "rtx4090")
        plain = json.loads(self.cli("load-profile", "--model", "key-gpus", "--gpu-type", "a100",
                                    source, "--json").stdout)["profile"]
        self.assertEqual(plain["allreduce_in_node_gpus"], [1])
        minus = json.loads(self.cli("load-profile", "--model", "key-minus", "--gpu-type", "a100",
                                    "--allreduce-key", "gpus-minus-one", source,
                                    "--json").stdout)["profile"]
        self.assertEqual(minus["allreduce_in_node_gpus"], [1, 2])  # key "1" = 2 GPUs
        self.assertEqual(minus["allreduce_key"], "ALLREDUCE_KEY_GPUS_MINUS_ONE")
        err = self.cli("load-profile", "--model", "m", "--gpu-type", "a100", "--allreduce-key",
                       "gpus-plus-one", source, expect_code=2).stderr
        self.assertIn("--allreduce-key must be gpus or gpus-minus-one", err)


if __name__ == "__main__":
    e2e_support.main()
