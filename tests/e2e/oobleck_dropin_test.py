"""End to end: oobleck_planner.oobleck, the drop-in for Oobleck's planner modules
(oobleck.csrc.planning.pipeline_template, oobleck.planning.instantiator), against the real
oobleck-planner binary. Written from Oobleck's interface (issue 26): templates from an
in-memory profile and from Oobleck's profile folder, both all-reduce key conventions,
instantiation (checked against a brute force of Oobleck's semantics), the batch split over
fixed pipelines, a reconfiguration sequence, and the bad inputs that must raise.

The package is imported from client/python (python_package_test installs it); no build
stubs are loaded, since they register the same proto files. Run by ctest
(e2e_oobleck_dropin) with /usr/bin/python3.
"""

import itertools
import json
import os
import random
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_support  # noqa: E402


def layer(index, forward=1.0, backward=2.0, in_node=None, across=None, mem=(1024, 2048)):
    from oobleck_planner.oobleck import pipeline_template as pt
    return pt.LayerExecutionResult(
        layer_index=index, forward=forward, backward=backward,
        allreduce_in_node=in_node if in_node is not None else {1: 0.2, 2: 0.3, 3: 0.35},
        allreduce_across_nodes=across if across is not None else {
            n: 0.5 + 0.1 * n for n in range(1, 17)}, mem_required=mem)


def profile(num_layers, seed=1, **kwargs):
    from oobleck_planner.oobleck import pipeline_template as pt
    rng = random.Random(seed)
    return pt.LayerExecutionResults([
        layer(i, forward=0.5 + rng.random(), backward=1.0 + 2 * rng.random(), **kwargs)
        for i in range(num_layers)])


