#!/usr/bin/env python3
"""Writes the seed corpus of rpc_structure_fuzzer (fuzz/corpus/rpc_structure/): one input
per row of the hostile-input table in docs/ERRORS.md, encoded the way the fuzzer's
FuzzedDataProvider decodes them (integers and booleans are taken from the end of the input,
strings from the front). Re-run after changing the order of the fuzzer's decisions.

  python3 fuzz/make_rpc_structure_seeds.py
"""

import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "rpc_structure")
SPECIAL = {24e9: 0, 1e10: 1, 1e9: 2, 0: 3, -1: 4, 5e-324: 5, 1e308: 6, "inf": 7, "nan": 8, 1: 9}


class Encoder:
    """The inverse of FuzzedDataProvider for the calls the fuzzer makes."""

    def __init__(self):
        self.tail = []  # bytes in the order they are consumed from the end

    def int_in_range(self, lo, hi, value):
        span = hi - lo
        assert lo <= value <= hi
        nbytes = 0
        while nbytes < 8 and (span >> (8 * nbytes)) > 0:
            nbytes += 1
        offset = value - lo
        # Consumed most significant first; the result is taken modulo span + 1.
        self.tail += [(offset >> (8 * (nbytes - 1 - i))) & 0xFF for i in range(nbytes)]

    def boolean(self, value):
        self.int_in_range(0, 255, 1 if value else 0)

    def special(self, value):
        self.boolean(True)
        self.int_in_range(0, 9, SPECIAL[value])

    def data(self):
        return bytes(reversed(self.tail))


def name(e, pieces):
    """A node-type name: t<i> (pieces None), or t<i> followed by SeparatorName's pieces."""
    if pieces is None:
        e.int_in_range(0, 4, 2)
        return
    e.int_in_range(0, 4, 4)
    e.int_in_range(1, 8, len(pieces))
    for piece in pieces:
        e.int_in_range(0, len(PIECES) - 1, PIECES.index(piece))


def job(e, types, count, microbatches=8, relative_speed=None, inter_node=1e9, names=None,
        memory=None):
    e.int_in_range(0, 7, 1)          # model gpt2-xl
    e.int_in_range(-1, 2, 0)         # microbatch_size
    e.int_in_range(0, 3, 0)          # cost model "" (1f1b)
    e.int_in_range(-1, 64, microbatches)
    e.boolean(False)                 # no optimizer multiplier
    e.int_in_range(0, 2, 0)          # missing all-reduce: skip
    e.boolean(True)                  # the wide type count
    e.int_in_range(0, 300, types)
    e.special(inter_node)
    for i in range(types):
        derived = relative_speed is not None and i == types - 1
        name(e, names[i] if names else None)
        if derived:
            e.boolean(False)         # gpu_type g<i>, derived below
            e.int_in_range(0, 4, 2)
        else:
            e.boolean(True)          # gpu_type rtx4090
        e.int_in_range(-1, 70, 1)    # gpus_per_node
        e.special(memory[i] if memory else 24e9)
        e.special(1e10)
        if count <= 9:
            e.boolean(True)
            e.int_in_range(-1, 9, count)
        else:
            e.boolean(False)
            e.int_in_range(-1, 5000, count)
        if derived:
            e.int_in_range(0, 3, 0)  # derive
            e.boolean(True)          # from rtx4090
            e.special(relative_speed)
        else:
            e.int_in_range(0, 3, 1)  # measured


def drop_in_fields(e, stage_gpus=0, inline_files=0, allreduce_key=0):
    """DropInFields: stage_gpus, then `inline_files` inline profiles of the harness's files
    for GPU type rtx4090 under `allreduce_key`."""
    e.int_in_range(0, 3, stage_gpus)
    e.int_in_range(0, 2, inline_files)
    for _ in range(inline_files):
        e.boolean(True)              # gpu_type rtx4090
        e.int_in_range(0, 3, 1)      # Oobleck's files
        e.boolean(False)             # allreduce_in_node.json as it is
        e.boolean(False)             # mb1.json as it is
        e.int_in_range(0, 2, allreduce_key)


