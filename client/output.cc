#include "client/output.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/json_util.h"

namespace oobleck::client {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

std::string Ms(double ms) { return absl::StrFormat("%.2f", ms); }

}  // namespace

// Left-aligned columns separated by two spaces; the last column is not padded so long
// stage lists do not leave trailing blanks.
std::string RenderTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string out;
  // Printing a valid message cannot fail; the status only reports unresolvable Any types.
  const auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) return absl::StrCat("{\"error\": \"", status.ToString(), "\"}\n");
  return out;
}

std::string FormatStage(const pb::Stage& stage) {
  const std::string gpus = stage.tensor_parallel() > 1 ? absl::StrCat("tp", stage.tensor_parallel())
                                                       : absl::StrCat(stage.gpus(), "g");
  return absl::StrCat("[", stage.layer_begin(), ",", stage.layer_end(), ")@n", stage.node_index(),
                      ":", stage.node_type(), "/", gpus);
}

std::string FormatBytes(double bytes) {
  if (bytes >= 1e9) return absl::StrFormat("%.2f GB", bytes / 1e9);
  if (bytes >= 1e6) return absl::StrFormat("%.1f MB", bytes / 1e6);
  return absl::StrFormat("%.0f B", bytes);
}

std::string GpuTypeOf(const pb::NodeType& type) {
  return type.gpu_type().empty() ? type.name() : type.gpu_type();
}

std::map<std::string, std::string> GpuTypesOf(const pb::Cluster& cluster) {
  std::map<std::string, std::string> out;
  for (const pb::NodeType& t : cluster.node_types()) out[t.name()] = GpuTypeOf(t);
  return out;
}

std::set<std::string> DerivedNodeTypes(const pb::PipelineTemplate& tmpl,
                                       const std::map<std::string, std::string>& gpu_type_of) {
  const std::set<std::string> derived_gpus(tmpl.derived_gpu_types().begin(),
                                           tmpl.derived_gpu_types().end());
  std::set<std::string> out;
  for (const std::string& name : tmpl.node_order()) {
    auto it = gpu_type_of.find(name);
    if (derived_gpus.count(it == gpu_type_of.end() ? name : it->second) > 0) out.insert(name);
  }
  return out;
}

std::string MarkDerivedTypes(const std::string& mix_label,
                             const std::set<std::string>& derived_node_types) {
  if (derived_node_types.empty()) return mix_label;
  std::vector<std::string> parts = absl::StrSplit(mix_label, '+');
  for (std::string& part : parts) {
    // "<count>x<node type>"; a name with a '+' in it is not recognised (and not marked).
    const size_t x = part.find('x');
    if (x != std::string::npos && derived_node_types.count(part.substr(x + 1)) > 0) part += "*";
  }
  return absl::StrJoin(parts, "+");
}

std::string FormatTemplates(const pb::PlanTemplatesResponse& response,
                            const std::map<std::string, std::string>& gpu_type_of) {
  std::vector<std::vector<std::string>> rows = {
      {"MIX", "NODES", "GPUS", "ITERATION_MS", "CACHE", "STAGES"}};
  std::set<std::string> derived_types;
  int feasible = 0;
  for (const pb::MixTemplate& result : response.results()) {
    int nodes = 0;
    for (int count : result.mix().counts()) nodes += count;
    const std::string cache = result.cache_hit() ? "hit" : "miss";
    if (!result.feasible()) {
      rows.push_back({result.mix_label(), absl::StrCat(nodes), "-", "-", cache,
                      absl::StrCat("infeasible: ", result.infeasible_reason())});
      continue;
    }
    ++feasible;
    const pb::PipelineTemplate& tmpl = result.template_();
    std::vector<std::string> stages;
    for (const pb::Stage& stage : tmpl.stages()) stages.push_back(FormatStage(stage));
    const std::string label =
        MarkDerivedTypes(result.mix_label(), DerivedNodeTypes(tmpl, gpu_type_of));
    derived_types.insert(tmpl.derived_gpu_types().begin(), tmpl.derived_gpu_types().end());
    rows.push_back({label, absl::StrCat(tmpl.num_nodes()), absl::StrCat(tmpl.num_gpus()),
                    Ms(tmpl.iteration_time_ms()), cache, absl::StrJoin(stages, " ")});
  }
  std::string out = absl::StrFormat("cost model %s: %d mixes, %d feasible, planned in %.1f ms\n",
                                    response.cost_model(), response.results_size(), feasible,
                                    response.planning_time_ms());
  out += RenderTable(rows);
  out += "stage [a,b)@nK:TYPE/Gg = layers a..b-1 on pipeline node K (node type TYPE), G GPUs\n";
  if (!derived_types.empty()) {
    absl::StrAppend(&out, "* profile derived by relative speed, not measured: ",
                    absl::StrJoin(derived_types, ", "), "\n");
  }
  return out;
}

