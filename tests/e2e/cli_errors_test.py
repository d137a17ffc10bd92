"""End to end: errors of the real oobleck-plan and trace_replay binaries that were once
silent, misleading or unbounded: output lost on a full stdout with exit 0, a cluster file of
10^9 nodes aborting with bad_alloc, a relative speed reported as "(got 0)", a trace that is
/dev/zero or a FIFO read until memory ran out or forever.

Run by ctest (e2e_cli_errors) with /usr/bin/python3; OOBLECK_TRACE_REPLAY names the
trace_replay binary when the benchmarks are built.
"""

import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_support  # noqa: E402

TIMEOUT_S = 30


def run_to_dev_full(*args):
    """Runs oobleck-plan with stdout on /dev/full (every write fails with ENOSPC)."""
    with open("/dev/full", "w") as full:
        return subprocess.run([e2e_support.ARGS.cli_bin, *args], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=TIMEOUT_S)


class StdoutTest(unittest.TestCase):

    def test_help_to_a_full_stdout_fails(self):
        result = run_to_dev_full("--help")
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("error: DATA_LOSS: cannot write the output to stdout", result.stderr)


class CliErrorsTest(e2e_support.ExampleServerTestCase):

    def cluster(self, name, gpu_types, node_groups):
        """A cluster file over the shared GPT-2 XL profile measured on rtx4090."""
        return self.save(name, json.dumps({
            "model": "gpt2-xl",
            "profile": os.path.join(e2e_support.ARGS.example_data, "profiles", "gpt2-xl", "rtx4090"),
            "profile_measured_on": "rtx4090",
            "microbatches_per_pipeline": 8,
            "inter_node_bytes_per_s": 12.5e9,
            "gpu_types": gpu_types,
            "node_groups": node_groups,
        }))

    def test_answer_to_a_full_stdout_fails(self):
        result = run_to_dev_full("--server", self.server.address, "list-profiles")
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("cannot write the output to stdout", result.stderr)
        # The same command with a working stdout succeeds.
        self.cli("list-profiles")

    def test_a_billion_nodes_are_refused_naming_the_field(self):
        gpu = {"memory_gib": 24, "relative_speed": 2.94, "intra_node_bytes_per_s": 25e9}
        path = self.cluster("huge.json", {"rtx4090": gpu},
                            [{"gpu": "rtx4090", "nodes": 1e9, "gpus_per_node": 1}])
        for command in (["templates"], ["plan", "--global-batch", "8"]):
            result = e2e_support.run_cli("--server", self.server.address, *command,
                                         "--cluster", path, timeout_s=TIMEOUT_S)
            self.assertEqual(result.returncode, 1, result.stderr)
            self.assertIn("RESOURCE_EXHAUSTED", result.stderr)
            self.assertIn("node_groups[0].nodes = 1000000000", result.stderr)
            self.assertIn("1048576", result.stderr)

    def test_a_relative_speed_whose_ratio_underflows_is_shown_as_written(self):
        path = self.cluster("tiny-speed.json", {
            "rtx4090": {"memory_gib": 24, "relative_speed": 2,
                        "intra_node_bytes_per_s": 25e9},
            "t4": {"memory_gib": 16, "relative_speed": 5e-324, "intra_node_bytes_per_s": 25e9},
        }, [{"gpu": "rtx4090", "nodes": 1, "gpus_per_node": 1},
            {"gpu": "t4", "nodes": 1, "gpus_per_node": 1}])
        err = self.cli("templates", "--cluster", path, "--all-nodes", expect_code=1).stderr
        self.assertIn("gpu_types.t4.relative_speed = 5e-324", err)
        self.assertNotIn("(got 0)", err)


@unittest.skipUnless(os.environ.get("OOBLECK_TRACE_REPLAY"), "trace_replay not built")
class TraceReplayInputTest(unittest.TestCase):

    def replay(self, trace):
        cluster = os.path.join(e2e_support.ARGS.source_dir, "bench", "trace_cluster.json")
        return subprocess.run([os.environ["OOBLECK_TRACE_REPLAY"], "--cluster", cluster,
                               "--trace", f"{trace}:v100"], capture_output=True, text=True,
                              timeout=TIMEOUT_S)

    def test_a_device_is_refused_at_once(self):
        result = self.replay("/dev/zero")
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("trace /dev/zero is not a regular file", result.stderr)

    def test_a_fifo_is_refused_without_waiting_for_a_writer(self):
        with e2e_support.tempfile.TemporaryDirectory() as tmp:
            fifo = os.path.join(tmp, "events.csv")
            os.mkfifo(fifo)
            result = self.replay(fifo)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("is not a regular file", result.stderr)

    def test_a_missing_trace_is_named(self):
        result = self.replay("/nonexistent/trace.csv")
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("cannot read trace /nonexistent/trace.csv", result.stderr)


if __name__ == "__main__":
    e2e_support.main()
