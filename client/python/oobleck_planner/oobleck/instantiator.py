"""Drop-in for Oobleck's `oobleck.planning.instantiator`: PipelineInstantiator and
HeterogeneousPipelinesExecutionPlan with Oobleck's signatures and attributes, the
instantiation and batch split answered by the oobleck-planner service (Instantiate), exact
where Oobleck enumerates instance sets and solves a MINLP per set.

  PipelineInstantiator().get_best_execution_plan(pipeline_templates, allreduce_across_nodes,
                                                 num_nodes, global_num_microbatch)
  PipelineInstantiator().get_new_execution_plan(new_num_instances_set,
                                                allreduce_across_nodes, global_num_microbatch)

`allreduce_across_nodes` is Oobleck's per-layer list of {pipelines: ms}; as in Oobleck only
layer 0's entry enters the plan's time. A plan's `instantiate(...)` builds the pipelines
with `OobleckPipeline` (a module-level name here, as in Oobleck, so tests can patch it; it
is Oobleck's `oobleck.execution.pipeline.OobleckPipeline` unless patched) and the
data-parallel process groups with deepspeed.comm.new_group.
"""

from oobleck_planner.oobleck import _service
from oobleck_planner.oobleck.pipeline_template import PipelineTemplate

# Oobleck's pipeline class, resolved on first use (importing it needs torch); tests patch
# "oobleck.planning.instantiator.OobleckPipeline", so the name must exist here.
OobleckPipeline = None


def _pipeline_class():
    if OobleckPipeline is not None:
        return OobleckPipeline
    from oobleck.execution.pipeline import OobleckPipeline as pipeline_class
    return pipeline_class


def _dist():
    from deepspeed import comm
    return comm


class HeterogeneousPipelinesExecutionPlan:
    """How many pipelines of each template, and the micro-batches of each (Oobleck's
    execution plan). `iteration_time` is the service's figure for plans it made, Oobleck's
    formula (slowest template's _iteration_time x b, plus allreduce_across_nodes[0] at the
    pipeline count) for plans built by hand."""

    def __init__(self, pipeline_templates, num_instances_set, num_microbatches_set,
                 allreduce_across_nodes, iteration_time_ms=None):
        pipeline_templates = [t for t in pipeline_templates
                              if t in num_instances_set and t in num_microbatches_set]
        pipeline_templates.sort(key=lambda template: template._num_nodes)
        self.pipeline_templates = pipeline_templates
        self.num_instances_set = num_instances_set
        self.num_microbatches_set = num_microbatches_set
        self.allreduce_across_nodes = allreduce_across_nodes
        self.total_num_pipelines = sum(num_instances_set.values())
        self.num_pipelines = self.total_num_pipelines  # Oobleck's older name
        self.total_num_microbatches = sum(
            num_instances_set[t] * num_microbatches_set[t] for t in pipeline_templates)
        self._iteration_time_ms = iteration_time_ms

    def __repr__(self):
        lines = [f"{self.num_instances_set[t]} x {t} pipelines "
                 f"(b: {self.num_microbatches_set[t]})" for t in self.pipeline_templates]
        return "\n".join(lines + [f"B: {self.total_num_microbatches}"])

    @property
    def iteration_time(self):
        if self._iteration_time_ms is not None:
            return self._iteration_time_ms
        slowest = max(t._iteration_time * b for t, b in self.num_microbatches_set.items())
        return slowest + self.allreduce_across_nodes[0][self.total_num_pipelines]

    def all_pipeline_ranks(self):
        """Each pipeline's ranks when ranks are handed out in template order from 0."""
        results, used = [], 0
        for template in self.pipeline_templates:
            size = template._num_nodes * template._num_gpus_per_node
            for _ in range(self.num_instances_set[template]):
                results.append(list(range(used, used + size)))
                used += size
        return results

    @property
    def my_pipeline_index(self):
        my_rank = _dist().get_rank()
        for index, ranks in enumerate(self.all_pipeline_ranks()):
            if my_rank in ranks:
                return index
        raise RuntimeError(f"rank {my_rank} is not in any pipeline of this plan")

    @property
    def num_microbatches(self):
        """Micro-batches of every pipeline, in pipeline order."""
        results = []
        for template in self.pipeline_templates:
            results.extend([self.num_microbatches_set[template]] *
                           self.num_instances_set[template])
        return results

    @property
    def num_microbatches_of_mine(self):
        return self.num_microbatches[self.my_pipeline_index]

    def instantiate(self, model, dataloader, training_args, num_gpus_per_node=None,
                    ranks=None, step=0):
        """Builds every pipeline (OobleckPipeline(pipeline_id, pipeline_template, ranks,
        dataloader, step=..., training_args=...)) on `ranks` (one list per pipeline, in
        pipeline order; default all_pipeline_ranks()) and one process group per layer and
        FSDP index over the ranks holding that shard. Returns (my pipeline, all pipelines,
        {layer index: {fsdp index: group}})."""
        ranks_list = self._ranks_list(ranks)
        pipeline_class = _pipeline_class()
        pipelines, my_pipeline = [], None
        index = 0
        for template in self.pipeline_templates:
            for _ in range(self.num_instances_set[template]):
                pipeline = pipeline_class(pipeline_id=index, pipeline_template=template,
                                          ranks=ranks_list[index], dataloader=dataloader,
                                          step=step, training_args=training_args)
                if getattr(pipeline, "my_pipeline", False) and my_pipeline is None:
                    my_pipeline = pipeline
                pipelines.append(pipeline)
                index += 1
        return my_pipeline, pipelines, self._data_parallel_groups(ranks_list)

    def _ranks_list(self, ranks):
        expected = [t._num_nodes * t._num_gpus_per_node for t in self.pipeline_templates
                    for _ in range(self.num_instances_set[t])]
        ranks_list = self.all_pipeline_ranks() if ranks is None else [list(r) for r in ranks]
        if [len(r) for r in ranks_list] != expected:
            raise ValueError(f"ranks: pipelines of {[len(r) for r in ranks_list]} ranks for a "
                             f"plan whose pipelines (in template order) need {expected}")
        return ranks_list

    def _data_parallel_groups(self, ranks_list):
        grid = {}  # layer -> fsdp index -> ranks holding that shard
        index = 0
        for template in self.pipeline_templates:
            for _ in range(self.num_instances_set[template]):
                for layer, layer_ranks in template.get_rank_grid(ranks_list[index]).items():
                    for fsdp_index, rank in enumerate(layer_ranks):
                        grid.setdefault(layer, {}).setdefault(fsdp_index, []).append(rank)
                index += 1
        dist = _dist()
        return {layer: {fsdp: dist.new_group(ranks) for fsdp, ranks in shards.items()}
                for layer, shards in grid.items()}


