#include "server/inline_profiles.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/field_path.h"
#include "core/profile_catalog.h"
#include "core/shown_value.h"
#include "core/status_macros.h"
#include "server/proto_conversion.h"
#include "server/request_limits.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;

// The GPU type whose profile node type `type` reads: its own, or the measured one it is
// derived from.
const std::string& ProfileGpuType(const pb::NodeType& type) {
  return type.has_derive() ? type.derive().measured_gpu_type() : type.gpu_type();
}

// Checks gpu_type of profiles[i] against the other profiles and the cluster.
absl::Status CheckGpuType(const google::protobuf::RepeatedPtrField<pb::InlineProfile>& profiles,
                          int i, const std::set<std::string>& cluster_gpu_types) {
  const std::string field = absl::StrCat("profiles[", i, "].gpu_type");
  const std::string& gpu_type = profiles[i].gpu_type();
  if (gpu_type.empty()) {
    if (profiles.size() > 1) {
      return InvalidField(field, " is required when the request sends more than one profile");
    }
    if (cluster_gpu_types.size() > 1) {
      return InvalidField(field, absl::StrCat(" is required: cluster.node_types use the GPU "
                                              "types ",
                                              absl::StrJoin(cluster_gpu_types, ", "),
                                              " (set one profile per GPU type)"));
    }
    return absl::OkStatus();
  }
  for (int j = 0; j < i; ++j) {
    if (profiles[j].gpu_type() == gpu_type) {
      return InvalidField(
          field, absl::StrCat(" ", Quote(gpu_type), " repeats profiles[", j, "].gpu_type"));
    }
  }
  if (!cluster_gpu_types.count(gpu_type)) {
    return InvalidField(field, absl::StrCat(" ", Quote(gpu_type),
                                            " is not the gpu_type (or derive.measured_gpu_type) "
                                            "of any cluster.node_types entry"));
  }
  return absl::OkStatus();
}

// profiles[i] read from its layers or files, validated as LoadProfile validates.
absl::StatusOr<ModelProfile> ReadInlineProfile(const pb::InlineProfile& in, int i, ProfileKey key,
                                               AllreduceKey convention) {
  const std::string prefix = absl::StrCat("profiles[", i, "].");
  ModelProfile profile;
  profile.key = std::move(key);
  profile.allreduce_key = convention;
  ASSIGN_OR_RETURN(profile.layers, LayersFromRequest(in.has_layers() ? &in.layers() : nullptr,
                                                     in.has_files() ? &in.files() : nullptr,
                                                     convention, prefix, nullptr));
  absl::Status valid = CheckProfileLimits(profile);
  if (valid.ok()) valid = ValidateProfile(profile);
  if (!valid.ok()) {
    return FieldError(valid.code(), absl::StrCat("profiles[", i, "]"),
                      absl::StrCat(": ", valid.message()));
  }
  return profile;
}

// profiles[i] resolved: read and cached, or found by fingerprint. Under `key` either way.
absl::StatusOr<std::shared_ptr<const ModelProfile>> ResolveOne(const pb::InlineProfile& in, int i,
                                                               const ProfileKey& key,
                                                               InlineProfileCache* cache) {
  const std::string field = absl::StrCat("profiles[", i, "]");
  ASSIGN_OR_RETURN(const AllreduceKey convention,
                   FromProtoAllreduceKey(in.allreduce_key(), field + ".allreduce_key"));
  std::shared_ptr<const ModelProfile> cached;
  if (in.source_case() == pb::InlineProfile::kFingerprint) {
    cached = cache->Find(in.fingerprint());
    if (cached == nullptr) {
      return FieldError(absl::StatusCode::kNotFound, field + ".fingerprint",
                        absl::StrCat(" ", Quote(in.fingerprint()),
                                     " is not cached on this server (never sent here, or "
                                     "evicted): send the profile's layers or files again"));
    }
    if (cached->key == key) return cached;
    auto renamed = std::make_shared<ModelProfile>(*cached);
    renamed->key = key;
    return renamed;
  }
  ASSIGN_OR_RETURN(ModelProfile read, ReadInlineProfile(in, i, key, convention));
  auto fresh = std::make_shared<const ModelProfile>(std::move(read));
  cached = cache->Insert(fresh);
  // Equal content sent under another name or convention keeps the name it is sent under.
  if (cached->key == key && cached->allreduce_key == convention) return cached;
  return fresh;
}

}  // namespace

