#include "server/sailor_profiles.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/fidelity/sailor_data.h"
#include "core/field_path.h"
#include "core/interrupt.h"
#include "core/json_document.h"
#include "core/status_macros.h"
#include "server/proto_conversion.h"
#include "server/request_limits.h"
#include "server/status_conversion.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;

// One of Sailor's files, read from `text` under the file name its reader expects; errors
// name the request field first ("sailor.llm_info_json.llm_info.json/OPT-350/...").
absl::Status ReadSailorFile(std::string_view text, const std::string& field,
                            const std::string& file, Interrupt* interrupt,
                            fidelity::SailorData* data) {
  absl::StatusOr<nlohmann::json> doc = ParseJsonDocument(text, JsonLimits{.interrupt = interrupt});
  if (!doc.ok()) return InField(doc.status(), field);
  absl::StatusOr<fidelity::SailorData> read = fidelity::SailorDataFromJson({{file, *doc}});
  if (!read.ok()) return InField(read.status(), field);
  data->profiles.merge(read->profiles);
  data->layer_sizes.merge(read->layer_sizes);
  data->num_all_layers.merge(read->num_all_layers);
  return absl::OkStatus();
}

absl::StatusOr<fidelity::SailorProfileImport> ImportFromRequest(
    const pb::LoadProfileRequest& request, Interrupt* interrupt) {
  if (!request.gpu_type().empty()) {
    return InvalidField("gpu_type", " must be empty with sailor (sailor.gpu_types chooses)");
  }
  if (request.microbatch_size() < 0) {
    return InvalidValue("microbatch_size", ">= 0", request.microbatch_size());
  }
  const pb::SailorProfileFiles& files = request.sailor();
  fidelity::SailorData data;
  RETURN_IF_ERROR(ReadSailorFile(files.profiles_json(), "sailor.profiles_json", "profiles_tmp.json",
                                 interrupt, &data));
  RETURN_IF_ERROR(ReadSailorFile(files.llm_info_json(), "sailor.llm_info_json", "llm_info.json",
                                 interrupt, &data));
  RETURN_IF_ERROR(ReadSailorFile(files.training_config_json(), "sailor.training_config_json",
                                 "training_config_.json", interrupt, &data));
  const std::vector<std::string> gpu_types(files.gpu_types().begin(), files.gpu_types().end());
  if (request.has_runtime_reserve_bytes() && gpu_types.size() != 1) {
    return InvalidField("runtime_reserve_bytes",
                        absl::StrCat(" is one GPU type's: with sailor, sailor.gpu_types must name "
                                     "exactly one (got ",
                                     gpu_types.size(), ")"));
  }
  absl::StatusOr<fidelity::SailorProfileImport> imported =
      fidelity::ProfilesFromSailorData(data, request.model(), gpu_types, request.microbatch_size());
  if (!imported.ok()) return InField(imported.status(), "sailor");
  for (ModelProfile& profile : imported->profiles) {
    RETURN_IF_ERROR(ApplyRuntimeReserve(request, &profile));
    RETURN_IF_ERROR(CheckProfileLimits(profile));
    RETURN_IF_ERROR(ValidateProfile(profile));
  }
  return imported;
}

// ALREADY_EXISTS naming the first key that is taken, before anything is stored.
absl::Status CheckNoneTaken(const ProfileCatalog& catalog,
                            const std::vector<ModelProfile>& profiles) {
  std::map<ProfileKey, bool> held;
  for (const auto& stored : catalog.List(profiles.front().key.model)) held[stored->key] = true;
  for (const ModelProfile& profile : profiles) {
    if (held.contains(profile.key)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "profile ", profile.key.ToString(), " is already loaded (set replace to overwrite it); ",
          "none of the ", profiles.size(), " profiles was stored"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

grpc::Status LoadSailorProfiles(grpc::ServerContext* context, const pb::LoadProfileRequest& request,
                                pb::LoadProfileResponse* response, ProfileCatalog* catalog,
                                ProfileBackend* store, const ShutdownFlag* shutdown) {
  const CallWatch watch(context, shutdown);
  Interrupt interrupt(watch.Predicate());
  absl::StatusOr<fidelity::SailorProfileImport> imported = ImportFromRequest(request, &interrupt);
  if (watch.Stopped()) return watch.Interrupted("loading Sailor's profiles");
  if (!imported.ok()) return ToGrpcStatus(imported.status());
  if (!request.replace()) {
    if (absl::Status free = CheckNoneTaken(*catalog, imported->profiles); !free.ok()) {
      return ToGrpcStatus(free);
    }
  }
  int stored = 0;
  bool replaced_any = false;
  for (ModelProfile& profile : imported->profiles) {
    pb::ProfileInfo info = ToProfileInfo(profile);
    absl::StatusOr<bool> replaced = store != nullptr
                                        ? store->Put(std::move(profile), request.replace())
                                        : catalog->Put(std::move(profile), request.replace());
    if (!replaced.ok()) {
      return ToGrpcStatus(WithMessagePrefix(
          replaced.status(), absl::StrCat(stored, " of ", imported->profiles.size(),
                                          " profiles were stored before this one failed: ")));
    }
    replaced_any = replaced_any || *replaced;
    *response->add_profiles() = std::move(info);
    ++stored;
  }
  for (std::string& line : imported->skipped) response->add_skipped(std::move(line));
  response->set_replaced(replaced_any);
  return grpc::Status::OK;
}

}  // namespace oobleck::server