def _check_templates(templates, what):
    for i, template in enumerate(templates):
        if not isinstance(template, PipelineTemplate):
            raise TypeError(f"{what}[{i}]: {template!r} is not a PipelineTemplate")
    if not templates:
        raise ValueError(f"{what}: no pipeline templates")
    first = templates[0]._profile.content_key()
    for i, template in enumerate(templates):
        if template._profile.content_key() != first:
            raise ValueError(f"{what}[{i}]: a template from another profile than "
                             f"{what}[0] (its layers differ)")


def _layer0_allreduce(allreduce_across_nodes, num_layers):
    if not isinstance(allreduce_across_nodes, (list, tuple)) or not allreduce_across_nodes:
        raise TypeError("allreduce_across_nodes: expected Oobleck's per-layer list of "
                        "{pipelines: ms}")
    if len(allreduce_across_nodes) != num_layers:
        raise ValueError(f"allreduce_across_nodes: {len(allreduce_across_nodes)} layers, the "
                         f"templates' profile has {num_layers}")
    first = allreduce_across_nodes[0]
    if not isinstance(first, dict):
        raise TypeError(f"allreduce_across_nodes[0]: expected a dict, got {first!r}")
    try:
        return {int(k): float(v) for k, v in first.items()}
    except (TypeError, ValueError):
        raise ValueError(f"allreduce_across_nodes[0]: keys must be pipeline counts and values "
                         f"milliseconds: {first!r}") from None


def _shape(template):
    from oobleck_planner.v1 import planner_pb2
    return planner_pb2.TemplateShape(num_nodes=template._num_nodes,
                                     num_stages=len(template._stages),
                                     iteration_time_ms=template._iteration_time)


def _plan(templates, allreduce_across_nodes, num_nodes, global_num_microbatch, instances):
    from oobleck_planner.v1 import planner_pb2
    allreduce = _layer0_allreduce(allreduce_across_nodes, templates[0]._num_layers)
    if isinstance(global_num_microbatch, bool) or not isinstance(global_num_microbatch, int):
        raise TypeError(f"global_num_microbatch: expected an int, got {global_num_microbatch!r}")
    request = planner_pb2.InstantiateRequest(
        templates=[_shape(t) for t in templates], num_nodes=num_nodes,
        global_batch=global_num_microbatch, allreduce_across_pipelines_ms=allreduce,
        instances=instances)
    response = _service.call("Instantiate", request)
    if len(response.instances) != len(templates) or len(response.microbatches) != len(
            templates):
        raise _service.PlannerError(f"oobleck-planner Instantiate: answered for "
                                    f"{len(response.instances)} templates, asked for "
                                    f"{len(templates)}")
    num_instances_set, num_microbatches_set = {}, {}
    for template, count, microbatches in zip(templates, response.instances,
                                             response.microbatches):
        if count > 0:
            num_instances_set[template] = count
            num_microbatches_set[template] = microbatches
    return HeterogeneousPipelinesExecutionPlan(list(templates), num_instances_set,
                                               num_microbatches_set, allreduce_across_nodes,
                                               response.iteration_time_ms)


class PipelineInstantiator:
    def get_best_execution_plan(self, pipeline_templates, allreduce_across_nodes, num_nodes,
                                global_num_microbatch):
        """Oobleck's section 4.2: the instance counts that use every one of `num_nodes`
        nodes and the batch split (one micro-batch count per template) of least iteration
        time, solved exactly by the service."""
        templates = list(pipeline_templates)
        _check_templates(templates, "pipeline_templates")
        if isinstance(num_nodes, bool) or not isinstance(num_nodes, int):
            raise TypeError(f"num_nodes: expected an int, got {num_nodes!r}")
        return _plan(templates, allreduce_across_nodes, num_nodes, global_num_microbatch, [])

    def get_new_execution_plan(self, new_num_instances_set, allreduce_across_nodes,
                               global_num_microbatch):
        """The batch split over pipelines the caller fixed (Oobleck's engine chose them after
        failures): {template: instances} -> a plan with those instances."""
        if not isinstance(new_num_instances_set, dict) or not new_num_instances_set:
            raise TypeError("new_num_instances_set: expected a non-empty dict of "
                            "{PipelineTemplate: instances}")
        templates = list(new_num_instances_set)
        _check_templates(templates, "new_num_instances_set")
        instances = []
        for template in templates:
            count = new_num_instances_set[template]
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"new_num_instances_set: {count!r} instances of {template} "
                                 f"(must be an int >= 0)")
            instances.append(count)
        return _plan(templates, allreduce_across_nodes, 0, global_num_microbatch, instances)


__all__ = ["HeterogeneousPipelinesExecutionPlan", "OobleckPipeline", "PipelineInstantiator"]
