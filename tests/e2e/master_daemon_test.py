"""End to end: examples/python/master_daemon.py against the real oobleck-planner binary.

Plan, node failures one by one, a join and a replayed join, through Python gRPC. Run by
ctest (e2e_master_daemon) with /usr/bin/python3.
"""

import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_support  # noqa: E402
from e2e_support import RPC_TIMEOUT_S  # noqa: E402


class MasterDaemonTest(e2e_support.ExampleServerTestCase):

    def run_daemon(self, *extra):
        script = os.path.join(e2e_support.ARGS.source_dir, "examples", "python",
                              "master_daemon.py")
        result = subprocess.run(
            [sys.executable, script, "--server", self.server.address, *extra],
            capture_output=True, text=True, timeout=RPC_TIMEOUT_S * 4)
        self.assertEqual(result.returncode, 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
        return result.stdout

    def summary(self, out):
        line = out.strip().splitlines()[-1]
        self.assertTrue(line.startswith("summary: "), out)
        return dict(field.split("=", 1) for field in line[len("summary: "):].split())

    def test_fails_nodes_one_by_one_then_one_joins_back(self):
        out = self.run_daemon("--failures", "4")
        summary = self.summary(out)
        # 4 failures, 1 join, 1 replayed join: 6 replans, all answered.
        self.assertEqual(summary["failed"], "4", out)
        self.assertEqual(summary["replans"], "6", out)
        self.assertEqual(summary["stopped_at"], "-", out)
        self.assertEqual(summary["nodes"], "6", out)  # 9 - 4 + 1
        self.assertIn("plan: 9 nodes of 3 types, global batch 64", out)
        events = re.findall(r"^(fail \S+|join \S+(?: again)?): strategy (\S+), iteration ([\d.]+) ms "
                            r"\(was ([\d.]+) ms", out, re.MULTILINE)
        self.assertEqual(len(events), 6, out)
        self.assertEqual(events[-1][1], "unchanged", "a replayed join is a no-op")
        self.assertTrue(events[4][0].startswith("join "))
        # The join is never slower than the plan before it.
        self.assertLessEqual(float(events[4][2]), float(events[4][3]) + 1e-6)
        # Every failure that forced a rebuild printed a copy plan naming surviving sources.
        self.assertIn("copy plan:", out)
        self.assertRegex(out, r"10\.0\.\d\.\d -> 10\.0\.\d\.\d: layers \[\d+,\d+\)")
        self.assertLess(float(summary["max_latency_ms"]), RPC_TIMEOUT_S * 1000)

    def test_fault_tolerance_survives_failures_and_reports_downtime(self):
        # f = 2 on 9 nodes: 3+ pipelines; two failures in a row never lose a layer.
        out = self.run_daemon("--fault-tolerance", "2", "--failures", "2")
        summary = self.summary(out)
        self.assertEqual(summary["stopped_at"], "-", out)
        self.assertGreaterEqual(int(summary["fault_tolerance"]), 1, out)
        tolerated = [int(t) for t in re.findall(r"tolerates (\d+) failure", out)]
        self.assertGreaterEqual(tolerated[0], 2, out)  # the first plan
        self.assertRegex(out, r"downtime \d+\.\d+ s \(copies \d+\.\d+ s\), horizon \d+ iterations")
        self.assertRegex(out, r"alternative\(s\) on the front: \S+ \d+ ms/")

    def test_cost_objective_plans_then_replans(self):
        # The cheapest plan per iteration (with f = 1, so a failure leaves a pipeline), then
        # replans that keep the least time.
        out = self.run_daemon("--objective", "cost", "--fault-tolerance", "1", "--failures", "1")
        summary = self.summary(out)
        self.assertEqual(summary["stopped_at"], "-", out)
        prices = [float(p) for p in re.findall(r"nodes ([\d.]+) per hour", out)]
        self.assertGreater(prices[0], 0, out)
        err = subprocess.run(
            [sys.executable, os.path.join(e2e_support.ARGS.source_dir, "examples", "python",
                                          "master_daemon.py"),
             "--server", self.server.address, "--budget-per-hour", "0.01"],
            capture_output=True, text=True, timeout=RPC_TIMEOUT_S * 4)
        self.assertIn("budget_per_hour", err.stdout + err.stderr)

    def test_stops_with_a_clear_error_when_layers_are_lost(self):
        # One node per type: after the first failures some layer has no replica left.
        out = self.run_daemon("--nodes-per-type", "1", "--failures", "3", "--global-batch", "8")
        summary = self.summary(out)
        self.assertNotEqual(summary["stopped_at"], "-", out)
        self.assertRegex(out, r"FAILED_PRECONDITION: (layers \[\d+, \d+\).* no surviving replica|"
                              r"no plan exists)")


if __name__ == "__main__":
    e2e_support.main()
