#include "server/etcd_template_store.h"

#include <climits>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/fnv1a.h"
#include "core/json_document.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"

namespace oobleck::server {
namespace {

using json = nlohmann::json;

constexpr char kFormat[] = "oobleck-planner-template";
constexpr int kVersion = 2;  // 2: stages carry p2p_out_ms
// A new lease once the current one has lived this share of its TTL.
constexpr double kLeaseRenewShare = 0.9;

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

// Field readers naming the field on error.
absl::StatusOr<const json*> Field(const json& object, const char* name, const std::string& where) {
  if (!object.is_object()) return Invalid(absl::StrCat(where, " must be an object"));
  auto it = object.find(name);
  if (it == object.end()) return Invalid(absl::StrCat(where, ".", name, " is missing"));
  return &*it;
}

absl::StatusOr<int> IntField(const json& object, const char* name, const std::string& where) {
  ASSIGN_OR_RETURN(const json* field, Field(object, name, where));
  if (!field->is_number_integer() || field->get<int64_t>() < INT_MIN ||
      field->get<int64_t>() > INT_MAX) {
    return Invalid(absl::StrCat(where, ".", name, " must be an integer (got ", field->dump(), ")"));
  }
  return static_cast<int>(field->get<int64_t>());
}

absl::StatusOr<double> NumberField(const json& object, const char* name, const std::string& where) {
  ASSIGN_OR_RETURN(const json* field, Field(object, name, where));
  if (!field->is_number()) {
    return Invalid(absl::StrCat(where, ".", name, " must be a number (got ", field->dump(), ")"));
  }
  return field->get<double>();
}

absl::StatusOr<std::vector<int>> IntsField(const json& object, const char* name,
                                           const std::string& where) {
  ASSIGN_OR_RETURN(const json* field, Field(object, name, where));
  if (!field->is_array()) return Invalid(absl::StrCat(where, ".", name, " must be an array"));
  std::vector<int> out;
  for (const json& item : *field) {
    if (!item.is_number_integer() || item.get<int64_t>() < INT_MIN ||
        item.get<int64_t>() > INT_MAX) {
      return Invalid(absl::StrCat(where, ".", name, " must hold integers (got ", item.dump(), ")"));
    }
    out.push_back(static_cast<int>(item.get<int64_t>()));
  }
  return out;
}

absl::StatusOr<Stage> ParseStage(const json& in, const std::string& where) {
  Stage stage;
  for (auto [name, field] :
       {std::pair{"layer_begin", &Stage::layer_begin}, std::pair{"layer_end", &Stage::layer_end},
        std::pair{"node_index", &Stage::node_index}, std::pair{"node_type", &Stage::node_type},
        std::pair{"gpus", &Stage::gpus}}) {
    ASSIGN_OR_RETURN(stage.*field, IntField(in, name, where));
  }
  for (auto [name, field] :
       {std::pair{"forward_ms", &Stage::forward_ms}, std::pair{"backward_ms", &Stage::backward_ms},
        std::pair{"cost_ms", &Stage::cost_ms},
        std::pair{"memory_bytes_per_gpu", &Stage::memory_bytes_per_gpu},
        std::pair{"p2p_out_ms", &Stage::p2p_out_ms}}) {
    ASSIGN_OR_RETURN(double value, NumberField(in, name, where));
    stage.*field = value;
  }
  return stage;
}

}  // namespace

std::string SerializeSharedTemplate(const std::string& key, const MixResult& result) {
  json stages = json::array();
  for (const Stage& s : result.best.stages) {
    stages.push_back({{"layer_begin", s.layer_begin},
                      {"layer_end", s.layer_end},
                      {"node_index", s.node_index},
                      {"node_type", s.node_type},
                      {"gpus", s.gpus},
                      {"forward_ms", s.forward_ms},
                      {"backward_ms", s.backward_ms},
                      {"cost_ms", s.cost_ms},
                      {"memory_bytes_per_gpu", s.memory_bytes_per_gpu},
                      {"p2p_out_ms", s.p2p_out_ms}});
  }
  json out = {{"format", kFormat},
              {"version", kVersion},
              {"key", key},
              {"result",
               {{"mix", result.mix},
                {"feasible", result.feasible},
                {"infeasible_reason", result.infeasible_reason},
                {"best",
                 {{"mix", result.best.mix},
                  {"node_order", result.best.node_order},
                  {"stages", std::move(stages)},
                  {"iteration_time_ms", result.best.iteration_time_ms}}}}}};
  return out.dump();
}

absl::StatusOr<MixResult> ParseSharedTemplate(const std::string& text, const std::string& key) {
  ASSIGN_OR_RETURN(const json in, ParseJsonDocument(text));
  ASSIGN_OR_RETURN(const json* format, Field(in, "format", "value"));
  if (*format != kFormat) return Invalid(absl::StrCat("value.format must be \"", kFormat, "\""));
  ASSIGN_OR_RETURN(int version, IntField(in, "version", "value"));
  if (version != kVersion) {
    return Invalid(absl::StrCat("value.version ", version, " is not ", kVersion));
  }
  ASSIGN_OR_RETURN(const json* stored_key, Field(in, "key", "value"));
  if (!stored_key->is_string() || stored_key->get<std::string>() != key) {
    return Invalid("value.key is another cache key (hash collision or a foreign value)");
  }
  ASSIGN_OR_RETURN(const json* result_json, Field(in, "result", "value"));
  const json& r = *result_json;
  MixResult result;
  ASSIGN_OR_RETURN(result.mix, IntsField(r, "mix", "value.result"));
  ASSIGN_OR_RETURN(const json* feasible, Field(r, "feasible", "value.result"));
  if (!feasible->is_boolean()) return Invalid("value.result.feasible must be a boolean");
  result.feasible = feasible->get<bool>();
  ASSIGN_OR_RETURN(const json* reason, Field(r, "infeasible_reason", "value.result"));
  if (!reason->is_string()) return Invalid("value.result.infeasible_reason must be a string");
  result.infeasible_reason = reason->get<std::string>();
  ASSIGN_OR_RETURN(const json* best_json, Field(r, "best", "value.result"));
  const json& best = *best_json;
  ASSIGN_OR_RETURN(std::vector<int> best_mix, IntsField(best, "mix", "value.result.best"));
  result.best.mix = std::move(best_mix);
  ASSIGN_OR_RETURN(std::vector<int> order, IntsField(best, "node_order", "value.result.best"));
  result.best.node_order = std::move(order);
  ASSIGN_OR_RETURN(double time_ms, NumberField(best, "iteration_time_ms", "value.result.best"));
  result.best.iteration_time_ms = time_ms;
  ASSIGN_OR_RETURN(const json* stages, Field(best, "stages", "value.result.best"));
  if (!stages->is_array()) return Invalid("value.result.best.stages must be an array");
  for (size_t i = 0; i < stages->size(); ++i) {
    ASSIGN_OR_RETURN(Stage stage,
                     ParseStage((*stages)[i], absl::StrCat("value.result.best.stages[", i, "]")));
    result.best.stages.push_back(stage);
  }
  return result;
}

EtcdTemplateStore::EtcdTemplateStore(EtcdClient* client, const std::string& prefix,
                                     SharedCacheOptions options, LogFn log)
    : client_(client),
      prefix_(absl::StrCat(prefix, "templates/")),
      options_(options),
      log_(std::move(log)),
      publisher_([this] { PublishLoop(); }) {}

EtcdTemplateStore::~EtcdTemplateStore() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  publisher_.join();
}

