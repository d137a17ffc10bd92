#include "core/profile.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <regex>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/cluster.h"
#include "core/field_path.h"
#include "core/file_reader.h"
#include "core/fnv1a.h"
#include "core/json_document.h"
#include "core/shown_value.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"

namespace oobleck {
namespace {

using json = nlohmann::json;

absl::StatusOr<json> ParseJson(std::string_view text, const std::string& file,
                               Interrupt* interrupt) {
  JsonLimits limits;
  limits.max_top_level_elements = kMaxLayersPerProfile;
  limits.interrupt = interrupt;
  absl::StatusOr<json> doc = ParseJsonDocument(text, limits);
  if (doc.status().code() == absl::StatusCode::kCancelled) {
    return Interrupt::Status("profile parse");
  }
  if (doc.status().code() == absl::StatusCode::kResourceExhausted) {
    return absl::ResourceExhaustedError(
        absl::StrCat(file, ": has more than ", kMaxLayersPerProfile,
                     " layers, the limit per profile (counted before parsing)"));
  }
  if (!doc.ok()) {
    return absl::Status(doc.status().code(), absl::StrCat(file, ": ", doc.status().message()));
  }
  if (!doc->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": expected a JSON array of layers"));
  }
  return doc;
}

absl::StatusOr<double> NonNegative(const json& v, const std::string& where) {
  if (!v.is_number()) {
    // The value itself is not echoed: it may be any text of a server-side file.
    return absl::InvalidArgumentError(
        absl::StrCat(where, " must be a number (got a JSON ", v.type_name(), ")"));
  }
  double d = v.get<double>();
  if (!std::isfinite(d) || d < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " must be a finite number >= 0 (got ", v.dump(), ")"));
  }
  return d;
}

// Parses [{"<count>": ms}, ...] into per-layer maps.
// Whether `interrupt` (may be null) stopped the parse, polled at step `step` (every
// Interrupt::kStride steps; 0 always polls).
bool ParseStopped(Interrupt* interrupt, int64_t step) {
  return interrupt != nullptr && interrupt->Every(step);
}
constexpr char kParseWhat[] = "profile parse";

absl::Status ParseAllreduce(std::string_view text, const std::string& file, size_t num_layers,
                            std::map<int, double> LayerProfile::*field,
                            std::vector<LayerProfile>& layers, Interrupt* interrupt) {
  if (ParseStopped(interrupt, 0)) return Interrupt::Status(kParseWhat);
  ASSIGN_OR_RETURN(auto doc, ParseJson(text, file, interrupt));
  if (doc.size() != num_layers) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: has %d layers but the mb file has %d", file, doc.size(), num_layers));
  }
  for (size_t l = 0; l < num_layers; ++l) {
    if (ParseStopped(interrupt, static_cast<int64_t>(l))) return Interrupt::Status(kParseWhat);
    const json& entry = (doc)[l];
    if (!entry.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: layer %d must be an object {\"<count>\": ms}", file, l));
    }
    for (const auto& [key, value] : entry.items()) {
      int count = 0;
      // In-node keys may be 0 (a convention counting GPUs minus one); what they may be is
      // NormalizeAllreduceInNode's to say, with the convention.
      const int least = field == &LayerProfile::allreduce_in_node_ms ? INT_MIN : 1;
      if (!absl::SimpleAtoi(key, &count) || count < least) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: layer %d has a key that is not %s", file, l,
                            least == 1 ? "a positive integer count" : "an integer"));
      }
      ASSIGN_OR_RETURN(
          auto ms, NonNegative(value, absl::StrFormat("%s: layer %d key \"%d\"", file, l, count)));
      (layers[l].*field)[count] = ms;
    }
  }
  return absl::OkStatus();
}

