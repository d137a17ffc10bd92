"""Drop-in for Oobleck's `oobleck.csrc.planning.pipeline_template` (a pybind11 module in
Oobleck): the same names, signatures and attributes, with the template search answered by
the oobleck-planner service (PlanTemplates, the profile sent inline) instead of Oobleck's
C++ divide and conquer.

  LayerExecutionResult(layer_index, forward, backward, allreduce_in_node,
                       allreduce_across_nodes, mem_required)
  LayerExecutionResults(list_of_layer_results)        .get() .at(i) .size
  StageExecutionResult(profile, (begin, end), num_gpus)
  PipelineTemplate(stages, iteration_time, num_layers, num_nodes, num_gpus_per_node)
  PipelineTemplateGenerator().create_pipeline_templates(profile, (min, max), gpus_per_node)
      or (model_name, model_tag, microbatch_size, (min, max), gpus_per_node)
  get_profile_results(model_name, model_tag, microbatch_size)

Stage figures are Oobleck's (execution_result.h); which all-reduce key a stage of g GPUs
reads (g - 1 on sosp23-artifact, g on develop) and which stage sizes the service may use
follow OOBLECK_PLANNER_OOBLECK_BRANCH (see oobleck_planner.oobleck).
"""

import hashlib
import json
import os
import struct

from oobleck_planner.oobleck import _service

PROFILE_DIR_ENV = "OOBLECK_PLANNER_PROFILE_DIR"
DEFAULT_PROFILE_DIR = "/tmp/oobleck/profiles"  # where Oobleck's profiler writes
# The one node type and GPU type of the cluster the drop-in describes to the service.
_NODE_TYPE = "oobleck-node"
_GPU_TYPE = "oobleck-gpu"


def _number(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what}: expected a number, got {value!r}")
    return float(value)


def _integer(value, what):
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise TypeError(f"{what}: expected an int, got {value!r}")
    return value


def _time_dict(value, what):
    if not isinstance(value, dict):
        raise TypeError(f"{what}: expected a dict[int, float], got {type(value).__name__}")
    return {_integer(k, f"{what} key {k!r}"): _number(v, f"{what}[{k!r}]")
            for k, v in value.items()}


class LayerExecutionResult:
    """One layer's profile, as Oobleck's profiler measures it (times in ms)."""

    def __init__(self, layer_index, forward, backward, allreduce_in_node,
                 allreduce_across_nodes, mem_required):
        self._index = _integer(layer_index, "layer_index")
        self._forward = _number(forward, "forward")
        self._backward = _number(backward, "backward")
        self._allreduce_in_node = _time_dict(allreduce_in_node, "allreduce_in_node")
        self._allreduce_across_nodes = _time_dict(allreduce_across_nodes,
                                                  "allreduce_across_nodes")
        if not isinstance(mem_required, (tuple, list)) or len(mem_required) != 2:
            raise TypeError(f"mem_required: expected (param_bytes, activation_bytes), got "
                            f"{mem_required!r}")
        self._mem_required = (_integer(mem_required[0], "mem_required[0]"),
                              _integer(mem_required[1], "mem_required[1]"))

    # The names Oobleck's code reads, across its versions.
    layer_index = property(lambda self: self._index)
    _layer_index = layer_index
    forward = property(lambda self: self._forward)
    backward = property(lambda self: self._backward)
    allreduce_in_node = property(lambda self: dict(self._allreduce_in_node))
    allreduce_across_nodes = property(lambda self: dict(self._allreduce_across_nodes))
    allreduce_cross_nodes = allreduce_across_nodes
    _allreduce_cross_nodes = property(lambda self: self._allreduce_across_nodes)
    mem_required = property(lambda self: self._mem_required)

    def __repr__(self):
        return (f"LayerExecutionResult(layer_index={self._index}, forward={self._forward}, "
                f"backward={self._backward}, mem_required={self._mem_required})")


