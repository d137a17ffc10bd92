"""End to end: `oobleck-plan evaluate --sailor-plan FILE --sailor-data DIR [--json]`, the
real CLI predicting a plan in Sailor's format from data/sailor with no server running: the
JSON answer, the table, and usage and input errors (exit codes 2 and 1).

Run by ctest (e2e_evaluate_cli) with /usr/bin/python3.
"""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_support  # noqa: E402


class EvaluateCliTest(unittest.TestCase):

    def setUp(self):
        self.data = os.path.join(e2e_support.ARGS.source_dir, "data", "sailor")
        self.runs = os.path.join(self.data, "validation", "clariden-opt-350")

    def run_plan(self, plan_path, *extra):
        return e2e_support.run_cli("evaluate", "--sailor-plan", plan_path, "--sailor-data",
                                   self.data, *extra)

    def test_json_answer(self):
        plan_path = os.path.join(self.runs, "plan_config_N8_D2.json")
        result = self.run_plan(plan_path, "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        answer = json.loads(result.stdout)
        with open(plan_path, encoding="utf-8") as f:
            measured = json.load(f)
        self.assertEqual(answer["model"], "OPT-350")
        self.assertEqual(answer["microbatches"], 32)
        # Within 15 % of the measured run.
        self.assertAlmostEqual(answer["iteration_time_ms"] / (measured["real"] * 1e3), 1,
                               delta=0.15)
        self.assertAlmostEqual(answer["peak_memory_bytes"] / measured["max_mem"], 1,
                               delta=0.15)
        b = answer["breakdown_ms"]
        self.assertAlmostEqual(answer["iteration_time_ms"], b["pipeline"] + b["sync"] + b["update"],
                               places=6)
        self.assertGreater(b["bubbles"], 0)
        self.assertGreater(b["p2p"], 0)
        gpus = answer["memory_per_gpu"]
        self.assertEqual(len(gpus), 4 * 2)  # 4 stages × dp 2
        self.assertEqual(max(g["total_bytes"] for g in gpus), answer["peak_memory_bytes"])
        self.assertEqual({g["gpu_type"] for g in gpus}, {"GH-96"})

    def test_table(self):
        result = self.run_plan(os.path.join(self.runs, "plan_config_N2_D1.json"))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("model OPT-350, 4 micro-batches per pipeline", result.stdout)
        self.assertIn("gradient sync", result.stdout)
        self.assertIn("peak memory", result.stdout)

    def test_errors(self):
        result = e2e_support.run_cli("evaluate", "--sailor-data", self.data)
        self.assertEqual(result.returncode, 2)
        self.assertIn("evaluate needs --sailor-plan FILE and either --sailor-data DIR", result.stderr)
        with open(os.path.join(self.runs, "plan_config_N2_D1.json"), encoding="utf-8") as f:
            plan = json.load(f)
        plan["pipeline_list"][0]["tmp_per_stage"][1][0][0][0][0] = "H100-80"
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "plan.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(plan, f)
            result = self.run_plan(path, "--json")
        self.assertEqual(result.returncode, 1)
        self.assertIn("FAILED_PRECONDITION", result.stderr)
        self.assertIn("pipeline_list/0/tmp_per_stage/1/0", result.stderr)
        self.assertIn("H100-80", result.stderr)
        result = self.run_plan(os.path.join(self.runs, "no-such-plan.json"))
        self.assertEqual(result.returncode, 1)
        self.assertIn("NOT_FOUND", result.stderr)


if __name__ == "__main__":
    e2e_support.main()