absl::StatusOr<std::vector<LayerProfile>> LayersFromRequest(const pb::ProfileLayers* layers,
                                                            const pb::OobleckProfileFiles* files,
                                                            AllreduceKey convention,
                                                            const std::string& prefix,
                                                            Interrupt* interrupt) {
  if (layers != nullptr) return FromProtoLayers(*layers, prefix + "layers", convention);
  return ParseOobleckProfile(files->mb_json(), files->allreduce_in_node_json(),
                             files->allreduce_across_nodes_json(), prefix + "files", "mb<m>.json",
                             interrupt, convention);
}

std::shared_ptr<const ModelProfile> InlineProfileCache::Find(const std::string& fingerprint) {
  absl::MutexLock lock(&mu_);
  const std::shared_ptr<const ModelProfile>* hit = lru_.Find(fingerprint);
  return hit != nullptr ? *hit : nullptr;
}

std::shared_ptr<const ModelProfile> InlineProfileCache::Insert(
    std::shared_ptr<const ModelProfile> profile) {
  const std::string fingerprint = profile->Fingerprint();
  const int64_t bytes = ProfileMemoryBytes(*profile) + 2 * static_cast<int64_t>(fingerprint.size());
  absl::MutexLock lock(&mu_);
  // Content sent again is a hit, and becomes the most recent.
  if (const std::shared_ptr<const ModelProfile>* hit = lru_.Find(fingerprint)) return *hit;
  const std::shared_ptr<const ModelProfile>* cached = lru_.Insert(
      fingerprint, profile, bytes, ByteLru<std::shared_ptr<const ModelProfile>>::OnExisting::kKeep);
  return cached != nullptr ? *cached : profile;
}

CacheStats InlineProfileCache::stats() const {
  absl::MutexLock lock(&mu_);
  return lru_.stats();
}

std::shared_ptr<const ModelProfile> InlineProfiles::For(const std::string& gpu_type) const {
  for (const Entry& entry : entries) {
    if (entry.gpu_type.empty() || entry.gpu_type == gpu_type) return entry.profile;
  }
  return nullptr;
}

absl::StatusOr<InlineProfiles> ResolveInlineProfiles(
    const google::protobuf::RepeatedPtrField<pb::InlineProfile>& profiles, const std::string& model,
    int microbatch_size, const pb::Cluster& cluster, InlineProfileCache* cache) {
  std::set<std::string> cluster_gpu_types;
  for (const pb::NodeType& type : cluster.node_types()) {
    cluster_gpu_types.insert(ProfileGpuType(type));
  }
  InlineProfiles out;
  for (int i = 0; i < profiles.size(); ++i) {
    const pb::InlineProfile& in = profiles[i];
    if (in.source_case() == pb::InlineProfile::SOURCE_NOT_SET) {
      return InvalidField(absl::StrCat("profiles[", i, "].source"),
                          " is required: set layers, files or fingerprint");
    }
    RETURN_IF_ERROR(CheckGpuType(profiles, i, cluster_gpu_types));
    // An unnamed profile takes the cluster's one GPU type as its name, when it has one.
    std::string gpu_type = in.gpu_type();
    if (gpu_type.empty() && !cluster_gpu_types.empty()) gpu_type = *cluster_gpu_types.begin();
    const ProfileKey key{model.empty() ? "inline" : model, gpu_type.empty() ? "inline" : gpu_type,
                         microbatch_size > 0 ? microbatch_size : 1};
    ASSIGN_OR_RETURN(std::shared_ptr<const ModelProfile> profile, ResolveOne(in, i, key, cache));
    out.entries.push_back({in.gpu_type(), std::move(profile)});
  }
  return out;
}

}  // namespace oobleck::server