def templates_body(e, types, count, max_nodes, runaway=(0,), drop_in=None, **kw):
    job(e, types, count, **kw)
    e.int_in_range(-1, 9, 0)         # min_nodes
    e.int_in_range(-1, 9, max_nodes)
    e.int_in_range(0, 4, 0)          # no listed mixes
    e.int_in_range(0, 3, runaway[0])  # RunawaySizes (0: the request as it is)
    if runaway[0] == 2:              # every count 2^19 (types x 2^19 nodes, min = max)
        for _ in range(types):
            e.boolean(True)
    drop_in_fields(e, **(drop_in or {}))


def templates(types, count, max_nodes, **kw):
    e = Encoder()
    e.int_in_range(0, 7, 0)
    templates_body(e, types, count, max_nodes, **kw)
    e.boolean(False)                 # no second request
    return e.data()


def colliding_templates():
    """Two PlanTemplates requests whose clusters differ but whose template cache keys were
    the same text when names and fields were joined with '|' and ':' (hardening round 3,
    item 5): {t0: 1e308 bytes}, {t1:<1e9 fields>|t1: 1e9 bytes} and then
    {t0:<1e308 fields>|t1: 1e9 bytes}, {t1: 1e9 bytes}. The second's one-node mix (1, 0) is
    infeasible, but such a key served it the first one's feasible template."""
    e = Encoder()
    e.int_in_range(0, 7, 0)
    templates_body(e, 2, 1, 1, inter_node=1e9, memory=[1e308, 1e9],
                   names=[None, [":", FIELDS_1E9, "|", "t1"]])
    e.boolean(True)                  # a second request
    templates_body(e, 2, 1, 1, inter_node=1e9, memory=[1e9, 1e9],
                   names=[[":", FIELDS_1E308, "|", "t1"], None])
    return e.data()


def uploaded_profile(layers, forward, backward, types, count, max_nodes):
    """UploadedProfileTemplates: `layers` layers of these times, then templates of
    `types` node types that all use the uploaded profile."""
    e = Encoder()
    e.int_in_range(0, 7, 3)
    e.int_in_range(1, 8, layers)
    for _ in range(layers):
        e.special(forward)
        e.special(backward)
        e.boolean(False)             # param_bytes 1e6
        e.boolean(False)             # activation_bytes 1e6
    templates_body(e, types, count, max_nodes)
    for _ in range(types):
        e.boolean(True)              # gpu_type "uploaded"
    return e.data()


def plan(types, count, max_nodes, drop_in=None, rule=0, fault_tolerance=0,
         oobleck_instantiation=False, **kw):
    e = Encoder()
    e.int_in_range(0, 7, 1)
    job(e, types, count, **kw)
    e.int_in_range(0, 3, 1)          # one global batch size
    e.int_in_range(-1, 5000, 64)
    e.int_in_range(-1, 9, 0)         # min_nodes_per_pipeline
    e.int_in_range(-1, 9, max_nodes)
    e.boolean(False)                 # nodes from the counts
    drop_in_fields(e, **(drop_in or {}))
    e.int_in_range(0, 2, rule)       # fault_tolerance_rule
    e.int_in_range(0, 3, fault_tolerance)
    e.boolean(oobleck_instantiation)
    return e.data()


def instantiate(templates, num_nodes, global_batch, allreduce, instances=None):
    """Instantiate: templates (nodes, stages, ms) with small values, the all-reduce table
    {pipelines: ms} with pipeline counts 1.. in order and integer times, fixed instances."""
    e = Encoder()
    instantiate_into(e, templates, num_nodes, global_batch, allreduce, instances)
    return e.data()


