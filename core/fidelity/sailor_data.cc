#include "core/fidelity/sailor_data.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "core/field_path.h"
#include "core/file_reader.h"
#include "core/json_document.h"
#include "core/status_macros.h"

namespace oobleck::fidelity {
namespace {

using json = nlohmann::json;

// Paths name the file and the keys down to the value: "llm_info.json/OPT-350/4/3/params_bytes".
std::string Sub(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, "/", key);
}

// The same error (code, field path) with `file: ` before its message.
absl::Status InFile(const absl::Status& status, absl::string_view file) {
  return WithMessagePrefix(status, absl::StrCat(file, ": "));
}

absl::Status RequireObject(const json& v, absl::string_view path) {
  if (v.is_object()) return absl::OkStatus();
  return InvalidField(path, " must be a JSON object");
}

absl::StatusOr<const json*> Member(const json& v, absl::string_view path, const char* key) {
  RETURN_IF_ERROR(RequireObject(v, path));
  auto it = v.find(key);
  if (it == v.end()) return InvalidField(Sub(path, key), " is required");
  return &*it;
}

absl::StatusOr<double> NonNegative(const json& v, absl::string_view path) {
  if (!v.is_number()) return InvalidField(path, " must be a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < 0) return InvalidValue(path, ">= 0", x);
  return x;
}

absl::StatusOr<int> PositiveInt(const json& v, absl::string_view path) {
  if (!v.is_number_integer()) return InvalidField(path, " must be an integer");
  const int64_t x = v.get<int64_t>();
  if (x < 1 || x > (int64_t{1} << 30)) return InvalidValue(path, "in [1, 2^30]", x);
  return static_cast<int>(x);
}

// A key that is a count or an index ("8"): non-negative decimal.
absl::StatusOr<int> KeyNumber(const std::string& key, absl::string_view path) {
  int x = -1;
  const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), x);
  if (ec != std::errc() || end != key.data() + key.size() || x < 0) {
    return InvalidField(Sub(path, key), " must be keyed by a non-negative integer");
  }
  return x;
}

// An object keyed "0" … "n-1" (any order) as a vector, each value read by `read`.
template <typename T, typename Read>
absl::StatusOr<std::vector<T>> LayerList(const json& v, absl::string_view path, Read read) {
  RETURN_IF_ERROR(RequireObject(v, path));
  std::vector<std::optional<T>> slots(v.size());
  for (const auto& [key, value] : v.items()) {
    ASSIGN_OR_RETURN(const int layer, KeyNumber(key, path));
    if (layer >= static_cast<int>(slots.size())) {
      return InvalidField(path, absl::StrCat(" has ", slots.size(), " layers but names layer ",
                                             layer, " (layers must be 0 … n-1)"));
    }
    ASSIGN_OR_RETURN(T item, read(value, Sub(path, key)));
    slots[layer] = std::move(item);
  }
  std::vector<T> out;
  for (auto& slot : slots) out.push_back(*slot);  // keys are distinct, so all are filled
  return out;
}

absl::StatusOr<LayerTimes> ReadLayerTimes(const json& v, const std::string& path) {
  if (!v.is_array() || v.size() != 3) {
    return InvalidField(path, " must be [forward_s, backward_s, update_s]");
  }
  LayerTimes t;
  ASSIGN_OR_RETURN(t.forward_s, NonNegative(v[0], Sub(path, "0")));
  ASSIGN_OR_RETURN(t.backward_s, NonNegative(v[1], Sub(path, "1")));
  ASSIGN_OR_RETURN(t.update_s, NonNegative(v[2], Sub(path, "2")));
  return t;
}

absl::StatusOr<LayerSizes> ReadLayerSizes(const json& v, const std::string& path) {
  LayerSizes s;
  for (auto [key, out] : {std::pair{"params_bytes", &s.params_bytes},
                          std::pair{"act_output_bytes", &s.act_output_bytes},
                          std::pair{"act_mem_bytes", &s.act_mem_bytes}}) {
    ASSIGN_OR_RETURN(const json* field, Member(v, path, key));
    ASSIGN_OR_RETURN(*out, NonNegative(*field, Sub(path, key)));
  }
  return s;
}

