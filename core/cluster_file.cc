#include "core/cluster_file.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/file_reader.h"
#include "core/json_document.h"
#include "core/plan/limits.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"

namespace oobleck {
namespace {

using Json = nlohmann::json;

// Short rendering of a JSON value for error messages.
std::string Show(const Json& value) {
  std::string text = value.dump();
  constexpr size_t kMaxChars = 60;
  if (text.size() > kMaxChars) text = text.substr(0, kMaxChars) + "...";
  return text;
}

absl::Status Invalid(const std::string& path, const std::string& what, const Json& got) {
  return absl::InvalidArgumentError(absl::StrCat(path, " ", what, " (got ", Show(got), ")"));
}

// Unknown keys are rejected so that a misspelt optional key (which would silently take its
// default) is caught; "note" is the format's free-text comment.
absl::Status CheckKeys(const Json& object, const std::string& path,
                       const std::set<std::string>& known) {
  for (const auto& [key, value] : object.items()) {
    if (known.count(key) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path.empty() ? "" : path + ": ", "unknown key \"", key,
                       "\" (known keys: ", absl::StrJoin(known, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : absl::StrCat(path, ".", key);
}

absl::Status Missing(const std::string& path) {
  return absl::InvalidArgumentError(absl::StrCat(path, " is required"));
}

// A JSON integer, or a float with an integral value (e.g. 2.0).
absl::StatusOr<int> PositiveInt(const Json& value, const std::string& path) {
  if (value.is_number_integer() || value.is_number_unsigned()) {
    const auto v = value.get<int64_t>();
    if (v >= 1 && v <= std::numeric_limits<int>::max()) return static_cast<int>(v);
  } else if (value.is_number_float()) {
    const double v = value.get<double>();
    if (std::isfinite(v) && v == std::floor(v) && v >= 1 && v <= std::numeric_limits<int>::max()) {
      return static_cast<int>(v);
    }
  }
  return Invalid(path, "must be a positive integer", value);
}

absl::StatusOr<double> PositiveNumber(const Json& value, const std::string& path) {
  if (value.is_number()) {
    const double v = value.get<double>();
    if (std::isfinite(v) && v > 0) return v;
  }
  return Invalid(path, "must be a positive number", value);
}

absl::StatusOr<std::string> NonEmptyString(const Json& value, const std::string& path) {
  if (value.is_string() && !value.get<std::string>().empty()) return value.get<std::string>();
  return Invalid(path, "must be a non-empty string", value);
}

// Absolute and normalised; relative paths are taken relative to base_dir (itself made
// absolute against the working directory).
std::string ResolvePath(const std::string& path, const std::string& base_dir) {
  std::filesystem::path p(path);
  if (p.is_relative()) p = std::filesystem::path(base_dir.empty() ? "." : base_dir) / p;
  p = std::filesystem::absolute(p).lexically_normal();
  std::string text = p.string();
  // "dir/" normalises to "dir/"; drop the trailing separator so paths compare equal.
  while (text.size() > 1 && text.back() == '/') text.pop_back();
  return text;
}

absl::StatusOr<ClusterFileGpuType> ParseGpuType(const std::string& name, const Json& value,
                                                const std::string& base_dir) {
  const std::string path = absl::StrCat("gpu_types.", name);
  if (!value.is_object()) return Invalid(path, "must be an object", value);
  RETURN_IF_ERROR(CheckKeys(value, path,
                            {"memory_gib", "intra_node_bytes_per_s", "profile", "relative_speed",
                             "price_per_hour", "note"}));

  ClusterFileGpuType gpu;
  gpu.name = name;
  if (!value.contains("memory_gib")) return Missing(Join(path, "memory_gib"));
  ASSIGN_OR_RETURN(double memory_gib,
                   PositiveNumber(value["memory_gib"], Join(path, "memory_gib")));
  gpu.memory_bytes = memory_gib * static_cast<double>(1ULL << 30);

  if (!value.contains("intra_node_bytes_per_s")) {
    return Missing(Join(path, "intra_node_bytes_per_s"));
  }
  ASSIGN_OR_RETURN(double intra, PositiveNumber(value["intra_node_bytes_per_s"],
                                                Join(path, "intra_node_bytes_per_s")));
  gpu.intra_node_bytes_per_s = intra;

  if (value.contains("price_per_hour")) {
    const Json& price = value["price_per_hour"];
    // Per GPU; a node costs gpus_per_node times this (NodeTypes()).
    if (!price.is_number() || !std::isfinite(price.get<double>()) || price.get<double>() < 0) {
      return Invalid(Join(path, "price_per_hour"), "must be a finite number >= 0", price);
    }
    gpu.price_per_hour = price.get<double>();
  }

  const bool has_profile = value.contains("profile");
  const bool has_speed = value.contains("relative_speed");
  if (has_profile == has_speed) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     " must have exactly one of \"profile\" (a measured profile directory) or "
                     "\"relative_speed\" (derived from the top-level profile)",
                     has_profile ? " (got both)" : " (got neither)"));
  }
  if (has_profile) {
    ASSIGN_OR_RETURN(std::string dir, NonEmptyString(value["profile"], Join(path, "profile")));
    gpu.profile_dir = ResolvePath(dir, base_dir);
  } else {
    ASSIGN_OR_RETURN(double speed,
                     PositiveNumber(value["relative_speed"], Join(path, "relative_speed")));
    gpu.relative_speed = speed;
  }
  return gpu;
}

absl::StatusOr<ClusterFileNodeGroup> ParseNodeGroup(int index, const Json& value,
                                                    const ClusterFile& file) {
  const std::string path = absl::StrCat("node_groups[", index, "]");
  if (!value.is_object()) return Invalid(path, "must be an object", value);
  RETURN_IF_ERROR(CheckKeys(value, path, {"gpu", "nodes", "gpus_per_node", "node_ids", "note"}));

  ClusterFileNodeGroup group;
  if (!value.contains("gpu")) return Missing(Join(path, "gpu"));
  ASSIGN_OR_RETURN(const std::string gpu, NonEmptyString(value["gpu"], Join(path, "gpu")));
  if (file.FindGpuType(gpu) == nullptr) {
    std::vector<std::string> known;
    for (const ClusterFileGpuType& t : file.gpu_types) known.push_back(t.name);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ".gpu \"", gpu,
                     "\" is not a key of gpu_types (known: ", absl::StrJoin(known, ", "), ")"));
  }
  group.gpu = gpu;