std::string EtcdTemplateStore::KeyOf(const std::string& cache_key) const {
  // Two FNV-1a runs from different bases: 128 bits, so collisions (which the stored full
  // key would catch anyway) do not evict each other in practice.
  return absl::StrFormat("%s%016x%016x", prefix_, Fnv1a64(cache_key),
                         Fnv1a64(cache_key, 0x9e3779b97f4a7c15ULL));
}

SharedCacheStats EtcdTemplateStore::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void EtcdTemplateStore::Report(const std::string& problem) {
  {
    absl::MutexLock lock(&mu_);
    ++stats_.errors;
    if (problem == last_problem_) return;
    last_problem_ = problem;
  }
  const std::string line = absl::StrCat("shared template cache: ", problem);
  if (log_) {
    log_(line);
  } else {
    std::cerr << line << std::endl;
  }
}

std::vector<std::shared_ptr<const MixResult>> EtcdTemplateStore::FindAll(
    const std::vector<std::string>& keys) {
  std::vector<std::shared_ptr<const MixResult>> found(keys.size());
  if (keys.empty()) return found;
  std::vector<std::string> etcd_keys;
  for (const std::string& key : keys) etcd_keys.push_back(KeyOf(key));
  absl::StatusOr<std::vector<std::optional<std::string>>> values =
      client_->GetMany(etcd_keys, options_.lookup_timeout);
  if (!values.ok()) {
    Report(std::string(values.status().message()));
    absl::MutexLock lock(&mu_);
    stats_.misses += static_cast<int64_t>(keys.size());
    return found;
  }
  int64_t hits = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!(*values)[i].has_value()) continue;
    absl::StatusOr<MixResult> parsed = ParseSharedTemplate(*(*values)[i], keys[i]);
    if (!parsed.ok()) {
      Report(absl::StrCat(etcd_keys[i], ": ", parsed.status().ToString(), " (a miss)"));
      continue;
    }
    found[i] = std::make_shared<const MixResult>(*std::move(parsed));
    ++hits;
  }
  absl::MutexLock lock(&mu_);
  stats_.hits += hits;
  stats_.misses += static_cast<int64_t>(keys.size()) - hits;
  return found;
}