// The one mb<m>.json file of a directory, by its name as it is written (mb01.json stays
// mb01.json in every message).
absl::StatusOr<std::string> FindMicrobatchFile(const ScopedFd& dir, const std::string& shown_dir) {
  static const std::regex kMbFile(R"(mb([0-9]{1,9})\.json)");
  std::vector<std::string> found;
  // fdopendir takes the descriptor over; a duplicate keeps `dir` open for the reads.
  const int copy = dup(dir.get());
  DIR* listing = copy >= 0 ? fdopendir(copy) : nullptr;
  if (listing == nullptr) {
    if (copy >= 0) close(copy);
    return absl::NotFoundError(absl::StrCat("cannot list ", shown_dir));
  }
  while (const dirent* entry = readdir(listing)) {
    if (std::regex_match(entry->d_name, kMbFile)) found.push_back(entry->d_name);
  }
  closedir(listing);
  if (found.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        shown_dir, " has ", found.size(), " mb<m>.json files; give microbatch_size to pick one"));
  }
  return found[0];
}

// Positive but below kMinPositiveProfileValue (a subnormal, say).
bool TooSmall(double v) { return v > 0 && v < kMinPositiveProfileValue; }

// Every value of layer i finite, >= 0, and 0 or at least kMinPositiveProfileValue.
absl::Status CheckLayerValues(const std::string& name, size_t i, const LayerProfile& l) {
  const std::pair<const char*, double> values[] = {
      {"forward_ms", l.forward_ms},   {"backward_ms", l.backward_ms},
      {"param_bytes", l.param_bytes}, {"activation_bytes", l.activation_bytes},
      {"update_ms", l.update_ms},     {"activation_output_bytes", l.activation_output_bytes}};
  for (const auto& [field, v] : values) {
    if (!std::isfinite(v) || v < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("profile %s: layer %d %s must be a finite number >= 0 (got %s)", name, i,
                          field, ShowNumber(v)));
    }
    if (TooSmall(v)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("profile %s: layer %d %s must be 0 or at least %g (got %s)", name, i,
                          field, kMinPositiveProfileValue, ShowNumber(v)));
    }
  }
  for (const auto* m : {&l.allreduce_in_node_ms, &l.allreduce_across_nodes_ms}) {
    const char* which =
        m == &l.allreduce_in_node_ms ? "allreduce_in_node" : "allreduce_across_nodes";
    for (const auto& [k, v] : *m) {
      if (k < 1 || !std::isfinite(v) || v < 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "profile %s: layer %d all-reduce key \"%d\" must be a count >= 1 with a finite "
            "time >= 0 (got %s)",
            name, i, k, ShowNumber(v)));
      }
      if (TooSmall(v)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "profile %s: layer %d %s key \"%d\" must be 0 or at least %g ms (got %s)", name, i,
            which, k, kMinPositiveProfileValue, ShowNumber(v)));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view AllreduceKeyName(AllreduceKey key) {
  return key == AllreduceKey::kGpus ? "ALLREDUCE_KEY_GPUS" : "ALLREDUCE_KEY_GPUS_MINUS_ONE";
}

absl::StatusOr<int> InNodeKeyGpus(AllreduceKey convention, int64_t key) {
  const int offset = convention == AllreduceKey::kGpusMinusOne ? 1 : 0;
  const int64_t gpus = key + offset;  // int64: a key near INT_MAX must not wrap
  if (gpus < 1 || gpus > kMaxGpusPerNode) {
    return absl::InvalidArgumentError(absl::StrFormat(
        " key %d is not a stage's GPU count%s under %s (keys %d to %d stand for 1 to %d GPUs)", key,
        offset == 1 ? " minus one" : "", AllreduceKeyName(convention), 1 - offset,
        kMaxGpusPerNode - offset, kMaxGpusPerNode));
  }
  return static_cast<int>(gpus);
}