class LayerExecutionResults:
    """A model's layer profiles in order (Oobleck's shared LayerExecutionResults)."""

    def __init__(self, results):
        results = list(results)
        for i, result in enumerate(results):
            if not isinstance(result, LayerExecutionResult):
                raise TypeError(f"LayerExecutionResults: element {i} is a "
                                f"{type(result).__name__}, not a LayerExecutionResult")
        self._data = results
        self._content_key = None
        self._fingerprints = {}  # (service address, branch) -> the service's fingerprint
        self._microbatch_size = 0

    def get(self):
        return list(self._data)

    def at(self, index):
        if not isinstance(index, int) or not -len(self._data) <= index < len(self._data):
            raise IndexError(f"LayerExecutionResults.at: index {index!r} out of range "
                             f"({len(self._data)} layers)")
        return self._data[index]

    @property
    def size(self):
        return len(self._data)

    def __len__(self):
        return len(self._data)

    def __iter__(self):
        return iter(self._data)

    def content_key(self):
        """A hash of the layer data: two profiles with the same layers are one profile."""
        if self._content_key is None:
            digest = hashlib.sha256()
            for layer in self._data:
                digest.update(struct.pack("<idd", layer._index, layer._forward,
                                          layer._backward))
                digest.update(repr(sorted(layer._allreduce_in_node.items())).encode())
                digest.update(repr(sorted(layer._allreduce_across_nodes.items())).encode())
                digest.update(repr(layer._mem_required).encode())
            self._content_key = digest.hexdigest()
        return self._content_key

    def __repr__(self):
        return f"LayerExecutionResults({len(self._data)} layers)"


def _as_profile(value, what="layer_execution_results"):
    if isinstance(value, LayerExecutionResults):
        return value
    if isinstance(value, (list, tuple)):
        return LayerExecutionResults(value)
    raise TypeError(f"{what}: expected LayerExecutionResults, got {type(value).__name__}")


class StageExecutionResult:
    """A stage: layers [begin, end) on num_gpus GPUs of one node, with Oobleck's figures
    (execution_result.h): forward = sum(f / g) plus, when g > 1, the in-node all-reduce of
    every layer under the branch's key; memory = sum(6 * params + activations)."""

    def __init__(self, profile, layer_indices, num_gpus, branch=None):
        profile = _as_profile(profile, "StageExecutionResult profile")
        if not isinstance(layer_indices, (tuple, list)) or len(layer_indices) != 2:
            raise TypeError(f"layer_indices: expected (begin, end), got {layer_indices!r}")
        begin = _integer(layer_indices[0], "layer_indices[0]")
        end = _integer(layer_indices[1], "layer_indices[1]")
        if not 0 <= begin < end <= profile.size:
            raise ValueError(f"layer_indices: ({begin}, {end}) is not a non-empty range of "
                             f"the profile's {profile.size} layers")
        num_gpus = _integer(num_gpus, "num_gpus")
        if num_gpus < 1:
            raise ValueError(f"num_gpus: {num_gpus} (must be >= 1)")
        rule = _service.branch(branch)
        self._profile = profile
        self._num_gpus = num_gpus
        self._layer_indices = []
        self._forward = 0.0
        self._backward = 0.0
        self._allreduce_across_nodes = {}
        self._mem_required = 0
        for i in range(begin, end):
            layer = profile.at(i)
            self._layer_indices.append(layer._index)
            allreduce = 0.0
            if num_gpus > 1:
                key = rule.allreduce_key(num_gpus)
                if key not in layer._allreduce_in_node:
                    raise ValueError(
                        f"allreduce_in_node of layer {i}: no entry for key {key} (a stage of "
                        f"{num_gpus} GPUs reads key {key} on Oobleck's {rule.name} branch; "
                        f"the keys are {sorted(layer._allreduce_in_node)})")
                allreduce = layer._allreduce_in_node[key]
            self._forward += layer._forward / num_gpus + allreduce
            self._backward += layer._backward / num_gpus + allreduce
            for nodes, ms in layer._allreduce_across_nodes.items():
                self._allreduce_across_nodes[nodes] = (
                    self._allreduce_across_nodes.get(nodes, 0.0) + ms)
            self._mem_required += layer._mem_required[0] * 6 + layer._mem_required[1]

    @property
    def _num_layers(self):
        return len(self._layer_indices)

    _size = _num_layers
    _allreduce_cross_nodes = property(lambda self: self._allreduce_across_nodes)

    def num_layers(self):
        return len(self._layer_indices)

    def __repr__(self):
        return (f"StageExecutionResult[{self._layer_indices[0]}:{self._layer_indices[-1]}] "
                f"with {self._num_gpus} devices")


