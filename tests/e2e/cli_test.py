"""End to end: build/bin/oobleck-plan against the real oobleck-planner binary.

Run by ctest (e2e_cli) with /usr/bin/python3.
"""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_support  # noqa: E402

PUBLISHED_OOBLECK_MS = {1: 25348.51, 2: 28853.39, 3: 27534.99, 4: 27245.21}
# relative_speed of the RTX 4090 on the ditto files' scale (ditto-exp2/exp3 list it);
# ditto-exp1 does not, so the CLI needs it given.
RTX4090_RELATIVE_SPEED = "2.94"


class CliTest(e2e_support.ExampleServerTestCase):

    def cluster_file(self, name):
        return os.path.join(e2e_support.ARGS.example_data, "clusters", name)

    def test_list_profiles_shows_the_bundled_profile(self):
        out = self.cli("list-profiles").stdout
        header, *rows = out.splitlines()
        self.assertIn("FINGERPRINT", header)
        self.assertTrue(any(row.split()[:3] == ["gpt2-xl", "rtx4090", "1"] for row in rows), out)
        data = json.loads(self.cli("list-profiles", "--model", "gpt2-xl", "--json").stdout)
        self.assertEqual([(p["gpu_type"], p["num_layers"]) for p in data["profiles"]],
                         [("rtx4090", 50)])

    def test_templates_table(self):
        out = self.cli("templates", "--model", "gpt2-xl", "--nodes", "1-4",
                       "--cost-model", "oobleck-sosp23").stdout
        rows = [line.split() for line in out.splitlines() if line.startswith(("1x", "2x", "3x",
                                                                                "4x"))]
        self.assertEqual(len(rows), 4, out)
        for row in rows:
            nodes, iteration_ms = int(row[1]), float(row[3])
            self.assertAlmostEqual(iteration_ms, PUBLISHED_OOBLECK_MS[nodes], delta=0.01)
            self.assertTrue(row[5].startswith("[0,"), row)  # stages, e.g. [0,17)@n0:node/1g

    def test_templates_json_uses_proto_field_names(self):
        out = self.cli("templates", "--model", "gpt2-xl", "--nodes", "1-4",
                       "--cost-model", "oobleck-sosp23", "--json").stdout
        data = json.loads(out)
        self.assertEqual(data["cost_model"], "oobleck-sosp23")
        times = {r["template"]["num_nodes"]: r["template"]["iteration_time_ms"]
                 for r in data["results"]}
        self.assertEqual(sorted(times), [1, 2, 3, 4])
        for nodes, ms in times.items():
            self.assertAlmostEqual(ms, PUBLISHED_OOBLECK_MS[nodes], delta=0.01)
        self.assertIn("mix_label", data["results"][0])
        self.assertIn("layer_begin", data["results"][0]["template"]["stages"][0])

    def test_cluster_file_all_nodes(self):
        out = self.cli("templates", "--cluster", self.cluster_file("ditto-exp1.json"),
                       "--all-nodes", "--measured-relative-speed", RTX4090_RELATIVE_SPEED,
                       "--json").stdout
        results = json.loads(out)["results"]
        self.assertEqual(len(results), 1)
        result = results[0]
        self.assertTrue(result["feasible"], result.get("infeasible_reason"))
        tmpl = result["template"]
        self.assertEqual(tmpl["num_nodes"], 4)
        self.assertEqual(tmpl["num_gpus"], 8)
        self.assertEqual(sorted(tmpl["node_order"]), ["rtx3090", "rtx3090", "v100", "v100"])
        self.assertEqual(sorted(tmpl["derived_gpu_types"]), ["rtx3090", "v100"])
        stages = tmpl["stages"]
        self.assertEqual((stages[0]["layer_begin"], stages[-1]["layer_end"]), (0, 50))
        for before, after in zip(stages, stages[1:]):
            self.assertEqual(before["layer_end"], after["layer_begin"])
        # Every stage fits its GPU (1f1b checks memory): 16 GiB v100, 24 GiB rtx3090.
        memory_gib = {"v100": 16, "rtx3090": 24}
        for stage in stages:
            self.assertLessEqual(stage["memory_bytes_per_gpu"],
                                 memory_gib[stage["node_type"]] * 2**30)

        table = self.cli("templates", "--cluster", self.cluster_file("ditto-exp1.json"),
                         "--all-nodes", "--measured-relative-speed",
                         RTX4090_RELATIVE_SPEED).stdout
        # Each derived type is marked where it stands in the label.
        self.assertIn("2xv100*+2xrtx3090* ", table)
        self.assertIn("* profile derived by relative speed, not measured: rtx3090, v100", table)

    def test_cluster_file_measured_type_listed_needs_no_extra_speed(self):
        """ditto-exp2 lists rtx4090, so its relative speeds resolve from the file alone."""
        out = self.cli("templates", "--cluster", self.cluster_file("ditto-exp2.json"),
                       "--nodes", "1", "--json").stdout
        results = {r["mix_label"]: r for r in json.loads(out)["results"]}
        self.assertEqual(sorted(results), ["1xrtx3090", "1xrtx4090", "1xv100"])
        # 2 x 16 GiB cannot hold GPT-2 XL's weights and optimizer state (~41 GB).
        self.assertFalse(results["1xv100"]["feasible"])
        self.assertIn("memory", results["1xv100"]["infeasible_reason"])
        rtx3090 = results["1xrtx3090"]["template"]
        rtx4090 = results["1xrtx4090"]["template"]
        # rtx4090 is the measured type (no derivation); rtx3090 is derived from it.
        self.assertEqual(rtx4090["derived_gpu_types"], [])
        self.assertEqual(rtx3090["derived_gpu_types"], ["rtx3090"])
        # Relative speeds 1.8 vs 2.94: the derived GPU is slower.
        self.assertGreater(rtx3090["iteration_time_ms"], rtx4090["iteration_time_ms"])

    def test_cluster_file_without_measured_speed_is_an_error(self):
        result = self.cli("templates", "--cluster", self.cluster_file("ditto-exp1.json"),
                          "--all-nodes", expect_code=1)
        self.assertRegex(result.stderr, r"^error: INVALID_ARGUMENT: .*ditto-exp1\.json")
        self.assertIn("--measured-relative-speed", result.stderr)

    def test_cluster_profile_conflict_needs_replace(self):
        """A cluster file naming a different profile than the server's stored one."""
        examples = e2e_support.ARGS.example_data
        with open(self.cluster_file("ditto-exp2.json")) as f:
            cluster = json.load(f)
        # Same layer times, different (estimated) all-reduce data: another fingerprint.
        cluster["profile"] = os.path.join(examples, "profiles-ring", "gpt2-xl", "rtx4090")
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(cluster, f)
            path = f.name
        try:
            result = self.cli("templates", "--cluster", path, "--all-nodes", expect_code=1)
        finally:
            os.unlink(path)
        self.assertTrue(result.stderr.startswith("error: ALREADY_EXISTS: "), result.stderr)
        self.assertIn("gpt2-xl/rtx4090/mb1", result.stderr)
        self.assertIn("--replace", result.stderr)

    def test_load_profile_then_conflict_then_replace(self):
        source = os.path.join(e2e_support.example_profiles_dir(), "gpt2-xl", "rtx4090")
        args = ("load-profile", "--model", "e2e-cli-model", "--gpu-type", "a100", source)
        self.assertIn("loaded e2e-cli-model/a100/mb1: 50 layers", self.cli(*args).stdout)
        again = self.cli(*args, expect_code=1)
        self.assertTrue(again.stderr.startswith("error: ALREADY_EXISTS: "), again.stderr)
        replaced = json.loads(self.cli(*args, "--replace", "--json").stdout)
        self.assertTrue(replaced["replaced"])
        self.assertEqual(replaced["profile"]["num_layers"], 50)
        listed = json.loads(self.cli("list-profiles", "--model", "e2e-cli-model",
                                     "--json").stdout)
        self.assertEqual([p["gpu_type"] for p in listed["profiles"]], ["a100"])

    def test_unknown_model_exits_1_with_the_code(self):
        result = self.cli("templates", "--model", "no-such-model", "--nodes", "1-2",
                          "--microbatches", "8", expect_code=1)
        self.assertTrue(result.stderr.startswith("error: NOT_FOUND: "), result.stderr)
        self.assertIn("no-such-model", result.stderr)
        self.assertEqual(result.stdout, "")

    def test_usage_errors_exit_2(self):
        for args in (("templates", "--no-such-flag"),
                     ("frobnicate",),
                     ("templates", "--model", "gpt2-xl", "--nodes", "3-1"),
                     ("list-profiles", "--nodes", "2"),
                     ("templates", "--cluster", "x.json", "--gpus-per-node", "2")):
            result = self.cli(*args, expect_code=2)
            self.assertTrue(result.stderr.startswith("error: INVALID_ARGUMENT: "), result.stderr)

    def test_stats_counts_requests(self):
        self.cli("templates", "--model", "gpt2-xl", "--nodes", "2", "--cost-model",
                 "oobleck-sosp23")
        stats = json.loads(self.cli("stats", "--json").stdout)
        self.assertGreaterEqual(int(stats["plan_templates_requests"]), 1)
        self.assertGreaterEqual(stats["profiles_loaded"], 1)
        self.assertIn("cache hits / misses", self.cli("stats").stdout)


if __name__ == "__main__":
    e2e_support.main()