absl::Status NormalizeAllreduceInNode(AllreduceKey convention,
                                      absl::FunctionRef<std::string(int layer)> where,
                                      std::vector<LayerProfile>* layers) {
  for (size_t l = 0; l < layers->size(); ++l) {
    std::map<int, double>& table = (*layers)[l].allreduce_in_node_ms;
    std::map<int, double> by_gpus;
    for (const auto& [key, ms] : table) {
      absl::StatusOr<int> gpus = InNodeKeyGpus(convention, key);
      if (!gpus.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where(static_cast<int>(l)), gpus.status().message()));
      }
      by_gpus.emplace_hint(by_gpus.end(), *gpus, ms);
    }
    table = std::move(by_gpus);
  }
  return absl::OkStatus();
}

std::string ProfileKey::ToString() const {
  std::string out = absl::StrCat(model, "/", gpu_type, "/mb", microbatch_size);
  if (tp != 1) absl::StrAppend(&out, "/tp", tp);
  return out;
}

std::string ModelProfile::Fingerprint() const {
  // FNV-1a over the exact bit patterns of every value: equal content, equal fingerprint.
  uint64_t h = kFnv1a64Basis;
  auto mix = [&h](const void* data, size_t n) { h = Fnv1a64(data, n, h); };
  for (const LayerProfile& l : layers) {
    for (double v : {l.forward_ms, l.backward_ms, l.param_bytes, l.activation_bytes}) {
      mix(&v, sizeof v);
    }
    // Mixed only when given, so a profile without them keeps the fingerprint (and the
    // cache keys) it had before they existed.
    if (l.update_ms != 0 || l.activation_output_bytes != 0) {
      for (double v : {l.update_ms, l.activation_output_bytes}) mix(&v, sizeof v);
    }
    for (const auto* m : {&l.allreduce_in_node_ms, &l.allreduce_across_nodes_ms}) {
      size_t n = m->size();
      mix(&n, sizeof n);
      for (const auto& [k, v] : *m) {
        mix(&k, sizeof k);
        mix(&v, sizeof v);
      }
    }
  }
  return absl::StrFormat("%016x", h);
}

std::vector<int> ModelProfile::AllreduceInNodeGpus() const {
  std::vector<int> gpus = {1};
  if (layers.empty()) return gpus;
  for (const auto& [g, ms] : layers[0].allreduce_in_node_ms) {
    if (g <= 1) continue;
    bool everywhere = true;
    for (const LayerProfile& l : layers) everywhere &= l.allreduce_in_node_ms.count(g) > 0;
    if (everywhere) gpus.push_back(g);
  }
  return gpus;
}

absl::Status ValidateRuntimeReserve(double bytes, absl::string_view field) {
  if (std::isfinite(bytes) && bytes >= 0) return absl::OkStatus();
  return InvalidValue(field, "finite and >= 0 bytes", bytes);
}