class PipelineTemplate:
    """A pipeline template. Hashed and compared by identity, as Oobleck's pybind11 class
    (the instantiator's dicts are keyed by the template objects themselves)."""

    def __init__(self, stages, iteration_time, num_layers, num_nodes, num_gpus_per_node):
        stages = list(stages)
        if not stages or not all(isinstance(s, StageExecutionResult) for s in stages):
            raise TypeError("stages: expected a non-empty list of StageExecutionResult")
        self._stages = stages
        self._iteration_time = _number(iteration_time, "iteration_time")
        self._num_layers = _integer(num_layers, "num_layers")
        self._num_nodes = _integer(num_nodes, "num_nodes")
        self._num_gpus_per_node = _integer(num_gpus_per_node, "num_gpus_per_node")
        gpus = sum(stage._num_gpus for stage in stages)
        if gpus != self._num_nodes * self._num_gpus_per_node:
            raise ValueError(f"stages: use {gpus} GPUs, not num_nodes x num_gpus_per_node = "
                             f"{self._num_nodes} x {self._num_gpus_per_node}")
        layers = sum(stage._num_layers for stage in stages)
        if layers != self._num_layers:
            raise ValueError(f"stages: cover {layers} layers, not num_layers = "
                             f"{self._num_layers}")
        profiles = {stage._profile.content_key() for stage in stages}
        if len(profiles) != 1:
            raise ValueError("stages: come from different profiles")
        self._profile = stages[0]._profile

    def get_stages(self):
        return list(self._stages)

    def get_iteration_time(self):
        return self._iteration_time

    def get_num_nodes(self):
        return self._num_nodes

    def get_num_gpus_per_node(self):
        return self._num_gpus_per_node

    def get_rank_grid(self, ranks):
        """layer index -> the ranks holding that layer, num_gpus_per_node of them: a stage
        of g GPUs repeats each of its ranks num_gpus_per_node / g times (Oobleck's
        get_ranks_per_layer), so [[0, 1, 2, 3], [4, 4, 5, 5]] for stages of 4 and 2 GPUs."""
        ranks = list(ranks)
        total = self._num_nodes * self._num_gpus_per_node
        if len(ranks) != total:
            raise ValueError(f"get_rank_grid: {len(ranks)} ranks for a template of {total} "
                             f"GPUs ({self._num_nodes} nodes x {self._num_gpus_per_node})")
        grid = {}
        position = 0
        for index, stage in enumerate(self._stages):
            if self._num_gpus_per_node % stage._num_gpus:
                raise ValueError(f"get_rank_grid: stage {index} has {stage._num_gpus} GPUs, "
                                 f"which do not divide the node's {self._num_gpus_per_node}")
            repeat = self._num_gpus_per_node // stage._num_gpus
            row = [ranks[position + i] for i in range(stage._num_gpus) for _ in range(repeat)]
            position += stage._num_gpus
            for layer_index in stage._layer_indices:
                grid[layer_index] = list(row)
        return grid

    def __repr__(self):
        return (f"PipelineTemplate({len(self._stages)} stages, {self._num_nodes} nodes x "
                f"{self._num_gpus_per_node} GPUs, iteration_time={self._iteration_time:.3f})")


def _profile_path(model_name, model_tag):
    root = os.environ.get(PROFILE_DIR_ENV) or DEFAULT_PROFILE_DIR
    return os.path.join(root, f"{model_name}-{model_tag}")