  for (auto [key, out] : {std::pair<const char*, int*>{"nodes", &group.nodes},
                          std::pair<const char*, int*>{"gpus_per_node", &group.gpus_per_node}}) {
    if (!value.contains(key)) return Missing(Join(path, key));
    ASSIGN_OR_RETURN(int n, PositiveInt(value[key], Join(path, key)));
    *out = n;
  }

  if (value.contains("node_ids")) {
    const Json& ids = value["node_ids"];
    const std::string ids_path = Join(path, "node_ids");
    if (!ids.is_array()) return Invalid(ids_path, "must be a list of strings", ids);
    if (static_cast<int>(ids.size()) != group.nodes) {
      return absl::InvalidArgumentError(absl::StrCat(ids_path, " must have one id per node (", path,
                                                     ".nodes = ", group.nodes, ", got ", ids.size(),
                                                     " ids)"));
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSIGN_OR_RETURN(std::string id, NonEmptyString(ids[i], absl::StrCat(ids_path, "[", i, "]")));
      group.node_ids.push_back(id);
    }
  }
  return group;
}

// Reads the optional top-level number `key` into *out.
absl::Status OptionalPositive(const Json& root, const char* key, double* out) {
  if (!root.contains(key)) return absl::OkStatus();
  ASSIGN_OR_RETURN(double v, PositiveNumber(root[key], key));
  *out = v;
  return absl::OkStatus();
}

}  // namespace

std::vector<NodeType> ClusterFile::NodeTypes() const {
  // GPUs that come in more than one node size need the size in the type name.
  std::map<std::string, std::set<int>> sizes_by_gpu;
  for (const ClusterFileNodeGroup& g : node_groups) sizes_by_gpu[g.gpu].insert(g.gpus_per_node);

  std::vector<NodeType> types;
  std::set<std::pair<std::string, int>> seen;
  for (const ClusterFileNodeGroup& g : node_groups) {
    if (!seen.insert({g.gpu, g.gpus_per_node}).second) continue;
    const ClusterFileGpuType* gpu = FindGpuType(g.gpu);
    NodeType type;
    type.name = sizes_by_gpu[g.gpu].size() > 1 ? absl::StrCat(g.gpu, "x", g.gpus_per_node) : g.gpu;
    type.gpu_type = g.gpu;
    type.gpus_per_node = g.gpus_per_node;
    if (gpu != nullptr) {
      type.gpu_memory_bytes = gpu->memory_bytes;
      type.intra_node_bytes_per_s = gpu->intra_node_bytes_per_s;
    }
    types.push_back(std::move(type));
  }
  return types;
}