def best_by_brute_force(templates, allreduce, num_nodes, batch):
    """Oobleck's instantiation semantics, enumerated: every node used, one micro-batch
    count b >= 1 per used template, time = max T*b + allreduce[pipelines]."""
    best = None
    ranges = [range(num_nodes // t._num_nodes + 1) for t in templates]
    for counts in itertools.product(*ranges):
        if sum(c * t._num_nodes for c, t in zip(counts, templates)) != num_nodes:
            continue
        used = [(c, t) for c, t in zip(counts, templates) if c]
        if not used or sum(counts) not in allreduce:
            continue
        for bs in itertools.product(*[range(1, batch + 1)] * len(used)):
            if sum(c * b for (c, _), b in zip(used, bs)) != batch:
                continue
            time = max(t._iteration_time * b for (_, t), b in zip(used, bs))
            time += allreduce[sum(counts)]
            if best is None or time < best:
                best = time
    return best


class OobleckDropinTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, os.path.join(e2e_support.ARGS.source_dir, "client", "python"))
        sys.path.insert(0, os.path.join(e2e_support.ARGS.source_dir, "tests", "oobleck_compat"))
        cls.server = e2e_support.RunningServer()
        os.environ["OOBLECK_PLANNER_ADDRESS"] = cls.server.address
        os.environ.pop("OOBLECK_PLANNER_OOBLECK_BRANCH", None)
        os.environ.pop("OOBLECK_PLANNER_COST_MODEL", None)
        cls.tmp = tempfile.TemporaryDirectory()
        os.environ["OOBLECK_PLANNER_PROFILE_DIR"] = cls.tmp.name
        import oobleck_planner.oobleck
        from oobleck_planner.oobleck import instantiator, pipeline_template
        cls.dropin, cls.pt, cls.inst = oobleck_planner.oobleck, pipeline_template, instantiator

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()
        cls.server.stop()

    def setUp(self):
        os.environ.pop("OOBLECK_PLANNER_OOBLECK_BRANCH", None)

    def templates(self, prof, low, high, gpus=1, **kwargs):
        return self.pt.PipelineTemplateGenerator(**kwargs).create_pipeline_templates(
            prof, (low, high), gpus)

    # ---- templates -----------------------------------------------------------------------

    def test_templates_ordered_by_nodes_one_stage_per_node_infeasible_left_out(self):
        prof = profile(6)
        templates = self.templates(prof, 2, 8)  # 7 and 8 nodes cannot hold 6 layers
        self.assertEqual([t._num_nodes for t in templates], [2, 3, 4, 5, 6])
        for template in templates:
            self.assertEqual(len(template.get_stages()), template._num_nodes)
            self.assertEqual(template.get_num_gpus_per_node(), 1)
            self.assertGreater(template.get_iteration_time(), 0)
            layers = [i for s in template.get_stages() for i in s._layer_indices]
            self.assertEqual(layers, list(range(6)))
        self.assertEqual(self.templates(prof, 7, 7), [])
        self.assertEqual(self.templates(prof, 3, 2), [])

    def test_template_time_is_oobleck_sosp23_formula_of_its_stages(self):
        prof = profile(7, seed=3)
        for template in self.templates(prof, 1, 4):
            costs = [s._forward + s._backward for s in template.get_stages()]
            if len(costs) == 1:
                expected = 4 * costs[0]
            else:
                kstar = max(i for i, c in enumerate(costs) if c == max(costs))
                expected = (sum(costs) + (2 * len(costs) + kstar + 1) * costs[kstar]
                            + sum(costs[kstar:]))
            self.assertAlmostEqual(template._iteration_time, expected, places=6)

    def test_stage_figures_are_oobleck_execution_result(self):
        prof = self.pt.LayerExecutionResults([
            layer(0, 2.0, 4.0, in_node={1: 0.25, 2: 0.5}, mem=(10, 3)),
            layer(1, 6.0, 8.0, in_node={1: 0.75, 2: 1.0}, mem=(20, 5))])
        stage = self.pt.StageExecutionResult(prof, (0, 2), 2)  # sosp23-artifact: key g - 1
        self.assertEqual(stage._layer_indices, [0, 1])
        self.assertAlmostEqual(stage._forward, 1.0 + 0.25 + 3.0 + 0.75)
        self.assertAlmostEqual(stage._backward, 2.0 + 0.25 + 4.0 + 0.75)
        self.assertEqual(stage._mem_required, 10 * 6 + 3 + 20 * 6 + 5)
        self.assertEqual(stage._num_gpus, 2)
        develop = self.pt.StageExecutionResult(prof, (0, 2), 2, branch="develop")
        self.assertAlmostEqual(develop._forward, 1.0 + 0.5 + 3.0 + 1.0)
        with self.assertRaisesRegex(ValueError, r"allreduce_in_node of layer 0: no entry "
                                                r"for key 3"):
            self.pt.StageExecutionResult(prof, (0, 1), 4)
        with self.assertRaisesRegex(ValueError, "layer_indices"):
            self.pt.StageExecutionResult(prof, (1, 3), 1)

    def test_templates_are_dict_keys_by_identity_and_rank_grid(self):
        prof = profile(4)
        first, second = self.templates(prof, 2, 2), self.templates(prof, 2, 2)
        counts = {first[0]: 1, second[0]: 2}
        self.assertEqual(len(counts), 2)
        self.assertEqual(first[0].get_rank_grid([7, 9]),
                         {i: [7] if i in first[0].get_stages()[0]._layer_indices else [9]
                          for i in range(4)})

    def test_multi_gpu_nodes_under_both_key_conventions(self):
        sosp23 = profile(6, in_node={1: 0.05, 3: 0.08})  # keys g - 1: 2 and 4 GPUs
        templates = self.templates(sosp23, 1, 2, gpus=4)
        self.assertEqual([t._num_nodes for t in templates], [1, 2])
        for template in templates:
            self.assertEqual(sum(s._num_gpus for s in template.get_stages()),
                             4 * template._num_nodes)
            self.assertTrue(all(4 % s._num_gpus == 0 for s in template.get_stages()))
            template.get_rank_grid(list(range(4 * template._num_nodes)))
        develop = profile(6, in_node={2: 0.05, 4: 0.08})  # keys g: 2 and 4 GPUs
        os.environ["OOBLECK_PLANNER_OOBLECK_BRANCH"] = "develop"
        templates = self.templates(develop, 1, 2, gpus=4)
        self.assertEqual([t._num_nodes for t in templates], [1, 2])
        for template in templates:
            self.assertTrue(all(s._num_gpus in (2, 4) for s in template.get_stages()))

    def test_profile_folder_form_and_its_errors(self):
        directory = os.path.join(self.tmp.name, "gpt2-test")
        os.makedirs(directory, exist_ok=True)
        rng = random.Random(5)
        with open(os.path.join(directory, "mb1.json"), "w") as f:
            json.dump([{"forward": rng.random() + 0.1, "backward": rng.random() + 0.2,
                        "mem_required": [1024, 1024]} for _ in range(5)], f)
        with open(os.path.join(directory, "allreduce_in_node.json"), "w") as f:
            json.dump([{"1": 0.1, "2": 0.2}] * 5, f)
        with open(os.path.join(directory, "allreduce_across_nodes.json"), "w") as f:
            json.dump([{str(n): 0.3 for n in range(1, 9)}] * 5, f)
        generator = self.pt.PipelineTemplateGenerator()
        templates = generator.create_pipeline_templates("gpt2", "test", 1, (1, 5), 1)
        self.assertEqual([t._num_nodes for t in templates], [1, 2, 3, 4, 5])
        self.assertEqual(generator.create_pipeline_templates("gpt2", "test", 1, (6, 6), 1), [])
        self.assertEqual(self.pt.get_profile_results("gpt2", "test", 1).size, 5)
        with self.assertRaisesRegex(FileNotFoundError, "mb4.json"):
            generator.create_pipeline_templates("gpt2", "test", 4, (1, 5), 1)
        with open(os.path.join(directory, "allreduce_in_node.json"), "w") as f:
            json.dump([{"1": 0.1}] * 4, f)
        with self.assertRaisesRegex(ValueError, "5 layers in mb1.json, 4 in "
                                                "allreduce_in_node.json"):
            self.pt.get_profile_results("gpt2", "test", 1)

    # ---- instantiation -------------------------------------------------------------------

    def test_best_plan_uses_every_node_splits_the_batch_and_is_exact(self):
        prof = profile(8, seed=11)
        templates = self.templates(prof, 2, 4)
        allreduce = [layer._allreduce_across_nodes for layer in prof.get()]
        for num_nodes, batch in ((9, 12), (10, 17), (7, 9)):
            plan = self.inst.PipelineInstantiator().get_best_execution_plan(
                pipeline_templates=templates, allreduce_across_nodes=allreduce,
                num_nodes=num_nodes, global_num_microbatch=batch)
            self.assertEqual(sum(t._num_nodes * n for t, n in plan.num_instances_set.items()),
                             num_nodes)
            self.assertEqual(plan.total_num_microbatches, batch)
            self.assertEqual(sum(plan.num_microbatches), batch)
            self.assertTrue(all(t in templates for t in plan.pipeline_templates))
            self.assertEqual(plan.pipeline_templates,
                             sorted(plan.pipeline_templates, key=lambda t: t._num_nodes))
            self.assertTrue(all(b >= 1 for b in plan.num_microbatches_set.values()))
            self.assertEqual(plan.total_num_pipelines, sum(plan.num_instances_set.values()))
            formula = max(t._iteration_time * b for t, b in plan.num_microbatches_set.items())
            formula += allreduce[0][plan.total_num_pipelines]
            self.assertAlmostEqual(plan.iteration_time, formula, places=6)
            self.assertAlmostEqual(plan.iteration_time, best_by_brute_force(
                templates, allreduce[0], num_nodes, batch), places=6)

    def test_new_plan_keeps_the_callers_instances(self):
        prof = profile(8, seed=2)
        two, three, four = self.templates(prof, 2, 4)
        allreduce = [layer._allreduce_across_nodes for layer in prof.get()]
        plan = self.inst.PipelineInstantiator().get_new_execution_plan(
            new_num_instances_set={two: 2, three: 0, four: 1},
            allreduce_across_nodes=allreduce, global_num_microbatch=20)
        self.assertEqual(plan.num_instances_set, {two: 2, four: 1})
        self.assertEqual(plan.pipeline_templates, [two, four])
        self.assertEqual(plan.total_num_microbatches, 20)
        self.assertEqual(len(plan.num_microbatches), 3)
        best = min(max(two._iteration_time * b2, four._iteration_time * (20 - 2 * b2))
                   for b2 in range(1, 10)) + allreduce[0][3]
        self.assertAlmostEqual(plan.iteration_time, best, places=6)

    def test_oobleck_shaped_session(self):
        """Profile -> templates -> best plan -> pipelines -> node failures -> new plans."""
        __import__("standin_modules")  # deepspeed.comm for instantiate's process groups
        prof = profile(10, seed=4)
        templates = self.templates(prof, 2, 5)
        allreduce = [layer._allreduce_across_nodes for layer in prof.get()]
        instantiator = self.inst.PipelineInstantiator()
        plan = instantiator.get_best_execution_plan(templates, allreduce, 14, 120)
        by_nodes = {t._num_nodes: t for t in templates}
        built = []

        class Pipeline:
            def __init__(self, pipeline_id, pipeline_template, ranks, dataloader, **kwargs):
                self._template, self._ranks = pipeline_template, ranks
                self.my_pipeline = 0 in ranks
                built.append(self)

        self.inst.OobleckPipeline = Pipeline
        try:
            mine, pipelines, groups = plan.instantiate(None, None, None, 1)
            self.assertIs(mine, pipelines[0])
            self.assertEqual(sorted(r for p in pipelines for r in p._ranks), list(range(14)))
            self.assertEqual(set(groups), set(range(10)))
            sizes = sorted(len(p._ranks) for p in pipelines)
            for lost in range(3):  # a node fails three times; the engine re-forms pipelines
                sizes[-1] -= 1
                sizes = sorted(s for s in sizes if s)
                if sizes[0] < 2:
                    sizes = sorted([sizes[0] + sizes[1]] + sizes[2:])
                counts = {}
                for size in sizes:
                    counts[by_nodes[size]] = counts.get(by_nodes[size], 0) + 1
                new_plan = instantiator.get_new_execution_plan(counts, allreduce, 120)
                self.assertEqual(new_plan.num_instances_set, counts)
                self.assertEqual(new_plan.total_num_microbatches, 120)
                ranks = [list(range(sum(sizes[:i]), sum(sizes[:i + 1])))
                         for i in range(len(sizes))]
                _, pipelines, _ = new_plan.instantiate(None, None, None, 1, ranks=ranks)
                self.assertEqual([p._ranks for p in pipelines], ranks)
        finally:
            self.inst.OobleckPipeline = None

    def test_inline_profile_is_sent_once_then_by_fingerprint(self):
        prof = profile(5, seed=9)
        self.templates(prof, 1, 2)
        [(key, fingerprint)] = prof._fingerprints.items()
        self.assertTrue(fingerprint)
        self.assertEqual(len(self.templates(prof, 1, 2)), 2)
        prof._fingerprints[key] = "0" * len(fingerprint)  # as after a server restart
        self.assertEqual(len(self.templates(prof, 1, 2)), 2)
        self.assertEqual(prof._fingerprints[key], fingerprint)

    # ---- bad input -----------------------------------------------------------------------

    def test_bad_inputs_raise_naming_the_field(self):
        prof, other = profile(6, seed=1), profile(6, seed=2)
        templates = self.templates(prof, 2, 3)
        foreign = self.templates(other, 2, 2)
        allreduce = [layer._allreduce_across_nodes for layer in prof.get()]
        instantiator = self.inst.PipelineInstantiator()
        with self.assertRaisesRegex(ValueError, r"pipeline_templates\[2\]: a template from "
                                                "another profile"):
            instantiator.get_best_execution_plan(templates + foreign, allreduce, 6, 8)
        with self.assertRaises(self.dropin.FailedPrecondition):
            instantiator.get_new_execution_plan({templates[0]: 9}, allreduce, 8)  # 9 pipelines
        with self.assertRaisesRegex(TypeError, r"new_num_instances_set\[0\]: None"):
            instantiator.get_new_execution_plan({None: 1}, allreduce, 8)
        with self.assertRaisesRegex(ValueError, "allreduce_across_nodes: 3 layers"):
            instantiator.get_best_execution_plan(templates, allreduce[:3], 6, 8)
        with self.assertRaisesRegex(TypeError, "LayerExecutionResult"):
            self.pt.LayerExecutionResults([{"forward": 1}])
        with self.assertRaisesRegex(TypeError, "mem_required"):
            layer(0, mem=(1,))
        bad = profile(4, seed=1, in_node={0: 0.1, 1: 0.2})  # 0 GPUs: not a GPU count
        os.environ["OOBLECK_PLANNER_OOBLECK_BRANCH"] = "develop"
        with self.assertRaisesRegex(self.dropin.InvalidArgument, "allreduce"):
            self.templates(bad, 1, 2)
        os.environ["OOBLECK_PLANNER_OOBLECK_BRANCH"] = "trunk"
        with self.assertRaisesRegex(ValueError, "OOBLECK_PLANNER_OOBLECK_BRANCH"):
            self.templates(prof, 1, 2)

    def test_build_python_holds_the_package(self):
        import subprocess
        environment = dict(os.environ, PYTHONPATH=e2e_support.ARGS.stub_dir)
        result = subprocess.run(
            [sys.executable, "-c", "import oobleck_planner.oobleck.instantiator as m; "
             "print(m.__file__)"], capture_output=True, text=True, env=environment,
            cwd=self.tmp.name, timeout=e2e_support.RPC_TIMEOUT_S)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(result.stdout.startswith(e2e_support.ARGS.stub_dir), result.stdout)

    def test_install_shadows_oobleck_module_names(self):
        self.dropin.install()
        from oobleck.csrc.planning.pipeline_template import PipelineTemplateGenerator
        from oobleck.planning.instantiator import PipelineInstantiator
        self.assertIs(PipelineTemplateGenerator, self.pt.PipelineTemplateGenerator)
        self.assertIs(PipelineInstantiator, self.inst.PipelineInstantiator)
        self.assertTrue(self.dropin.installed())


if __name__ == "__main__":
    e2e_support.main()