void EtcdTemplateStore::Publish(const std::string& key, std::shared_ptr<const MixResult> result) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || pending_.size() >= kMaxPendingPublishes) {
    ++stats_.skipped;
    return;
  }
  pending_.emplace_back(key, std::move(result));
}

void EtcdTemplateStore::PublishLoop() {
  auto has_work = [this]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !pending_.empty(); };
  while (true) {
    std::pair<std::string, std::shared_ptr<const MixResult>> item;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&has_work));
      if (stopping_) return;
      item = std::move(pending_.front());
      pending_.pop_front();
    }
    const std::string value = SerializeSharedTemplate(item.first, *item.second);
    const int64_t bytes = static_cast<int64_t>(value.size());
    const absl::Time now = absl::Now();
    if (lease_ == 0 || now - lease_granted_ >= options_.ttl * kLeaseRenewShare) {
      absl::StatusOr<int64_t> lease = client_->GrantLease(options_.ttl);
      if (!lease.ok()) {
        Report(std::string(lease.status().message()));
        continue;
      }
      lease_ = *lease;
      lease_granted_ = now;
      lease_bytes_ = 0;
    }
    if (bytes > kMaxSharedTemplateBytes || lease_bytes_ + bytes > options_.budget_bytes) {
      absl::MutexLock lock(&mu_);
      ++stats_.skipped;
      continue;
    }
    absl::StatusOr<EtcdWrite> written =
        client_->Put(KeyOf(item.first), value, /*overwrite=*/true, lease_);
    if (!written.ok()) {
      // An expired lease (e.g. after a long outage) is replaced on the next try.
      lease_ = 0;
      Report(std::string(written.status().message()));
      continue;
    }
    lease_bytes_ += bytes;
    absl::MutexLock lock(&mu_);
    ++stats_.published;
  }
}

}  // namespace oobleck::server
