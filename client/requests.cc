#include "client/requests.h"

#include <cmath>
#include <filesystem>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/file_reader.h"
#include "core/shown_value.h"
#include "core/status_macros.h"
#include "google/protobuf/util/json_util.h"

namespace oobleck::client {
absl::StatusOr<std::string> ReadTextFile(const std::filesystem::path& path) {
  absl::StatusOr<std::string> text = ReadRegularFile(path);
  // The CLI's words for a file it cannot open (docs/ERRORS.md).
  if (text.status().code() == absl::StatusCode::kNotFound) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  }
  return text;
}

namespace {

// Micro-batch size of "mb<m>.json", or 0 if the name has another form.
int MicrobatchSizeOfFile(const std::string& filename) {
  absl::string_view name = filename;
  int size = 0;
  if (absl::ConsumePrefix(&name, "mb") && absl::ConsumeSuffix(&name, ".json") &&
      absl::SimpleAtoi(name, &size) && size > 0) {
    return size;
  }
  return 0;
}

}  // namespace

absl::StatusOr<NodeRange> ParseNodeRange(const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, '-');
  NodeRange range;
  bool parsed = false;
  if (parts.size() == 1) {
    parsed = absl::SimpleAtoi(parts[0], &range.min_nodes);
    range.max_nodes = range.min_nodes;
  } else if (parts.size() == 2) {
    parsed = absl::SimpleAtoi(parts[0], &range.min_nodes) &&
             absl::SimpleAtoi(parts[1], &range.max_nodes);
  }
  if (!parsed || range.min_nodes < 1 || range.max_nodes < range.min_nodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nodes must be A-B with 1 <= A <= B, or N >= 1 (got \"", text, "\")"));
  }
  return range;
}

absl::StatusOr<pb::MissingAllreduce> ParseMissingAllreduce(const std::string& text) {
  if (text == "skip") return pb::MISSING_ALLREDUCE_SKIP_SIZE;
  if (text == "ring") return pb::MISSING_ALLREDUCE_RING;
  return absl::InvalidArgumentError(
      absl::StrCat("--missing-allreduce must be skip or ring (got \"", text, "\")"));
}

absl::StatusOr<pb::StageGpus> ParseStageGpus(const std::string& text) {
  if (text == "any") return pb::STAGE_GPUS_ANY;
  if (text == "divisors") return pb::STAGE_GPUS_DIVISORS;
  if (text == "equal-halves") return pb::STAGE_GPUS_EQUAL_HALVES;
  return absl::InvalidArgumentError(
      absl::StrCat("--stage-gpus must be any, divisors or equal-halves (got \"", text, "\")"));
}

absl::StatusOr<pb::AllreduceKey> ParseAllreduceKey(const std::string& text) {
  if (text == "gpus") return pb::ALLREDUCE_KEY_GPUS;
  if (text == "gpus-minus-one") return pb::ALLREDUCE_KEY_GPUS_MINUS_ONE;
  return absl::InvalidArgumentError(
      absl::StrCat("--allreduce-key must be gpus or gpus-minus-one (got \"", text, "\")"));
}

absl::Status ParseAnswerJson(const std::string& json, const std::string& source,
                             google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // answers of newer servers carry more fields
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, message, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, " is not the JSON of a ",
                                                   message->GetDescriptor()->name(), ": ",
                                                   parsed.message().as_string()));
  }
  return absl::OkStatus();
}