std::vector<double> ClusterFile::NodePricesPerHour() const {
  std::vector<double> prices;
  for (const NodeType& type : NodeTypes()) {
    const ClusterFileGpuType* gpu = FindGpuType(type.gpu_type);
    prices.push_back(gpu == nullptr ? 0 : gpu->price_per_hour * type.gpus_per_node);
  }
  return prices;
}

NodeMix ClusterFile::NodeCounts() const {
  const std::vector<NodeType> types = NodeTypes();
  NodeMix counts(types.size(), 0);
  for (const ClusterFileNodeGroup& g : node_groups) {
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i].gpu_type == g.gpu && types[i].gpus_per_node == g.gpus_per_node) {
        counts[i] += g.nodes;
        break;
      }
    }
  }
  return counts;
}

const ClusterFileGpuType* ClusterFile::FindGpuType(std::string_view name) const {
  for (const ClusterFileGpuType& t : gpu_types) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {

// The job's keys: name, model, micro-batches, bandwidth, optimizer multiplier, all-reduce.
absl::Status ParseJob(const Json& root, ClusterFile& file) {
  if (root.contains("name")) {
    ASSIGN_OR_RETURN(file.name, NonEmptyString(root["name"], "name"));
  }
  if (!root.contains("model")) return Missing("model");
  ASSIGN_OR_RETURN(file.model, NonEmptyString(root["model"], "model"));

  if (root.contains("microbatch_size")) {
    ASSIGN_OR_RETURN(file.microbatch_size, PositiveInt(root["microbatch_size"], "microbatch_size"));
  }
  // Optional: a client may supply M itself (oobleck-plan --microbatches).
  if (root.contains("microbatches_per_pipeline")) {
    ASSIGN_OR_RETURN(int m,
                     PositiveInt(root["microbatches_per_pipeline"], "microbatches_per_pipeline"));
    file.microbatches_per_pipeline = m;
  }
  if (!root.contains("inter_node_bytes_per_s")) return Missing("inter_node_bytes_per_s");
  RETURN_IF_ERROR(OptionalPositive(root, "inter_node_bytes_per_s", &file.inter_node_bytes_per_s));
  RETURN_IF_ERROR(
      OptionalPositive(root, "optimizer_state_multiplier", &file.optimizer_state_multiplier));

  if (root.contains("missing_allreduce_in_node")) {
    const Json& v = root["missing_allreduce_in_node"];
    if (!v.is_string() || v.get<std::string>() != "ring") {
      return Invalid("missing_allreduce_in_node", "must be \"ring\" (the one defined estimate)", v);
    }
    file.missing_allreduce_ring = true;
  }

  return absl::OkStatus();
}

// The top-level profile and the GPU type it was measured on: both or neither.
absl::Status ParseTopLevelProfile(const Json& root, const std::string& base_dir,
                                  ClusterFile& file) {
  if (root.contains("profile")) {
    ASSIGN_OR_RETURN(std::string dir, NonEmptyString(root["profile"], "profile"));
    file.profile_dir = ResolvePath(dir, base_dir);
  }
  if (root.contains("profile_measured_on")) {
    ASSIGN_OR_RETURN(std::string on,
                     NonEmptyString(root["profile_measured_on"], "profile_measured_on"));
    file.profile_measured_on = on;
  }
  // The top-level profile is stored under profile_measured_on, so one needs the other.
  if (!file.profile_dir.empty() && file.profile_measured_on.empty()) {
    return absl::InvalidArgumentError(
        "profile_measured_on is required with the top-level profile (the GPU type it was "
        "measured on)");
  }
  if (file.profile_dir.empty() && !file.profile_measured_on.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile is required with profile_measured_on (got profile_measured_on \"",
                     file.profile_measured_on, "\" but no top-level profile)"));
  }

  return absl::OkStatus();
}

absl::Status ParseGpuTypes(const Json& root, const std::string& base_dir, ClusterFile& file) {
  if (!root.contains("gpu_types")) return Missing("gpu_types");
  const Json& gpu_types = root["gpu_types"];
  if (!gpu_types.is_object() || gpu_types.empty()) {
    return Invalid("gpu_types", "must be a non-empty object of GPU type name -> properties",
                   gpu_types);
  }
  // nlohmann's object is an ordered std::map, so gpu_types come out sorted by name.
  for (const auto& [name, value] : gpu_types.items()) {
    ASSIGN_OR_RETURN(ClusterFileGpuType gpu, ParseGpuType(name, value, base_dir));
    if (gpu.relative_speed > 0 && file.profile_dir.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("gpu_types.", name,
                       ".relative_speed needs the top-level \"profile\" and "
                       "\"profile_measured_on\" (the measured profile it is derived from)"));
    }
    if (!gpu.profile_dir.empty() && name == file.profile_measured_on &&
        gpu.profile_dir != file.profile_dir) {
      return absl::InvalidArgumentError(
          absl::StrCat("gpu_types.", name, ".profile \"", gpu.profile_dir,
                       "\" conflicts with the top-level profile \"", file.profile_dir,
                       "\", which is also measured on ", name));
    }
    file.gpu_types.push_back(std::move(gpu));
  }

  return absl::OkStatus();
}