def _load_json(path, what):
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what}: {path} does not exist (Oobleck's profiler writes it)")
    with open(path) as f:
        try:
            return json.load(f)
        except ValueError as error:
            raise ValueError(f"{what}: {path} is not JSON: {error}") from None


def _keyed_times(entry, path, index):
    if not isinstance(entry, dict):
        raise ValueError(f"{path}: entry {index} is not an object of GPU/node count -> ms")
    try:
        return {int(k): float(v) for k, v in entry.items()}
    except (TypeError, ValueError):
        raise ValueError(f"{path}: entry {index} has a key that is not an integer or a "
                         f"value that is not a number: {entry!r}") from None


def get_profile_results(model_name, model_tag, microbatch_size):
    """The profile Oobleck's profiler wrote to /tmp/oobleck/profiles/<model>-<tag>/
    (mb<m>.json, allreduce_in_node.json, allreduce_across_nodes.json), checked for Oobleck's
    shape; FileNotFoundError / ValueError naming the file and the entry otherwise."""
    directory = _profile_path(model_name, model_tag)
    microbatch_size = _integer(microbatch_size, "microbatch_size")
    mb_path = os.path.join(directory, f"mb{microbatch_size}.json")
    layers = _load_json(mb_path, "microbatch_size")
    in_path = os.path.join(directory, "allreduce_in_node.json")
    in_node = _load_json(in_path, "allreduce_in_node")
    across_path = os.path.join(directory, "allreduce_across_nodes.json")
    across = _load_json(across_path, "allreduce_across_nodes")
    for path, value in ((mb_path, layers), (in_path, in_node), (across_path, across)):
        if not isinstance(value, list) or not value:
            raise ValueError(f"{path}: expected a non-empty list with one entry per layer")
    if not len(layers) == len(in_node) == len(across):
        raise ValueError(f"{directory}: {len(layers)} layers in mb{microbatch_size}.json, "
                         f"{len(in_node)} in allreduce_in_node.json and {len(across)} in "
                         f"allreduce_across_nodes.json")
    results = []
    for i, layer in enumerate(layers):
        if not isinstance(layer, dict) or not {"forward", "backward",
                                               "mem_required"} <= set(layer):
            raise ValueError(f"{mb_path}: entry {i} needs forward, backward and mem_required")
        try:
            results.append(LayerExecutionResult(
                i, layer["forward"], layer["backward"], _keyed_times(in_node[i], in_path, i),
                _keyed_times(across[i], across_path, i), tuple(layer["mem_required"])))
        except TypeError as error:
            raise ValueError(f"{mb_path}: entry {i}: {error}") from None
    profile = LayerExecutionResults(results)
    profile._microbatch_size = microbatch_size
    return profile


def _layers_message(profile):
    from oobleck_planner.v1 import planner_pb2
    layers = planner_pb2.ProfileLayers()
    for layer in profile:
        layers.layers.add(forward_ms=layer._forward, backward_ms=layer._backward,
                          param_bytes=layer._mem_required[0],
                          activation_bytes=layer._mem_required[1],
                          allreduce_in_node_ms=layer._allreduce_in_node,
                          allreduce_across_nodes_ms=layer._allreduce_across_nodes)
    return layers


def inline_profile(profile, rule, by_fingerprint=True):
    """The InlineProfile that sends `profile`: its fingerprint alone when this service
    already answered with one for it, else its layers."""
    from oobleck_planner.v1 import planner_pb2
    key = planner_pb2.ALLREDUCE_KEY_GPUS_MINUS_ONE if rule.allreduce_key_minus_one \
        else planner_pb2.ALLREDUCE_KEY_GPUS
    message = planner_pb2.InlineProfile(gpu_type=_GPU_TYPE, allreduce_key=key)
    fingerprint = profile._fingerprints.get((_service.target(), rule.name))
    if by_fingerprint and fingerprint:
        message.fingerprint = fingerprint
    else:
        message.layers.CopyFrom(_layers_message(profile))
    return message


def call_with_profile(method_name, request, profiles_field, profile, rule):
    """Calls the service with `profile` inline (by fingerprint when it has one), sending
    the layers again when the service no longer holds the fingerprint."""
    for by_fingerprint in (True, False):
        field = getattr(request, profiles_field)
        del field[:]
        sent = inline_profile(profile, rule, by_fingerprint)
        field.append(sent)
        try:
            response = _service.call(method_name, request)
        except _service.NotFound:
            if by_fingerprint and sent.HasField("fingerprint"):
                profile._fingerprints.pop((_service.target(), rule.name), None)
                continue
            raise
        held = list(getattr(response, "inline_profiles", []))
        if held and held[0].fingerprint:
            profile._fingerprints[(_service.target(), rule.name)] = held[0].fingerprint
        return response
    raise AssertionError("unreachable")


class PipelineTemplateGenerator:
    """Oobleck's PipelineTemplateGenerator; the optional keywords choose the cost model
    (default OOBLECK_PLANNER_COST_MODEL or "oobleck-sosp23"), Oobleck's branch semantics
    (default OOBLECK_PLANNER_OOBLECK_BRANCH or "sosp23-artifact") and, for "1f1b", the
    micro-batches and the hardware figures that model needs."""

    def __init__(self, cost_model=None, branch=None, microbatches=0,
                 gpu_memory_bytes=80e9, intra_node_bytes_per_s=100e9,
                 inter_node_bytes_per_s=12.5e9):
        self._cost_model = cost_model
        self._branch = branch
        self._microbatches = microbatches
        self._gpu_memory_bytes = gpu_memory_bytes
        self._intra_node_bytes_per_s = intra_node_bytes_per_s
        self._inter_node_bytes_per_s = inter_node_bytes_per_s

    def create_pipeline_templates(self, *args, **kwargs):
        """(layer_execution_results, (min_nodes, max_nodes), num_gpus_per_node), or Oobleck's
        older (model_name, model_tag, microbatch_size, (min_nodes, max_nodes),
        num_gpus_per_node) that reads the profile folder: the optimal template of every
        node count in the range that has one, in order of node count."""
        profile, num_nodes, num_gpus_per_node = _template_arguments(args, kwargs)
        if not isinstance(num_nodes, (tuple, list)) or len(num_nodes) != 2:
            raise TypeError(f"num_nodes: expected (min_nodes, max_nodes), got {num_nodes!r}")
        low = _integer(num_nodes[0], "num_nodes[0]")
        high = _integer(num_nodes[1], "num_nodes[1]")
        num_gpus_per_node = _integer(num_gpus_per_node, "num_gpus_per_node")
        if low < 1:
            raise ValueError(f"num_nodes: minimum {low} (must be >= 1)")
        if num_gpus_per_node < 1:
            raise ValueError(f"num_gpus_per_node: {num_gpus_per_node} (must be >= 1)")
        if low > high:
            return []
        rule = _service.branch(self._branch)
        response = call_with_profile("PlanTemplates",
                                     self._request(profile, low, high, num_gpus_per_node,
                                                   rule), "profiles", profile, rule)
        templates = []
        for result in response.results:
            if not result.feasible:
                continue
            shape = result.template
            stages = [StageExecutionResult(profile, (s.layer_begin, s.layer_end), s.gpus,
                                           rule.name) for s in shape.stages]
            templates.append(PipelineTemplate(stages, shape.iteration_time_ms, profile.size,
                                              shape.num_nodes, num_gpus_per_node))
        templates.sort(key=lambda t: t._num_nodes)
        return templates

    def _request(self, profile, low, high, num_gpus_per_node, rule):
        from oobleck_planner.v1 import planner_pb2
        node_type = planner_pb2.NodeType(
            name=_NODE_TYPE, gpu_type=_GPU_TYPE, gpus_per_node=num_gpus_per_node,
            gpu_memory_bytes=self._gpu_memory_bytes,
            intra_node_bytes_per_s=self._intra_node_bytes_per_s, count=high)
        return planner_pb2.PlanTemplatesRequest(
            microbatch_size=profile._microbatch_size or 1,
            cluster=planner_pb2.Cluster(node_types=[node_type],
                                        inter_node_bytes_per_s=self._inter_node_bytes_per_s),
            cost_model=_service.cost_model(self._cost_model),
            microbatches=self._microbatches, min_nodes=low, max_nodes=high,
            stage_gpus=planner_pb2.StageGpus.Value(rule.stage_gpus))


def _template_arguments(args, kwargs):
    if (args and isinstance(args[0], str)) or "model_name" in kwargs:
        names = ("model_name", "model_tag", "microbatch_size", "num_nodes", "num_gpus_per_node")
    else:
        names = ("layer_execution_results", "num_nodes", "num_gpus_per_node")
    if len(args) > len(names):
        raise TypeError(f"create_pipeline_templates: takes {len(names)} arguments "
                        f"({', '.join(names)}), got {len(args)}")
    values = dict(zip(names, args))
    for name, value in kwargs.items():
        if name not in names or name in values:
            raise TypeError(f"create_pipeline_templates: unexpected or repeated argument "
                            f"{name!r}")
        values[name] = value
    missing = [name for name in names if name not in values]
    if missing:
        raise TypeError(f"create_pipeline_templates: missing {', '.join(missing)}")
    if "model_name" in values:
        profile = get_profile_results(values["model_name"], values["model_tag"],
                                      values["microbatch_size"])
    else:
        profile = _as_profile(values["layer_execution_results"])
    if profile.size == 0:
        raise ValueError("layer_execution_results: the profile has no layers")
    return profile, values["num_nodes"], values["num_gpus_per_node"]


__all__ = ["LayerExecutionResult", "LayerExecutionResults", "PipelineTemplate",
           "PipelineTemplateGenerator", "StageExecutionResult", "get_profile_results"]