absl::StatusOr<ProfileDirFiles> ReadProfileDir(const std::string& dir, int microbatch_size) {
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    return absl::NotFoundError(absl::StrCat("profile directory ", dir, " does not exist"));
  }
  ProfileDirFiles out;
  out.microbatch_size = microbatch_size;
  if (microbatch_size <= 0) {
    std::map<int, std::string> found;  // size -> file name
    for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
      const std::string name = entry.path().filename().string();
      if (const int size = MicrobatchSizeOfFile(name); size > 0) found[size] = name;
    }
    if (found.size() != 1) {
      std::vector<std::string> names;
      for (const auto& [size, name] : found) names.push_back(name);
      return absl::InvalidArgumentError(absl::StrCat(
          "profile directory ", dir, " must hold exactly one mb<m>.json when no micro-batch size ",
          "is given (found ", found.empty() ? "none" : absl::StrJoin(names, ", "),
          "); pass --microbatch-size"));
    }
    out.microbatch_size = found.begin()->first;
  }
  const std::filesystem::path base(dir);
  ASSIGN_OR_RETURN(std::string mb,
                   ReadTextFile(base / absl::StrCat("mb", out.microbatch_size, ".json")));
  ASSIGN_OR_RETURN(std::string in_node, ReadTextFile(base / "allreduce_in_node.json"));
  ASSIGN_OR_RETURN(std::string across, ReadTextFile(base / "allreduce_across_nodes.json"));
  out.files.set_mb_json(std::move(mb));
  out.files.set_allreduce_in_node_json(std::move(in_node));
  out.files.set_allreduce_across_nodes_json(std::move(across));
  return out;
}

pb::PlanTemplatesRequest BuildHomogeneousRequest(const HomogeneousOptions& options) {
  pb::PlanTemplatesRequest request;
  request.set_model(options.job.model);
  request.set_microbatch_size(options.job.microbatch_size);
  request.set_cost_model(options.job.cost_model);
  request.set_microbatches(options.job.microbatches);
  request.set_optimizer_state_multiplier(options.job.optimizer_state_multiplier);
  request.set_min_nodes(options.nodes.min_nodes);
  request.set_max_nodes(options.nodes.max_nodes);
  request.set_missing_allreduce_in_node(options.missing_allreduce);
  pb::Cluster* cluster = request.mutable_cluster();
  cluster->set_inter_node_bytes_per_s(options.job.inter_node_bytes_per_s);
  pb::NodeType* type = cluster->add_node_types();
  type->set_name(options.job.gpu_type.empty() ? "node" : options.job.gpu_type);
  type->set_gpu_type(options.job.gpu_type);
  type->set_gpus_per_node(options.job.gpus_per_node);
  type->set_gpu_memory_bytes(options.gpu_memory_bytes);
  type->set_intra_node_bytes_per_s(options.job.intra_node_bytes_per_s);
  type->set_count(options.nodes.max_nodes);
  return request;
}

pb::PlanRequest PlanRequestOf(const pb::PlanTemplatesRequest& templates) {
  pb::PlanRequest request;
  request.set_model(templates.model());
  request.set_microbatch_size(templates.microbatch_size());
  *request.mutable_cluster() = templates.cluster();
  request.set_cost_model(templates.cost_model());
  request.set_microbatches(templates.microbatches());
  request.set_optimizer_state_multiplier(templates.optimizer_state_multiplier());
  request.set_missing_allreduce_in_node(templates.missing_allreduce_in_node());
  return request;
}

namespace {

// A GPU type without a profile of its own runs profile_measured_on's, scaled by its
// relative_speed over profile_measured_on's (or --measured-relative-speed).
absl::Status DeriveFromMeasured(const ClusterFile& file, const ClusterFileGpuType& gpu,
                                const ClusterOverrides& overrides, pb::NodeType* node_type) {
  double measured_speed = overrides.measured_relative_speed;
  if (const ClusterFileGpuType* measured = file.FindGpuType(file.profile_measured_on);
      measured != nullptr && measured->relative_speed > 0) {
    measured_speed = measured->relative_speed;
  }
  if (measured_speed <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gpu_types.", gpu.name,
        ".relative_speed is relative to a scale on which "
        "profile_measured_on \"",
        file.profile_measured_on,
        "\" has no relative_speed (it is not in gpu_types); add it to the file or pass "
        "--measured-relative-speed"));
  }
  // The server gets the ratio; one that underflows to 0 (5e-324 / 2) or overflows would
  // be reported as "(got 0)" or "(got inf)", a value the file does not have.
  const double speed = gpu.relative_speed / measured_speed;
  if (!(speed > 0) || !std::isfinite(speed)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpu_types.", gpu.name, ".relative_speed = ", ShowNumber(gpu.relative_speed),
                     " over profile_measured_on ", Quote(file.profile_measured_on), "'s ",
                     ShowNumber(measured_speed), " is ", ShowNumber(speed),
                     " as a double; relative speeds must have a positive finite ratio"));
  }
  pb::DerivedProfile* derive = node_type->mutable_derive();
  derive->set_measured_gpu_type(file.profile_measured_on);
  derive->set_relative_speed(speed);
  return absl::OkStatus();
}