absl::StatusOr<BandwidthCurve> ReadCurve(const json& v, const std::string& path) {
  if (!v.is_array() || v.size() != 2 || !v[0].is_array() || v[0].size() != 3) {
    return InvalidField(path, " must be [[c0, c1, c2], bytes_per_s]");
  }
  BandwidthCurve c;
  for (int i = 0; i < 3; ++i) {
    const std::string at = absl::StrCat(path, "/0/", i);
    if (!v[0][i].is_number() || !std::isfinite(v[0][i].get<double>())) {
      return InvalidField(at, " must be a number");
    }
    c.coefficients[i] = v[0][i].get<double>();
  }
  ASSIGN_OR_RETURN(c.peak_bytes_per_s, NonNegative(v[1], Sub(path, "1")));
  if (c.peak_bytes_per_s <= 0) return InvalidValue(Sub(path, "1"), "> 0", c.peak_bytes_per_s);
  return c;
}

// Calls visit(key_number, value, path) for each entry of an object keyed by numbers.
template <typename Visit>
absl::Status ForEachNumbered(const json& v, absl::string_view path, Visit visit) {
  RETURN_IF_ERROR(RequireObject(v, path));
  for (const auto& [key, value] : v.items()) {
    ASSIGN_OR_RETURN(const int n, KeyNumber(key, path));
    RETURN_IF_ERROR(visit(n, value, Sub(path, key)));
  }
  return absl::OkStatus();
}

// Calls visit(key, value, path) for each entry of an object.
template <typename Visit>
absl::Status ForEachNamed(const json& v, absl::string_view path, Visit visit) {
  RETURN_IF_ERROR(RequireObject(v, path));
  for (const auto& [key, value] : v.items()) RETURN_IF_ERROR(visit(key, value, Sub(path, key)));
  return absl::OkStatus();
}

absl::Status ReadProfiles(const json& doc, SailorData& data) {
  return ForEachNamed(
      doc, "profiles_tmp.json",
      [&](const std::string& model, const json& m, const std::string& mp) {
        return ForEachNamed(
            m, mp, [&](const std::string& gpu, const json& g, const std::string& gp) {
              return ForEachNumbered(g, gp, [&](int mbs, const json& b, const std::string& bp) {
                return ForEachNumbered(b, bp, [&](int tp, const json& t, const std::string& tpp) {
                  if (mbs < 1 || tp < 1) return InvalidField(tpp, ": mbs and tp must be >= 1");
                  ASSIGN_OR_RETURN(data.profiles[model][gpu][mbs][tp],
                                   LayerList<LayerTimes>(t, tpp, ReadLayerTimes));
                  return absl::OkStatus();
                });
              });
            });
      });
}

absl::Status ReadLayerInfo(const json& doc, SailorData& data) {
  return ForEachNamed(
      doc, "llm_info.json", [&](const std::string& model, const json& m, const std::string& mp) {
        return ForEachNumbered(m, mp, [&](int tp, const json& t, const std::string& tp_path) {
          if (tp < 1) return InvalidField(tp_path, ": tp must be >= 1");
          ASSIGN_OR_RETURN(data.layer_sizes[model][tp],
                           LayerList<LayerSizes>(t, tp_path, ReadLayerSizes));
          return absl::OkStatus();
        });
      });
}