std::string FormatProfileLoaded(const pb::LoadProfileResponse& response) {
  const pb::ProfileInfo& p = response.profile();
  return absl::StrFormat(
      "%s %s/%s/mb%d: %d layers, forward %.1f ms, backward %.1f ms, params %.2f GiB, "
      "in-node all-reduce GPUs [%s], fingerprint %s\n",
      response.replaced() ? "replaced" : "loaded", p.model(), p.gpu_type(), p.microbatch_size(),
      p.num_layers(), p.total_forward_ms(), p.total_backward_ms(), p.total_param_bytes() / kGiB,
      absl::StrJoin(p.allreduce_in_node_gpus(), ","), p.fingerprint());
}

std::string FormatProfiles(const pb::ListProfilesResponse& response) {
  if (response.profiles_size() == 0) return "no profiles loaded\n";
  std::vector<std::vector<std::string>> rows = {{"MODEL", "GPU_TYPE", "MB", "TP", "LAYERS",
                                                 "FORWARD_MS", "BACKWARD_MS", "PARAMS_GIB",
                                                 "ALLREDUCE_GPUS", "FINGERPRINT"}};
  for (const pb::ProfileInfo& p : response.profiles()) {
    rows.push_back({p.model(), p.gpu_type(), absl::StrCat(p.microbatch_size()),
                    absl::StrCat(std::max(p.tp(), 1)), absl::StrCat(p.num_layers()),
                    absl::StrFormat("%.1f", p.total_forward_ms()),
                    absl::StrFormat("%.1f", p.total_backward_ms()),
                    absl::StrFormat("%.2f", p.total_param_bytes() / kGiB),
                    absl::StrJoin(p.allreduce_in_node_gpus(), ","), p.fingerprint()});
  }
  return RenderTable(rows);
}

std::string FormatStats(const pb::GetStatsResponse& s) {
  const int64_t lookups = s.cache_hits() + s.cache_misses();
  const std::string hit_rate =
      lookups > 0 ? absl::StrFormat(" (%.1f%% hits)", 100.0 * s.cache_hits() / lookups) : "";
  std::vector<std::vector<std::string>> rows = {
      {"profiles loaded", absl::StrCat(s.profiles_loaded())},
      {"PlanTemplates requests", absl::StrCat(s.plan_templates_requests())},
      {"cache hits / misses", absl::StrCat(s.cache_hits(), " / ", s.cache_misses(), hit_rate)},
      {"cache entries", absl::StrCat(s.cache_entries())},
      {"cache size", absl::StrFormat("%.2f MiB of %.2f MiB", s.cache_bytes() / kMiB,
                                     s.cache_capacity_bytes() / kMiB)},
      {"cache evictions", absl::StrCat(s.cache_evictions())},
      {"uptime", absl::StrFormat("%.1f s", s.uptime_s())},
  };
  // Only a replica sharing templates through etcd has these.
  if (s.shared_cache_hits() + s.shared_cache_misses() + s.shared_cache_published() > 0) {
    rows.push_back({"shared cache hits / misses",
                    absl::StrCat(s.shared_cache_hits(), " / ", s.shared_cache_misses())});
    rows.push_back({"shared cache published / skipped / errors",
                    absl::StrCat(s.shared_cache_published(), " / ", s.shared_cache_skipped(), " / ",
                                 s.shared_cache_errors())});
  }
  return RenderTable(rows);
}

}  // namespace oobleck::client