// The mixes to plan: only the mix of all nodes, a range of sizes, or (neither) every mix.
absl::Status SetMixes(const NodeMix& counts, const ClusterOverrides& overrides,
                      pb::PlanTemplatesRequest& request) {
  const int total_nodes = MixSize(counts);
  if (overrides.all_nodes) {
    pb::NodeMix* mix = request.add_mixes();
    for (int count : counts) mix->add_counts(count);
  } else if (overrides.nodes.has_value()) {
    if (overrides.nodes->max_nodes > total_nodes) {
      return absl::InvalidArgumentError(absl::StrCat("--nodes ", overrides.nodes->min_nodes, "-",
                                                     overrides.nodes->max_nodes, " exceeds the ",
                                                     total_nodes, " nodes of the cluster file"));
    }
    request.set_min_nodes(overrides.nodes->min_nodes);
    request.set_max_nodes(overrides.nodes->max_nodes);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ClusterRequest> BuildClusterRequest(const ClusterFile& file,
                                                   const ClusterOverrides& overrides) {
  ClusterRequest out;
  pb::PlanTemplatesRequest& request = out.request;
  request.set_model(file.model);
  request.set_microbatch_size(file.microbatch_size);
  request.set_cost_model(overrides.cost_model);
  request.set_microbatches(overrides.microbatches.value_or(file.microbatches_per_pipeline));
  request.set_optimizer_state_multiplier(
      overrides.optimizer_state_multiplier.value_or(file.optimizer_state_multiplier));
  request.set_missing_allreduce_in_node(overrides.missing_allreduce.value_or(
      file.missing_allreduce_ring ? pb::MISSING_ALLREDUCE_RING : pb::MISSING_ALLREDUCE_SKIP_SIZE));

  const std::vector<NodeType> types = file.NodeTypes();
  const NodeMix counts = file.NodeCounts();
  const std::vector<double> prices = file.NodePricesPerHour();
  pb::Cluster* cluster = request.mutable_cluster();
  cluster->set_inter_node_bytes_per_s(file.inter_node_bytes_per_s);

  bool needs_measured_profile = false;
  std::map<std::string, std::string> uploaded_dir_by_gpu;
  for (size_t i = 0; i < types.size(); ++i) {
    const NodeType& type = types[i];
    const ClusterFileGpuType* gpu = file.FindGpuType(type.gpu_type);
    if (gpu == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("node type ", type.name, ": gpu \"",
                                                     type.gpu_type, "\" is not in gpu_types"));
    }
    pb::NodeType* node_type = cluster->add_node_types();
    node_type->set_name(type.name);
    node_type->set_gpu_type(type.gpu_type);
    node_type->set_gpus_per_node(type.gpus_per_node);
    node_type->set_gpu_memory_bytes(type.gpu_memory_bytes);
    node_type->set_intra_node_bytes_per_s(type.intra_node_bytes_per_s);
    node_type->set_count(counts[i]);
    node_type->set_price_per_hour(prices[i]);

    if (!gpu->profile_dir.empty()) {
      if (uploaded_dir_by_gpu.emplace(gpu->name, gpu->profile_dir).second) {
        out.uploads.push_back({gpu->profile_dir, file.model, gpu->name, file.microbatch_size});
      }
      continue;
    }
    needs_measured_profile = true;
    // The measured GPU type itself uses its profile as is, whatever its relative_speed.
    if (gpu->name == file.profile_measured_on) continue;

    RETURN_IF_ERROR(DeriveFromMeasured(file, *gpu, overrides, node_type));
  }
  if (needs_measured_profile &&
      uploaded_dir_by_gpu.emplace(file.profile_measured_on, file.profile_dir).second) {
    out.uploads.push_back(
        {file.profile_dir, file.model, file.profile_measured_on, file.microbatch_size});
  }

  RETURN_IF_ERROR(SetMixes(counts, overrides, request));
  return out;
}

}  // namespace oobleck::client