absl::Status ValidateProfile(const ModelProfile& profile) {
  const std::string name = profile.key.ToString();
  if (profile.key.model.empty()) return absl::InvalidArgumentError("profile model is empty");
  if (profile.key.gpu_type.empty()) return absl::InvalidArgumentError("profile gpu_type is empty");
  if (profile.key.microbatch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("profile ", name,
                                                   ": microbatch_size must be >= 1 (got ",
                                                   profile.key.microbatch_size, ")"));
  }
  if (profile.key.tp < 1 || profile.key.tp > kMaxGpusPerNode) {
    return absl::InvalidArgumentError(absl::StrCat(
        "profile ", name, ": tp must be in [1, ", kMaxGpusPerNode, "] (got ", profile.key.tp, ")"));
  }
  if (profile.layers.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("profile ", name, " has no layers"));
  }
  if (profile.runtime_reserve_bytes) {
    RETURN_IF_ERROR(WithMessagePrefix(
        ValidateRuntimeReserve(*profile.runtime_reserve_bytes, "runtime_reserve_bytes"),
        absl::StrCat("profile ", name, ": ")));
  }
  std::set<int> in_keys, across_keys;
  for (const LayerProfile& l : profile.layers) {
    for (const auto& [k, v] : l.allreduce_in_node_ms) in_keys.insert(k);
    for (const auto& [k, v] : l.allreduce_across_nodes_ms) across_keys.insert(k);
  }
  for (size_t i = 0; i < profile.layers.size(); ++i) {
    const LayerProfile& l = profile.layers[i];
    RETURN_IF_ERROR(CheckLayerValues(name, i, l));
    for (int k : in_keys) {
      if (!l.allreduce_in_node_ms.count(k)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "profile %s: layer %d lacks allreduce_in_node key \"%d\" that other layers have", name,
            i, k));
      }
    }
    for (int k : across_keys) {
      if (!l.allreduce_across_nodes_ms.count(k)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "profile %s: layer %d lacks allreduce_across_nodes key \"%d\" that other layers "
            "have",
            name, i, k));
      }
    }
  }
  // Sums are what the cost model forms: each must stay finite, or every time and memory
  // figure derived from it would be inf (and explained by a false reason).
  double sums[4] = {0, 0, 0, 0};
  const char* const kSummed[4] = {"forward_ms", "backward_ms", "param_bytes", "activation_bytes"};
  for (size_t i = 0; i < profile.layers.size(); ++i) {
    const LayerProfile& l = profile.layers[i];
    const double values[4] = {l.forward_ms, l.backward_ms, l.param_bytes, l.activation_bytes};
    for (int k = 0; k < 4; ++k) {
      sums[k] += values[k];
      if (!std::isfinite(sums[k])) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "profile %s: the layers' %s add up to more than a double can hold (at layer %d)", name,
            kSummed[k], i));
      }
    }
  }
  // A model that takes no time would plan to an iteration time of 0 (and an infinite
  // speed-up): some layer must compute.
  if (!(sums[0] + sums[1] > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "profile %s: every layer's forward_ms and backward_ms is 0; a profile needs the time "
        "its layers compute",
        name));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LayerProfile>> ParseOobleckProfile(
    std::string_view mb_json, std::string_view allreduce_in_node_json,
    std::string_view allreduce_across_nodes_json, std::string_view source_view,
    std::string_view mb_file_name, Interrupt* interrupt, AllreduceKey convention) {
  const std::string source(source_view);
  const std::string mb_file = absl::StrCat(source, "/", std::string(mb_file_name));
  ASSIGN_OR_RETURN(auto mb, ParseJson(mb_json, mb_file, interrupt));
  if (mb.empty()) return absl::InvalidArgumentError(absl::StrCat(mb_file, ": has no layers"));
  std::vector<LayerProfile> layers(mb.size());
  for (size_t l = 0; l < mb.size(); ++l) {
    if (ParseStopped(interrupt, static_cast<int64_t>(l))) return Interrupt::Status(kParseWhat);
    const json& entry = (mb)[l];
    if (!entry.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: layer %d must be an object", mb_file, l));
    }
    for (const char* key : {"forward", "backward", "mem_required"}) {
      if (!entry.contains(key)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: layer %d lacks key \"%s\"", mb_file, l, key));
      }
    }
    ASSIGN_OR_RETURN(
        auto fwd,
        NonNegative(entry["forward"], absl::StrFormat("%s: layer %d \"forward\"", mb_file, l)));
    ASSIGN_OR_RETURN(
        auto bwd,
        NonNegative(entry["backward"], absl::StrFormat("%s: layer %d \"backward\"", mb_file, l)));
    const json& mem = entry["mem_required"];
    if (!mem.is_array() || mem.size() != 2) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: layer %d \"mem_required\" must be [param_bytes, activation_bytes]", mb_file, l));
    }
    ASSIGN_OR_RETURN(
        auto param,
        NonNegative(mem[0], absl::StrFormat("%s: layer %d \"mem_required\"[0]", mb_file, l)));
    ASSIGN_OR_RETURN(
        auto act,
        NonNegative(mem[1], absl::StrFormat("%s: layer %d \"mem_required\"[1]", mb_file, l)));
    layers[l].forward_ms = fwd;
    layers[l].backward_ms = bwd;
    layers[l].param_bytes = param;
    layers[l].activation_bytes = act;
  }
  const std::string in_node_file = absl::StrCat(source, "/allreduce_in_node.json");
  RETURN_IF_ERROR(ParseAllreduce(allreduce_in_node_json, in_node_file, layers.size(),
                                 &LayerProfile::allreduce_in_node_ms, layers, interrupt));
  RETURN_IF_ERROR(NormalizeAllreduceInNode(
      convention, [&](int l) { return absl::StrFormat("%s: layer %d", in_node_file, l); },
      &layers));
  RETURN_IF_ERROR(ParseAllreduce(
      allreduce_across_nodes_json, absl::StrCat(source, "/allreduce_across_nodes.json"),
      layers.size(), &LayerProfile::allreduce_across_nodes_ms, layers, interrupt));
  return layers;
}