def instantiate_into(e, templates, num_nodes, global_batch, allreduce, instances=None):
    e.int_in_range(0, 7, 7)
    e.boolean(False)                 # the short template list
    e.int_in_range(0, 5, len(templates))
    for nodes, stages, ms in templates:
        e.boolean(True)
        e.int_in_range(1, 8, nodes)
        e.int_in_range(-1, 64, stages)
        e.boolean(True)
        e.int_in_range(1, 1000, ms)
    e.boolean(True)
    e.int_in_range(-1, 40, num_nodes)
    e.boolean(True)
    e.int_in_range(-1, 600, global_batch)
    e.int_in_range(0, 40, len(allreduce))
    for i, (pipelines, ms) in enumerate(sorted(allreduce.items())):
        assert pipelines == i + 1 and ms == i, "the encodable table: {k: k - 1}"
        e.boolean(True)
        e.boolean(True)
    e.boolean(instances is not None)
    if instances is not None:
        for count in instances:
            e.int_in_range(-1, 9, count)
        e.boolean(False)             # no extra count
        e.boolean(num_nodes == 0)


def evaluate_job_plan(mode, edits=()):
    """After an Instantiate, an Evaluate of an empty plan in Sailor's format (refused), then
    the Evaluate of the harness's Plan answer as a job_plan: mode 0 as planned, 4 with the
    edits (pipeline, kind, stage, value) of EditPlan, 1 with a model set (refused)."""
    e = Encoder()
    instantiate_into(e, [(2, 4, 510)], 2, 8, {1: 0})
    e.boolean(True)                  # Evaluate
    e.boolean(True)                  # model OPT-350
    e.int_in_range(0, 6, 0)          # no stages
    e.int_in_range(0, 4, 0)          # no replicas
    e.boolean(True)                  # mbs 2
    e.boolean(True)                  # gbs = mbs x dp x 1
    e.int_in_range(1, 64, 1)
    e.boolean(False)                 # the text whole
    e.boolean(False)                 # the in-node bandwidths kept
    e.boolean(True)                  # EvaluateJobPlan
    e.int_in_range(0, 6, mode)
    if mode == 1:
        e.boolean(True)              # model "gpt2-xl"
    if mode == 4:
        e.int_in_range(0, 3, len(edits))
        for pipeline, kind, stage, value in edits:
            e.int_in_range(0, 1, pipeline)  # the harness plan has 2 pipelines
            e.int_in_range(0, 4, kind)
            e.int_in_range(0, 1, stage)
            e.int_in_range({0: -2, 1: -1, 2: -1}[kind], {0: 9, 1: 60, 2: 9}[kind], value)
    return e.data()


def replan_stage_elsewhere():
    e = Encoder()
    e.int_in_range(0, 7, 2)
    e.int_in_range(0, 5, 1)          # one failure
    e.boolean(True)                  # of a node in the plan
    e.int_in_range(0, 3, 0)
    e.int_in_range(0, 3, 0)          # no joins
    e.boolean(False)                 # no tolerance
    e.int_in_range(0, 3, 1)          # one edit
    e.int_in_range(0, 1, 0)          # of pipeline 0 (the harness plan has 2)
    e.int_in_range(0, 4, 0)          # a stage's node_index
    e.int_in_range(0, 1, 0)
    e.int_in_range(-2, 9, 7)
    e.boolean(False)                 # the cluster unchanged
    return e.data()


# SeparatorName's pieces in rpc_structure_fuzzer.cc, in its order.
FINGERPRINT = "ef313a9fc96365a5"  # of examples/profiles/gpt2-xl/rtx4090, the harness's profile
FIELDS_1E308 = f"1:0x1.1ccf385ebc8ap+1023:0x1.2a05f2p+33:{FINGERPRINT}"
FIELDS_1E9 = f"1:0x1.dcd65p+29:0x1.2a05f2p+33:{FINGERPRINT}"
PIECES = ["|", ":", "#", ",", "=", "|mix=", "1", "8", "0x1p+34", "0x1.4p+36", "-", "x", "y",
          "t0", "t1", "3#", "|1#t", "%", "+mb1", FIELDS_1E308, FIELDS_1E9]


