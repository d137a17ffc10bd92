#include "core/profile.h"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <regex>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/file_reader.h"
#include "core/fnv1a.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"

namespace oobleck {
namespace {

using json = nlohmann::json;

// Counts the elements of a top-level JSON array without building anything, and stops as
// soon as there are more than `limit`: a huge document is refused before it is parsed.
class TopLevelCounter : public nlohmann::json_sax<json> {
 public:
  explicit TopLevelCounter(int64_t limit) : limit_(limit) {}
  int64_t count() const { return count_; }
  bool over() const { return count_ > limit_; }

  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override { return Open(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  bool Value() {
    if (depth_ == 1) ++count_;
    return !over();
  }
  bool Open() {
    const bool ok = Value();
    ++depth_;
    return ok;
  }
  bool Close() {
    --depth_;
    return true;
  }
  int64_t limit_;
  int64_t count_ = 0;
  int depth_ = 0;
};

absl::StatusOr<json> ParseJson(std::string_view text, const std::string& file) {
  TopLevelCounter counter(kMaxLayersPerProfile);
  json::sax_parse(text, &counter, nlohmann::detail::input_format_t::json, /*strict=*/false);
  if (counter.over()) {
    return absl::ResourceExhaustedError(
        absl::StrCat(file, ": has more than ", kMaxLayersPerProfile,
                     " layers, the limit per profile (counted before parsing)"));
  }
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(file, ": not valid JSON"));
  if (!doc.is_array()) {
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
absl::Status ParseAllreduce(std::string_view text, const std::string& file, size_t num_layers,
                            std::map<int, double> LayerProfile::*field,
                            std::vector<LayerProfile>& layers) {
  ASSIGN_OR_RETURN(auto doc, ParseJson(text, file));
  if (doc.size() != num_layers) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: has %d layers but the mb file has %d", file, doc.size(), num_layers));
  }
  for (size_t l = 0; l < num_layers; ++l) {
    const json& entry = (doc)[l];
    if (!entry.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: layer %d must be an object {\"<count>\": ms}", file, l));
    }
    for (const auto& [key, value] : entry.items()) {
      int count = 0;
      if (!absl::SimpleAtoi(key, &count) || count < 1) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: layer %d has a key that is not a positive integer count", file, l));
      }
      ASSIGN_OR_RETURN(
          auto ms, NonNegative(value, absl::StrFormat("%s: layer %d key \"%d\"", file, l, count)));
      (layers[l].*field)[count] = ms;
    }
  }
  return absl::OkStatus();
}


}  // namespace

std::string ProfileKey::ToString() const {
  return absl::StrCat(model, "/", gpu_type, "/mb", microbatch_size);
}

std::string ModelProfile::Fingerprint() const {
  // FNV-1a over the exact bit patterns of every value: equal content, equal fingerprint.
  uint64_t h = kFnv1a64Basis;
  auto mix = [&h](const void* data, size_t n) { h = Fnv1a64(data, n, h); };
  for (const LayerProfile& l : layers) {
    for (double v : {l.forward_ms, l.backward_ms, l.param_bytes, l.activation_bytes}) {
      mix(&v, sizeof v);
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

absl::Status ValidateProfile(const ModelProfile& profile) {
  const std::string name = profile.key.ToString();
  if (profile.key.model.empty()) return absl::InvalidArgumentError("profile model is empty");
  if (profile.key.gpu_type.empty()) return absl::InvalidArgumentError("profile gpu_type is empty");
  if (profile.key.microbatch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "profile ", name, ": microbatch_size must be >= 1 (got ", profile.key.microbatch_size, ")"));
  }
  if (profile.layers.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("profile ", name, " has no layers"));
  }
  std::set<int> in_keys, across_keys;
  for (const LayerProfile& l : profile.layers) {
    for (const auto& [k, v] : l.allreduce_in_node_ms) in_keys.insert(k);
    for (const auto& [k, v] : l.allreduce_across_nodes_ms) across_keys.insert(k);
  }
  for (size_t i = 0; i < profile.layers.size(); ++i) {
    const LayerProfile& l = profile.layers[i];
    const std::pair<const char*, double> values[] = {{"forward_ms", l.forward_ms},
                                                     {"backward_ms", l.backward_ms},
                                                     {"param_bytes", l.param_bytes},
                                                     {"activation_bytes", l.activation_bytes}};
    for (const auto& [field, v] : values) {
      if (!std::isfinite(v) || v < 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "profile %s: layer %d %s must be a finite number >= 0 (got %g)", name, i, field, v));
      }
    }
    for (const auto* m : {&l.allreduce_in_node_ms, &l.allreduce_across_nodes_ms}) {
      for (const auto& [k, v] : *m) {
        if (k < 1 || !std::isfinite(v) || v < 0) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "profile %s: layer %d all-reduce key \"%d\" must be a count >= 1 with a finite "
              "time >= 0 (got %g)",
              name, i, k, v));
        }
      }
    }
    for (int k : in_keys) {
      if (!l.allreduce_in_node_ms.count(k)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "profile %s: layer %d lacks allreduce_in_node key \"%d\" that other layers have",
            name, i, k));
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
            "profile %s: the layers' %s add up to more than a double can hold (at layer %d)",
            name, kSummed[k], i));
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
    std::string_view allreduce_across_nodes_json, std::string_view source_view) {
  const std::string source(source_view);
  const std::string mb_file = absl::StrCat(source, "/mb<m>.json");
  ASSIGN_OR_RETURN(auto mb, ParseJson(mb_json, mb_file));
  if (mb.empty()) return absl::InvalidArgumentError(absl::StrCat(mb_file, ": has no layers"));
  std::vector<LayerProfile> layers(mb.size());
  for (size_t l = 0; l < mb.size(); ++l) {
    const json& entry = (mb)[l];
    if (!entry.is_object()) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: layer %d must be an object", mb_file, l));
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
  RETURN_IF_ERROR(ParseAllreduce(allreduce_in_node_json,
                                 absl::StrCat(source, "/allreduce_in_node.json"), layers.size(),
                                 &LayerProfile::allreduce_in_node_ms, layers));
  RETURN_IF_ERROR(ParseAllreduce(allreduce_across_nodes_json,
                                 absl::StrCat(source, "/allreduce_across_nodes.json"),
                                 layers.size(), &LayerProfile::allreduce_across_nodes_ms, layers));
  return layers;
}

absl::StatusOr<ModelProfile> LoadOobleckProfileDir(const std::string& dir,
                                                   const std::string& model,
                                                   const std::string& gpu_type,
                                                   int microbatch_size, const ConfinedRoot* root) {
  namespace fs = std::filesystem;
  if (microbatch_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("microbatch_size must be >= 0 (got ", microbatch_size, ")"));
  }
  const std::string shown_dir = absl::StrCat("profile directory \"", dir, "\"");
  fs::path base(dir);
  if (root != nullptr) {
    ASSIGN_OR_RETURN(base, root->Resolve(dir, shown_dir));
  }
  std::error_code ec;
  if (!fs::is_directory(base, ec)) {
    return root != nullptr
               ? absl::NotFoundError(
                     absl::StrCat(shown_dir, " is not a readable path under the load root"))
               : absl::NotFoundError(absl::StrCat(shown_dir, " does not exist"));
  }
  if (microbatch_size == 0) {
    static const std::regex kMbFile(R"(mb([0-9]{1,9})\.json)");
    std::vector<int> found;
    for (const auto& entry : fs::directory_iterator(base, ec)) {
      std::smatch m;
      const std::string name = entry.path().filename().string();
      if (std::regex_match(name, m, kMbFile)) found.push_back(std::stoi(m[1].str()));
    }
    if (found.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          shown_dir, " has ", found.size(), " mb<m>.json files; give microbatch_size to pick one"));
    }
    microbatch_size = found[0];
  }
  // Each file is confined again: a symlink inside the directory may point anywhere.
  auto read = [&](const std::string& name) -> absl::StatusOr<std::string> {
    const std::string shown = absl::StrCat(dir, "/", name);
    fs::path path = base / name;
    if (root != nullptr) {
      ASSIGN_OR_RETURN(fs::path real, root->Resolve(path, shown));
      path = std::move(real);
    }
    return ReadRegularFile(path, shown);
  };
  ASSIGN_OR_RETURN(auto mb, read(absl::StrCat("mb", microbatch_size, ".json")));
  ASSIGN_OR_RETURN(auto in_node, read("allreduce_in_node.json"));
  ASSIGN_OR_RETURN(auto across, read("allreduce_across_nodes.json"));
  ASSIGN_OR_RETURN(auto layers, ParseOobleckProfile(mb, in_node, across, dir));
  ModelProfile profile{{model, gpu_type, microbatch_size}, std::move(layers)};
  RETURN_IF_ERROR(ValidateProfile(profile));
  return profile;
}

ModelProfile DeriveProfile(const ModelProfile& measured, const std::string& gpu_type,
                           double relative_speed) {
  ModelProfile derived = measured;
  derived.key.gpu_type = gpu_type;
  for (LayerProfile& l : derived.layers) {
    l.forward_ms /= relative_speed;
    l.backward_ms /= relative_speed;
  }
  return derived;
}

}  // namespace oobleck