absl::StatusOr<ModelProfile> LoadOobleckProfileDir(const std::string& dir, const std::string& model,
                                                   const std::string& gpu_type, int microbatch_size,
                                                   const ConfinedRoot* root,
                                                   AllreduceKey convention) {
  if (microbatch_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("microbatch_size must be >= 0 (got ", microbatch_size, ")"));
  }
  const std::string shown_dir = absl::StrCat("profile directory ", Quote(dir));
  // The directory is opened once and every file is read relative to that descriptor, so
  // the files all come from the directory that was checked (a path looked up again could
  // meanwhile lead elsewhere).
  ScopedFd dir_fd;
  if (root != nullptr) {
    ASSIGN_OR_RETURN(dir_fd, root->OpenDirectory(dir, shown_dir));
  } else {
    dir_fd = ScopedFd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir_fd.get() < 0) return absl::NotFoundError(absl::StrCat(shown_dir, " does not exist"));
  }
  // The file is read, and named in messages, as it is named (mb01.json is micro-batch
  // size 1, but not mb1.json).
  std::string mb_name = absl::StrCat("mb", microbatch_size, ".json");
  if (microbatch_size == 0) {
    ASSIGN_OR_RETURN(mb_name, FindMicrobatchFile(dir_fd, shown_dir));
    microbatch_size = std::stoi(mb_name.substr(2, mb_name.size() - 7));
  }
  // Each file is confined again: a symlink inside the directory may point anywhere.
  auto read = [&](const std::string& name) -> absl::StatusOr<std::string> {
    const std::string shown = absl::StrCat(dir, "/", name);
    if (root == nullptr) return ReadOpenedFile(OpenForReading(dir_fd.get(), name), shown);
    ASSIGN_OR_RETURN(ScopedFd file, root->OpenFileIn(dir_fd, name, shown));
    return ReadOpenedFile(file, shown);
  };
  ASSIGN_OR_RETURN(auto mb, read(mb_name));
  ASSIGN_OR_RETURN(auto in_node, read("allreduce_in_node.json"));
  ASSIGN_OR_RETURN(auto across, read("allreduce_across_nodes.json"));
  ASSIGN_OR_RETURN(auto layers, ParseOobleckProfile(mb, in_node, across, dir, mb_name,
                                                    /*interrupt=*/nullptr, convention));
  ModelProfile profile{{model, gpu_type, microbatch_size}, std::move(layers), convention};
  RETURN_IF_ERROR(ValidateProfile(profile));
  return profile;
}

ModelProfile DeriveProfile(const ModelProfile& measured, const std::string& gpu_type,
                           double relative_speed) {
  ModelProfile derived = measured;
  derived.key.gpu_type = gpu_type;
  derived.runtime_reserve_bytes.reset();  // a reserve is the measured GPU type's only
  for (LayerProfile& l : derived.layers) {
    l.forward_ms /= relative_speed;
    l.backward_ms /= relative_speed;
  }
  return derived;
}

}  // namespace oobleck