# ---- The shapes with properties of their own (answers with impossible values, budgets,
# the f-guarantee's count): their decisions in the fuzzer's order. ----
MAGNITUDE = {0: 0, 1e-300: 1, 1e-12: 2, 1e-3: 3, 1: 4, 1e3: 5, 1e12: 6, 1e15: 7, 1e307: 8,
             1e308: 9}
PRICE = {0: 0, 4e-05: 1, 1e-4: 2, 0.0003: 3, "0.1+0.2": 4, 1.0: 5, 2.4801: 6, 1e6: 7, 5e-05: 8}
INTER_NODE = {1e9: 0, 0: 1, 5e-324: 2, 1e308: 3}


def magnitude(e, value):
    e.boolean(False)
    e.int_in_range(0, 9, MAGNITUDE[value])


def price(e, value):
    e.boolean(False)
    e.int_in_range(0, 8, PRICE[value])


def extreme_profile(layers, fault_tolerance=0, cost_model=0, inter_node=1e9, count=2,
                    all_zero=False):
    """layers: (forward, backward, param, activation, across or None) per layer."""
    e = Encoder()
    e.int_in_range(0, 7, 4)
    e.int_in_range(0, 3, 0)          # gpu_type fz0
    e.int_in_range(1, 4, len(layers))
    e.boolean(all_zero)
    for forward, backward, params, activations, across in layers:
        if not all_zero:
            for value in (forward, backward, params, activations):
                magnitude(e, value)
        e.boolean(across is not None)
        if across is not None:
            magnitude(e, across)
    e.int_in_range(0, 1, cost_model)  # 1f1b, oobleck-sosp23
    e.int_in_range(1, 8, 4)          # microbatches
    e.int_in_range(0, 2, fault_tolerance)
    e.int_in_range(1, 64, 8)         # global batch
    e.int_in_range(0, 3, INTER_NODE[inter_node])
    e.int_in_range(1, 2, 1)          # one node type
    e.int_in_range(1, 2, 1)          # of one GPU
    e.boolean(False)                 # 24e9 bytes
    e.int_in_range(1, 3, count)
    return e.data()


def budget_plan(prices, budget_mode, budget, objective_cost=False):
    e = Encoder()
    e.int_in_range(0, 7, 5)
    e.boolean(objective_cost)
    e.int_in_range(1, 64, 8)         # global batch
    e.int_in_range(1, 2, 1)          # one-node pipelines
    e.int_in_range(1, 3, len(prices))
    for p in prices:
        e.int_in_range(1, 2, 1)      # gpus_per_node
        e.int_in_range(1, 3, 2)      # count
        price(e, p)
    e.int_in_range(0, 3, budget_mode)
    if budget_mode == 0:
        price(e, budget)
    elif budget_mode == 1:
        e.int_in_range(1, 4, budget)  # quarters of every node's price, one ulp below
    else:
        e.int_in_range(0, 1000000, budget)  # budget + 0.5 price steps
    return e.data()


def many_type_replan(types, per_type, fault_tolerance=1, max_nodes=2):
    e = Encoder()
    e.int_in_range(0, 7, 6)
    e.int_in_range(1, 2, fault_tolerance)
    e.boolean(True)                  # global batch 128
    e.int_in_range(1, 2, max_nodes)
    e.int_in_range(2, 8, types)
    e.int_in_range(1, 6, per_type)
    return e.data()                  # (the failed pipeline: the input's end picks 0)