// [zone][gpu][n][zone][gpu][n] = curve.
absl::Status ReadInterNode(const json& doc, const std::string& file, SailorData& data) {
  return ForEachNamed(doc, file, [&](const std::string& za, const json& a1, const std::string& p1) {
    return ForEachNamed(a1, p1, [&](const std::string& ga, const json& a2, const std::string& p2) {
      return ForEachNumbered(a2, p2, [&](int na, const json& a3, const std::string& p3) {
        return ForEachNamed(
            a3, p3, [&](const std::string& zb, const json& b1, const std::string& q1) {
              return ForEachNamed(
                  b1, q1, [&](const std::string& gb, const json& b2, const std::string& q2) {
                    return ForEachNumbered(
                        b2, q2, [&](int nb, const json& c, const std::string& q3) {
                          ASSIGN_OR_RETURN(BandwidthCurve curve, ReadCurve(c, q3));
                          data.inter_node[{Endpoint{za, ga, na}, Endpoint{zb, gb, nb}}] = curve;
                          return absl::OkStatus();
                        });
                  });
            });
      });
    });
  });
}

absl::Status ReadIntraNode(const json& doc, SailorData& data) {
  const std::string file = "intra_node_bandwidths.json";
  return ForEachNamed(doc, file, [&](const std::string& gpu, const json& g, const std::string& gp) {
    return ForEachNumbered(g, gp, [&](int n, const json& c, const std::string& cp) {
      ASSIGN_OR_RETURN(data.intra_node[gpu][n], ReadCurve(c, cp));
      return absl::OkStatus();
    });
  });
}

absl::Status ReadTrainingConfig(const json& doc, const std::string& file, SailorData& data) {
  ASSIGN_OR_RETURN(const json* model, Member(doc, file, "model"));
  if (!model->is_string()) return InvalidField(Sub(file, "model"), " must be a string");
  ASSIGN_OR_RETURN(const json* layers, Member(doc, file, "num_all_layers"));
  ASSIGN_OR_RETURN(data.num_all_layers[model->get<std::string>()],
                   PositiveInt(*layers, Sub(file, "num_all_layers")));
  return absl::OkStatus();
}