absl::Status ParseNodeGroups(const Json& root, ClusterFile& file) {
  if (!root.contains("node_groups")) return Missing("node_groups");
  const Json& groups = root["node_groups"];
  if (!groups.is_array() || groups.empty()) {
    return Invalid("node_groups", "must be a non-empty list", groups);
  }
  int64_t total_nodes = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    ASSIGN_OR_RETURN(ClusterFileNodeGroup group,
                     ParseNodeGroup(static_cast<int>(i), groups[i], file));
    total_nodes += group.nodes;
    if (total_nodes > kMaxClusterFileNodes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "node_groups[", i, "].nodes = ", group.nodes,
          total_nodes > group.nodes
              ? absl::StrCat(" brings the cluster to ", total_nodes, " nodes,")
              : " is",
          " more than the ", kMaxClusterFileNodes,
          " nodes a cluster file may have (templates takes at most that many; plan and replan ",
          kMaxClusterNodes, ")"));
    }
    file.node_groups.push_back(std::move(group));
  }

  return absl::OkStatus();
}

// Node ids: the given ones, else generated; unique across the file.
absl::Status AssignNodeIds(ClusterFile& file) {
  // Generated ids number the nodes of each GPU type in file order, counting nodes with
  // explicit ids too, so a node's generated id does not depend on other groups' ids.
  std::map<std::string, int> next_index_by_gpu;
  std::map<std::string, std::string> owner_by_id;  // id -> where it was defined
  for (size_t i = 0; i < file.node_groups.size(); ++i) {
    ClusterFileNodeGroup& group = file.node_groups[i];
    int& next = next_index_by_gpu[group.gpu];
    const bool generate = group.node_ids.empty();
    for (int k = 0; k < group.nodes; ++k, ++next) {
      if (generate) group.node_ids.push_back(absl::StrCat(group.gpu, "-", next));
      const std::string where = absl::StrCat("node_groups[", i, "].node_ids[", k, "]");
      auto [it, inserted] = owner_by_id.emplace(group.node_ids[k], where);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(where, " \"", group.node_ids[k],
                                                       "\" duplicates ", it->second,
                                                       " (node ids must be unique)"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ClusterFile> ParseClusterFile(std::string_view json, const std::string& base_dir) {
  ASSIGN_OR_RETURN(const Json root, ParseJsonDocument(json));
  if (!root.is_object()) return Invalid("the cluster file", "must be a JSON object", root);
  RETURN_IF_ERROR(CheckKeys(
      root, "",
      {"name", "note", "model", "profile", "profile_measured_on", "microbatch_size",
       "microbatches_per_pipeline", "inter_node_bytes_per_s", "optimizer_state_multiplier",
       "missing_allreduce_in_node", "gpu_types", "node_groups"}));
  ClusterFile file;
  RETURN_IF_ERROR(ParseJob(root, file));
  RETURN_IF_ERROR(ParseTopLevelProfile(root, base_dir, file));
  RETURN_IF_ERROR(ParseGpuTypes(root, base_dir, file));
  RETURN_IF_ERROR(ParseNodeGroups(root, file));
  RETURN_IF_ERROR(AssignNodeIds(file));
  return file;
}

absl::StatusOr<ClusterFile> LoadClusterFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text,
                   ReadRegularFile(path, absl::StrCat("cluster file \"", path, "\"")));

  const std::filesystem::path file_path = std::filesystem::absolute(path);
  absl::StatusOr<ClusterFile> file = ParseClusterFile(text, file_path.parent_path().string());
  if (!file.ok()) {
    return absl::Status(file.status().code(), absl::StrCat(path, ": ", file.status().message()));
  }
  if (file->name.empty()) file->name = file_path.stem().string();
  return file;
}

}  // namespace oobleck