SEEDS = {
    "row1-32-types": templates(32, 1, 1),
    "row1-64-types": templates(64, 1, 1),
    "row1-256-types-plan": plan(256, 1, 0),
    "row2-16-one-node-types": templates(16, 1, 1),
    "row2-16-types-plan": plan(16, 1, 4),
    "row2-heavy-search": templates(4, 8, 6),
    "row5-tiny-relative-speed": templates(2, 1, 2, relative_speed=5e-324),
    "row5-tiny-bandwidth": templates(1, 2, 2, inter_node=5e-324),
    "row7-5000-nodes": plan(1, 5000, 4),
    "row8-stage-on-another-node": replan_stage_elsewhere(),
    "colliding-node-type-names": colliding_templates(),
    # Issue "Hardening round 3": item 1, a profile of 5e-324 ms layers; item 2, one-node
    # types with min_nodes = max_nodes = their number, and 2 types of 2^19 nodes, min = max.
    "hr3-subnormal-layer-times": uploaded_profile(4, 5e-324, 5e-324, 1, 1, 1),
    "hr3-30-one-node-types-min-max": templates(30, 1, 0, runaway=(1,)),
    "hr3-64-one-node-types-min-max": templates(64, 1, 0, runaway=(1,)),
    "hr3-256-one-node-types-min-max": templates(256, 1, 0, runaway=(1,)),
    "hr3-2-types-of-2-19-nodes-min-max": templates(2, 1, 0, runaway=(2,)),
    "answer-layers-1e307": extreme_profile([(1e307, 1, 1e3, 1e3, None)] * 2),
    "answer-allreduce-across-1e308": extreme_profile([(1, 1, 1e3, 1e3, 1e308)] * 2,
                                                     fault_tolerance=1),
    "answer-all-zero-profile": extreme_profile([(0, 0, 0, 0, None)] * 3, all_zero=True),
    "answer-tiny-layer-times": extreme_profile([(1e-300, 1e-300, 1, 1, 1e-12)] * 4,
                                               fault_tolerance=1),
    "answer-sosp23-no-bandwidth-f1": extreme_profile([(1, 1, 1e3, 1e3, None)] * 2,
                                                     fault_tolerance=1, cost_model=1,
                                                     inter_node=0),
    "budget-price-4e-05-budget-4e-05": budget_plan([4e-05, 1.0], 0, 4e-05),
    "budget-price-4e-05-budget-5e-05": budget_plan([4e-05, 1.0], 0, 5e-05),
    "budget-half-step": budget_plan([0.0003, 1.0], 2, 3),
    "budget-ulp-below-half-of-all": budget_plan([0.0003, 2.4801, 1e6], 1, 2,
                                                objective_cost=True),
    "replan-8x4-f1": many_type_replan(8, 4),
    "replan-4x6-f2": many_type_replan(4, 6, fault_tolerance=2),
    # Oobleck's drop-in (issue 26): Instantiate, stage_gpus, inline profiles and the rule.
    "dropin-instantiate": instantiate([(2, 4, 510), (3, 6, 363), (4, 8, 290)], 13, 512,
                                      {k: k - 1 for k in range(1, 7)}),
    "dropin-instantiate-fixed": instantiate([(2, 4, 510), (3, 6, 363)], 0, 512,
                                            {k: k - 1 for k in range(1, 6)}, instances=[2, 1]),
    "dropin-instantiate-uncovered": instantiate([(2, 4, 510), (4, 8, 290)], 7, 64,
                                                {k: k - 1 for k in range(1, 5)}),
    "dropin-templates-equal-halves-inline": templates(
        2, 2, 2, drop_in={"stage_gpus": 2, "inline_files": 1, "allreduce_key": 1}),
    "dropin-plan-oobleck-rule-f1": plan(1, 4, 4, rule=1, fault_tolerance=1,
                                        drop_in={"stage_gpus": 1}),
    "dropin-plan-oobleck-instantiation": plan(1, 6, 3, oobleck_instantiation=True,
                                              drop_in={"inline_files": 1}),
    # Evaluate of a plan of ours (job_plan, issue 27): as planned (the Plan answer's figures
    # bit for bit), a stage's layer end moved (not a partition), a model set with job_plan.
    "evaluate-job-plan-as-planned": evaluate_job_plan(0),
    "evaluate-job-plan-layer-end-moved": evaluate_job_plan(4, [(0, 1, 0, 7)]),
    "evaluate-job-plan-with-model": evaluate_job_plan(1),
}

if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"{len(SEEDS)} seeds in {OUT}")