// Every layer list of a model has the model's layer count.
absl::Status CheckLayerCounts(const SailorData& data) {
  for (const auto& [model, by_tp] : data.layer_sizes) {
    auto want = data.num_all_layers.find(model);
    for (const auto& [tp, layers] : by_tp) {
      if (want != data.num_all_layers.end() && static_cast<int>(layers.size()) != want->second) {
        return InvalidField(absl::StrCat("llm_info.json/", model, "/", tp),
                            absl::StrCat(" has ", layers.size(),
                                         " layers but the training "
                                         "config says num_all_layers ",
                                         want->second));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<json> ReadJson(const std::filesystem::path& path, const std::string& shown) {
  ASSIGN_OR_RETURN(std::string text, ReadRegularFile(path, shown));
  auto doc = ParseJsonDocument(text);
  if (!doc.ok()) return InFile(doc.status(), shown);
  return *std::move(doc);
}

absl::StatusOr<const json*> ArrayOf(const json& v, absl::string_view path, const char* key,
                                    size_t size) {
  ASSIGN_OR_RETURN(const json* a, Member(v, path, key));
  if (!a->is_array() || a->size() != size) {
    return InvalidField(Sub(path, key),
                        absl::StrCat(" must be an array of ", size, " entries (one per stage)"));
  }
  return a;
}

absl::StatusOr<ReplicaNode> ReadNode(const json& node, const std::string& path) {
  if (!node.is_array() || node.size() != 3 || !node[0].is_string() || !node[2].is_string()) {
    return InvalidField(path, " must be [gpu_type, gpus_per_node, zone]");
  }
  ReplicaNode n;
  n.gpu_type = node[0].get<std::string>();
  n.zone = node[2].get<std::string>();
  ASSIGN_OR_RETURN(n.gpus_per_node, PositiveInt(node[1], Sub(path, "1")));
  return n;
}

// [[[gpu_type, gpus_per_node, zone], ...], tp]: the replica's tp GPUs fill the listed nodes in
// order; nodes listed past the tp-th GPU hold none of them (Metis' plans list a node per GPU).
absl::StatusOr<StageReplica> ReadReplica(const json& v, const std::string& path) {
  if (!v.is_array() || v.size() != 2 || !v[0].is_array()) {
    return InvalidField(path, " must be [[[gpu_type, gpus_per_node, zone], ...], tp]");
  }
  if (v[0].empty()) return InvalidField(Sub(path, "0"), " must name at least one node");
  StageReplica r;
  ASSIGN_OR_RETURN(r.tp, PositiveInt(v[1], Sub(path, "1")));
  int left = r.tp, listed = 0;
  for (size_t i = 0; i < v[0].size(); ++i) {
    ASSIGN_OR_RETURN(ReplicaNode node, ReadNode(v[0][i], Sub(Sub(path, "0"), std::to_string(i))));
    listed += node.gpus_per_node;
    node.gpus = std::min(left, node.gpus_per_node);
    left -= node.gpus;
    if (node.gpus > 0) r.nodes.push_back(std::move(node));
  }
  if (left > 0) {
    return InvalidField(Sub(path, "1"), absl::StrCat(" (tp ", r.tp,
                                                     ") must be at most the GPUs of the "
                                                     "replica's nodes (",
                                                     listed, ")"));
  }
  r.gpu_type = r.nodes[0].gpu_type;
  r.gpus_per_node = r.nodes[0].gpus_per_node;
  r.zone = r.nodes[0].zone;
  return r;
}

// Stage s holds the layers right after stage s-1's, in order, at least one.
absl::StatusOr<std::vector<int>> ReadStageLayers(const json& v, const std::string& path,
                                                 int first) {
  if (!v.is_array() || v.empty()) return InvalidField(path, " must be a non-empty array");
  std::vector<int> layers;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = Sub(path, std::to_string(i));
    if (!v[i].is_number_integer()) return InvalidField(at, " must be an integer");
    const int64_t layer = v[i].get<int64_t>();
    if (layer != first + static_cast<int64_t>(i)) {
      return InvalidField(
          at, absl::StrCat(" must be layer ", first + static_cast<int64_t>(i), " (got ", layer,
                           "): layers_per_stage must list "
                           "0 … n-1 in order, each layer once"));
    }
    layers.push_back(static_cast<int>(layer));
  }
  return layers;
}

// `replicas` counts the stage replicas read so far over all pipelines, against kMaxPlanReplicas.
absl::StatusOr<SailorPipeline> ReadPipeline(const json& pipeline, const std::string& path,
                                            int& replicas_read) {
  SailorPipeline out;
  ASSIGN_OR_RETURN(const json* n, Member(pipeline, path, "num_stages"));
  ASSIGN_OR_RETURN(const int stages, PositiveInt(*n, Sub(path, "num_stages")));
  ASSIGN_OR_RETURN(const json* layers, ArrayOf(pipeline, path, "layers_per_stage", stages));
  ASSIGN_OR_RETURN(const json* dp, ArrayOf(pipeline, path, "dp", stages));
  ASSIGN_OR_RETURN(const json* tmp, ArrayOf(pipeline, path, "tmp_per_stage", stages));
  int next_layer = 0;
  for (int s = 0; s < stages; ++s) {
    const std::string at = std::to_string(s);
    ASSIGN_OR_RETURN(
        out.layers_per_stage.emplace_back(),
        ReadStageLayers((*layers)[s], Sub(Sub(path, "layers_per_stage"), at), next_layer));
    next_layer += static_cast<int>(out.layers_per_stage.back().size());
    // Stages may have different dp: micro-batch i runs on replica i mod dp of every stage.
    ASSIGN_OR_RETURN(const int replicas, PositiveInt((*dp)[s], Sub(Sub(path, "dp"), at)));
    const json& list = (*tmp)[s];
    const std::string list_path = Sub(Sub(path, "tmp_per_stage"), at);
    if (!list.is_array() || static_cast<int>(list.size()) != replicas) {
      return InvalidField(list_path, absl::StrCat(" must list dp = ", replicas, " replicas"));
    }
    replicas_read += replicas;
    if (replicas_read > kMaxPlanReplicas) {
      return InvalidField(list_path, absl::StrCat(": the plan lists more than ", kMaxPlanReplicas,
                                                  " stage replicas"));
    }
    auto& row = out.replicas.emplace_back();
    for (size_t r = 0; r < list.size(); ++r) {
      ASSIGN_OR_RETURN(row.emplace_back(), ReadReplica(list[r], Sub(list_path, std::to_string(r))));
    }
  }
  return out;
}

// Every stage of every pipeline splits its pipeline's gbs / pipelines samples evenly.
absl::Status CheckBatchSplit(const SailorPlan& plan, size_t pipelines) {
  std::vector<const std::vector<std::vector<StageReplica>>*> all = {&plan.replicas};
  for (const SailorPipeline& p : plan.other_pipelines) all.push_back(&p.replicas);
  for (const auto* replicas : all) {
    for (const auto& stage : *replicas) {
      const int64_t per_step = int64_t{plan.microbatch_size} * stage.size() * pipelines;
      if (plan.global_batch % per_step != 0) {
        return InvalidField(
            "gbs", absl::StrCat(" (", plan.global_batch, ") must be a multiple of mbs × dp",
                                pipelines > 1 ? " × pipelines" : "", " = ", per_step));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<double>> OptionalNonNegative(const json& doc, const char* key) {
  auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return std::nullopt;
  ASSIGN_OR_RETURN(const double x, NonNegative(*it, key));
  return x;
}

}  // namespace

double BandwidthCurve::At(double bytes) const {
  // Below 1 MB the fit is outside its range: messages are priced as 1 MB ones.
  const double x = std::log2(std::max(bytes, 1e6) / 1e6);
  const double gb_per_s = (coefficients[0] * x + coefficients[1]) * x + coefficients[2];
  // A fit can turn down (or negative) past its range: never below 1 % of the peak.
  return std::clamp(gb_per_s * 1e9, 0.01 * peak_bytes_per_s, peak_bytes_per_s);
}

absl::StatusOr<SailorData> SailorDataFromJson(const std::map<std::string, json>& docs) {
  SailorData data;
  for (const auto& [file, doc] : docs) {
    if (file == "profiles_tmp.json") {
      RETURN_IF_ERROR(ReadProfiles(doc, data));
    } else if (file == "llm_info.json") {
      RETURN_IF_ERROR(ReadLayerInfo(doc, data));
    } else if (file == "intra_node_bandwidths.json") {
      RETURN_IF_ERROR(ReadIntraNode(doc, data));
    } else if (file.starts_with("multizone_bandwidths")) {
      RETURN_IF_ERROR(ReadInterNode(doc, file, data));
    } else if (file.starts_with("training_config_")) {
      RETURN_IF_ERROR(ReadTrainingConfig(doc, file, data));
    }
  }
  RETURN_IF_ERROR(CheckLayerCounts(data));
  return data;
}

absl::StatusOr<SailorData> LoadSailorData(const std::filesystem::path& dir) {
  std::map<std::string, json> docs;
  std::vector<std::string> files = {"profiles_tmp.json", "llm_info.json",
                                    "intra_node_bandwidths.json", "multizone_bandwidths.json",
                                    "multizone_bandwidths_het.json"};
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("training_config_") && name.ends_with(".json")) files.push_back(name);
  }
  if (ec) return absl::NotFoundError(absl::StrCat(dir.string(), ": ", ec.message()));
  for (const std::string& name : files) {
    ASSIGN_OR_RETURN(docs[name], ReadJson(dir / name, (dir / name).string()));
  }
  return SailorDataFromJson(docs);
}

absl::StatusOr<SailorPlan> SailorPlanFromJson(const json& doc) {
  SailorPlan plan;
  RETURN_IF_ERROR(RequireObject(doc, "plan"));
  if (auto it = doc.find("model"); it != doc.end()) {
    if (!it->is_string()) return InvalidField("model", " must be a string");
    plan.model = it->get<std::string>();
  }
  ASSIGN_OR_RETURN(const json* mbs, Member(doc, "", "mbs"));
  ASSIGN_OR_RETURN(plan.microbatch_size, PositiveInt(*mbs, "mbs"));
  ASSIGN_OR_RETURN(const json* gbs, Member(doc, "", "gbs"));
  ASSIGN_OR_RETURN(plan.global_batch, PositiveInt(*gbs, "gbs"));
  ASSIGN_OR_RETURN(plan.real_iteration_s, OptionalNonNegative(doc, "real"));
  ASSIGN_OR_RETURN(plan.real_max_memory_bytes, OptionalNonNegative(doc, "max_mem"));
  ASSIGN_OR_RETURN(const json* list, Member(doc, "", "pipeline_list"));
  if (!list->is_array() || list->empty()) {
    return InvalidField("pipeline_list", " must be a non-empty array");
  }
  int replicas_read = 0;
  for (size_t p = 0; p < list->size(); ++p) {
    ASSIGN_OR_RETURN(SailorPipeline pipeline,
                     ReadPipeline((*list)[p], absl::StrCat("pipeline_list/", p), replicas_read));
    if (p == 0) {
      plan.layers_per_stage = std::move(pipeline.layers_per_stage);
      plan.replicas = std::move(pipeline.replicas);
    } else {
      plan.other_pipelines.push_back(std::move(pipeline));
    }
  }
  RETURN_IF_ERROR(CheckBatchSplit(plan, list->size()));
  return plan;
}

absl::StatusOr<SailorPlan> LoadSailorPlan(const std::filesystem::path& path) {
  ASSIGN_OR_RETURN(const json doc, ReadJson(path, path.string()));
  auto plan = SailorPlanFromJson(doc);
  if (!plan.ok()) return InFile(plan.status(), path.string());
  return plan;
}

namespace {

// One stored profile from Sailor's layer times and sizes at (mbs, tp).
::oobleck::ModelProfile ImportedProfile(const std::string& model, const std::string& gpu, int mbs,
                                        int tp, const std::vector<LayerTimes>& times,
                                        const std::vector<LayerSizes>& sizes) {
  ::oobleck::ModelProfile profile;
  profile.key = ProfileKey{model, gpu, mbs, tp};
  for (size_t l = 0; l < times.size(); ++l) {
    LayerProfile& layer = profile.layers.emplace_back();
    layer.forward_ms = times[l].forward_s * 1e3;
    layer.backward_ms = times[l].backward_s * 1e3;
    layer.update_ms = times[l].update_s * 1e3;
    layer.param_bytes = sizes[l].params_bytes;
    layer.activation_bytes = sizes[l].act_mem_bytes * mbs;
    layer.activation_output_bytes = sizes[l].act_output_bytes * mbs;
  }
  return profile;
}

absl::StatusOr<std::string> OnlyModel(const SailorData& data) {
  if (data.num_all_layers.size() != 1) {
    return InvalidField("training_config", absl::StrCat(" must name one model (got ",
                                                        data.num_all_layers.size(), ")"));
  }
  const std::string& name = data.num_all_layers.begin()->first;
  if (!data.profiles.contains(name)) {
    return InvalidField(Sub("profiles_tmp.json", name),
                        " is required (the training config's model)");
  }
  if (!data.layer_sizes.contains(name)) {
    return InvalidField(Sub("llm_info.json", name), " is required (the training config's model)");
  }
  return name;
}

}  // namespace

absl::StatusOr<SailorProfileImport> ProfilesFromSailorData(
    const SailorData& data, const std::string& model, const std::vector<std::string>& gpu_types,
    int microbatch_size) {
  ASSIGN_OR_RETURN(const std::string sailor_model, OnlyModel(data));
  const int layers = data.num_all_layers.at(sailor_model);
  const auto& by_gpu = data.profiles.at(sailor_model);
  const auto& sizes_by_tp = data.layer_sizes.at(sailor_model);
  for (size_t i = 0; i < gpu_types.size(); ++i) {
    if (!by_gpu.contains(gpu_types[i])) {
      std::vector<std::string> known;
      for (const auto& [gpu, unused] : by_gpu) known.push_back(gpu);
      return InvalidField(
          absl::StrCat("gpu_types[", i, "]"),
          absl::StrCat(" \"", gpu_types[i], "\" has no profile of ", sailor_model,
                       " in profiles_tmp.json (it has ", absl::StrJoin(known, ", "), ")"));
    }
  }
  SailorProfileImport out;
  for (const auto& [gpu, by_mbs] : by_gpu) {
    if (!gpu_types.empty() &&
        std::find(gpu_types.begin(), gpu_types.end(), gpu) == gpu_types.end()) {
      continue;
    }
    for (const auto& [mbs, by_tp] : by_mbs) {
      if (microbatch_size != 0 && mbs != microbatch_size) continue;
      for (const auto& [tp, times] : by_tp) {
        const std::string at = absl::StrCat(sailor_model, "/", gpu, "/", mbs, "/", tp);
        if (static_cast<int>(times.size()) != layers) {
          return InvalidField(Sub("profiles_tmp.json", at),
                              absl::StrCat(" has ", times.size(), " layers but the training ",
                                           "config says num_all_layers ", layers));
        }
        auto sizes = sizes_by_tp.find(tp);
        if (sizes == sizes_by_tp.end()) {
          out.skipped.push_back(absl::StrCat(gpu, "/mb", mbs, "/tp", tp, ": llm_info.json has no ",
                                             "layer sizes of ", sailor_model, " at tp ", tp));
          continue;
        }
        if (static_cast<int>(sizes->second.size()) != layers) {
          return InvalidField(Sub("llm_info.json", absl::StrCat(sailor_model, "/", tp)),
                              absl::StrCat(" has ", sizes->second.size(), " layers but the ",
                                           "training config says num_all_layers ", layers));
        }
        out.profiles.push_back(ImportedProfile(model.empty() ? sailor_model : model, gpu, mbs, tp,
                                               times, sizes->second));
      }
    }
  }
  if (out.profiles.empty()) {
    return InvalidField("profiles_tmp.json",
                        absl::StrCat(": no profile of ", sailor_model, " to store (micro-batch ",
                                     "size ", microbatch_size, ", ", out.skipped.size(),
                                     " skipped for lack of layer sizes)"));
  }
  return out;
}

bool HasSailorFields(const ::oobleck::ModelProfile& profile) {
  return std::any_of(profile.layers.begin(), profile.layers.end(), [](const LayerProfile& l) {
    return l.update_ms != 0 || l.activation_output_bytes != 0;
  });
}

SailorData SailorDataFromProfiles(
    const std::vector<std::shared_ptr<const ::oobleck::ModelProfile>>& profiles,
    const std::string& model) {
  SailorData data;
  for (const auto& profile : profiles) {
    const ProfileKey& key = profile->key;
    if (key.model != model || !HasSailorFields(*profile)) continue;
    auto& times = data.profiles[model][key.gpu_type][key.microbatch_size][key.tp];
    std::vector<LayerSizes> sizes;
    for (const LayerProfile& l : profile->layers) {
      times.push_back({l.forward_ms / 1e3, l.backward_ms / 1e3, l.update_ms / 1e3});
      sizes.push_back({l.param_bytes, l.activation_output_bytes / key.microbatch_size,
                       l.activation_bytes / key.microbatch_size});
    }
    // Every GPU type and micro-batch size holds the same sizes at one tp (llm_info.json's).
    data.layer_sizes[model].emplace(key.tp, std::move(sizes));
    data.num_all_layers[model] = profile->num_layers();
    if (profile->runtime_reserve_bytes) {
      auto [it, added] =
          data.runtime_reserve_bytes.emplace(key.gpu_type, *profile->runtime_reserve_bytes);
      if (!added) it->second = std::max(it->second, *profile->runtime_reserve_bytes);
    }
  }
  return data;
}

}  // namespace oobleck::fidelity
