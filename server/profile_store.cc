#include "server/profile_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/cluster.h"
#include "core/file_reader.h"
#include "core/fnv1a.h"
#include "core/json_document.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"

namespace oobleck::server {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr char kFormat[] = "oobleck-planner-profile";
constexpr char kChecksumPrefix[] = "fnv1a64:";
// Temp files are hidden and carry this marker, so LoadAll can tell them from profiles.
constexpr char kTempMarker[] = ".tmp.";

std::string Checksum(std::string_view bytes) {
  return absl::StrFormat("%s%016x", kChecksumPrefix, Fnv1a64(bytes));
}

std::string SystemError(int error_number) { return std::system_category().message(error_number); }

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

json AllreduceToJson(const std::map<int, double>& times_ms) {
  json out = json::object();
  for (const auto& [count, ms] : times_ms) out[std::to_string(count)] = ms;
  return out;
}

absl::StatusOr<double> Number(const json& object, const std::string& key,
                              const std::string& where) {
  auto it = object.find(key);
  if (it == object.end()) return Invalid(absl::StrCat(where, ".", key, " is missing"));
  if (!it->is_number()) {
    return Invalid(absl::StrCat(where, ".", key, " must be a number (got ", it->dump(), ")"));
  }
  return it->get<double>();
}

absl::StatusOr<std::string> String(const json& object, const std::string& key,
                                   const std::string& where) {
  auto it = object.find(key);
  if (it == object.end()) return Invalid(absl::StrCat(where, ".", key, " is missing"));
  if (!it->is_string()) {
    return Invalid(absl::StrCat(where, ".", key, " must be a string (got ", it->dump(), ")"));
  }
  return it->get<std::string>();
}

// An integer in [min, max]; checked before conversion so no value overflows.
absl::StatusOr<int> Integer(const json& object, const std::string& key, const std::string& where,
                            int min, int max) {
  auto it = object.find(key);
  if (it == object.end()) return Invalid(absl::StrCat(where, ".", key, " is missing"));
  const bool in_range =
      (it->is_number_unsigned() && it->get<uint64_t>() <= static_cast<uint64_t>(max) &&
       static_cast<int64_t>(it->get<uint64_t>()) >= min) ||
      (it->is_number_integer() && !it->is_number_unsigned() && it->get<int64_t>() >= min &&
       it->get<int64_t>() <= max);
  if (!in_range) {
    return Invalid(absl::StrCat(where, ".", key, " must be an integer between ", min, " and ", max,
                                " (got ", it->dump(), ")"));
  }
  return static_cast<int>(it->get<int64_t>());
}

absl::Status ParseAllreduce(const json& layer, const std::string& key, const std::string& where,
                            std::map<int, double>* out) {
  auto it = layer.find(key);
  if (it == layer.end()) return Invalid(absl::StrCat(where, ".", key, " is missing"));
  if (!it->is_object()) {
    return Invalid(absl::StrCat(where, ".", key, " must be an object {\"<count>\": ms}"));
  }
  for (const auto& [count_text, ms] : it->items()) {
    int count = 0;
    if (!absl::SimpleAtoi(count_text, &count) || count < 1) {
      return Invalid(absl::StrCat(where, ".", key, " key \"", count_text,
                                  "\" must be a positive integer count"));
    }
    if (!ms.is_number()) {
      return Invalid(absl::StrCat(where, ".", key, "[\"", count_text, "\"] must be a number (got ",
                                  ms.dump(), ")"));
    }
    (*out)[count] = ms.get<double>();
  }
  return absl::OkStatus();
}

absl::StatusOr<LayerProfile> ParseStoredLayer(const json& in, const std::string& where) {
  if (!in.is_object()) return Invalid(absl::StrCat(where, " must be an object"));
  LayerProfile layer;
  for (auto [key, field] : {std::pair{"forward_ms", &LayerProfile::forward_ms},
                            std::pair{"backward_ms", &LayerProfile::backward_ms},
                            std::pair{"param_bytes", &LayerProfile::param_bytes},
                            std::pair{"activation_bytes", &LayerProfile::activation_bytes}}) {
    ASSIGN_OR_RETURN(double value, Number(in, key, where));
    layer.*field = value;
  }
  for (auto [key, field] :
       {std::pair{"update_ms", &LayerProfile::update_ms},
        std::pair{"activation_output_bytes", &LayerProfile::activation_output_bytes}}) {
    if (!in.contains(key)) continue;
    ASSIGN_OR_RETURN(layer.*field, Number(in, key, where));
  }
  RETURN_IF_ERROR(ParseAllreduce(in, "allreduce_in_node_ms", where, &layer.allreduce_in_node_ms));
  RETURN_IF_ERROR(
      ParseAllreduce(in, "allreduce_across_nodes_ms", where, &layer.allreduce_across_nodes_ms));
  return layer;
}

bool WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(written));
  }
  return true;
}

}  // namespace

std::string SerializeStoredProfile(const ModelProfile& profile) {
  json layers = json::array();
  for (const LayerProfile& layer : profile.layers) {
    layers.push_back(
        {{"forward_ms", layer.forward_ms},
         {"backward_ms", layer.backward_ms},
         {"param_bytes", layer.param_bytes},
         {"activation_bytes", layer.activation_bytes},
         {"allreduce_in_node_ms", AllreduceToJson(layer.allreduce_in_node_ms)},
         {"allreduce_across_nodes_ms", AllreduceToJson(layer.allreduce_across_nodes_ms)}});
    // Sailor's per-layer fields are written only when given, so files of profiles without
    // them keep their bytes and checksums.
    for (auto [key, value] :
         {std::pair{"update_ms", layer.update_ms},
          std::pair{"activation_output_bytes", layer.activation_output_bytes}}) {
      if (value != 0) layers.back()[key] = value;
    }
  }
  json payload = {{"model", profile.key.model},
                  {"gpu_type", profile.key.gpu_type},
                  {"microbatch_size", profile.key.microbatch_size},
                  {"fingerprint", profile.Fingerprint()},
                  {"layers", std::move(layers)}};
  if (profile.key.tp != 1) payload["tp"] = profile.key.tp;  // likewise only when not 1
  // And the runtime reserve only when the profile carries one.
  if (profile.runtime_reserve_bytes) {
    payload["runtime_reserve_bytes"] = *profile.runtime_reserve_bytes;
  }
  // Written only when not the default, so that a profile given by GPU count keeps the
  // bytes (and checksum) files had before the convention existed.
  if (profile.allreduce_key != AllreduceKey::kGpus) {
    payload["allreduce_key"] = std::string(AllreduceKeyName(profile.allreduce_key));
  }
  // nlohmann::json keeps object keys sorted and prints doubles so they parse back to the
  // same value, so dump() of the parsed payload reproduces these bytes when reading.
  const std::string payload_text = payload.dump();
  json file = {{"format", kFormat},
               {"version", kStoredProfileVersion},
               {"checksum", Checksum(payload_text)},
               {"profile", std::move(payload)}};
  return file.dump(1) + "\n";
}

absl::StatusOr<ModelProfile> ParseStoredProfile(std::string_view text) {
  absl::StatusOr<json> parsed = ParseJsonDocument(text);
  if (!parsed.ok()) {
    return absl::DataLossError(
        absl::StrCat(parsed.status().message(), " (truncated or damaged file?)"));
  }
  const json& file = *parsed;
  if (!file.is_object()) return Invalid("the file must hold a JSON object");
  ASSIGN_OR_RETURN(std::string format, String(file, "format", "file"));
  if (format != kFormat) {
    return Invalid(absl::StrCat("file.format must be \"", kFormat, "\" (got \"", format, "\")"));
  }
  ASSIGN_OR_RETURN(int version, Integer(file, "version", "file", 0, INT_MAX));
  if (version != kStoredProfileVersion) {
    return Invalid(absl::StrCat("file.version ", version, " is not supported (this server reads ",
                                kStoredProfileVersion, ")"));
  }
  ASSIGN_OR_RETURN(std::string checksum, String(file, "checksum", "file"));
  auto payload_it = file.find("profile");
  if (payload_it == file.end() || !payload_it->is_object()) {
    return Invalid("file.profile must be an object");
  }
  const json& payload = *payload_it;
  const std::string actual_checksum = Checksum(payload.dump());
  if (checksum != actual_checksum) {
    return absl::DataLossError(absl::StrCat("file.checksum is ", checksum,
                                            " but the profile's checksum is ", actual_checksum));
  }

  ModelProfile profile;
  ASSIGN_OR_RETURN(std::string model, String(payload, "model", "profile"));
  ASSIGN_OR_RETURN(std::string gpu_type, String(payload, "gpu_type", "profile"));
  ASSIGN_OR_RETURN(int microbatch_size, Integer(payload, "microbatch_size", "profile", 1, INT_MAX));
  ASSIGN_OR_RETURN(std::string fingerprint, String(payload, "fingerprint", "profile"));
  profile.key = ProfileKey{std::move(model), std::move(gpu_type), microbatch_size};
  if (payload.contains("tp")) {
    ASSIGN_OR_RETURN(profile.key.tp, Integer(payload, "tp", "profile", 1, kMaxGpusPerNode));
  }
  if (payload.contains("allreduce_key")) {
    ASSIGN_OR_RETURN(std::string convention, String(payload, "allreduce_key", "profile"));
    if (convention == AllreduceKeyName(AllreduceKey::kGpusMinusOne)) {
      profile.allreduce_key = AllreduceKey::kGpusMinusOne;
    } else if (convention != AllreduceKeyName(AllreduceKey::kGpus)) {
      return Invalid(absl::StrCat("profile.allreduce_key \"", convention, "\" is unknown"));
    }
  }

  if (payload.contains("runtime_reserve_bytes")) {
    ASSIGN_OR_RETURN(profile.runtime_reserve_bytes,
                     Number(payload, "runtime_reserve_bytes", "profile"));
  }

  auto layers_it = payload.find("layers");
  if (layers_it == payload.end() || !layers_it->is_array()) {
    return Invalid("profile.layers must be an array");
  }
  for (size_t i = 0; i < layers_it->size(); ++i) {
    ASSIGN_OR_RETURN(profile.layers.emplace_back(),
                     ParseStoredLayer((*layers_it)[i], absl::StrCat("profile.layers[", i, "]")));
  }
  RETURN_IF_ERROR(ValidateProfile(profile));
  // The checksum covers the text; the fingerprint also proves the numbers read back exactly.
  if (const std::string actual = profile.Fingerprint(); actual != fingerprint) {
    return absl::DataLossError(absl::StrCat("profile.fingerprint is ", fingerprint,
                                            " but the layers read back as ", actual));
  }
  return profile;
}

std::string StoredProfileFileName(const ProfileKey& key) {
  auto encode = [](std::string_view text) {
    std::string out;
    for (unsigned char c : text) {
      const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '-' || c == '_';
      if (safe) {
        out.push_back(static_cast<char>(c));
      } else {
        absl::StrAppendFormat(&out, "%%%02X", c);
      }
    }
    return out;
  };
  // "+tp<t>" only when tp != 1: every file (and etcd key) of a tp = 1 profile keeps its name.
  return absl::StrCat(encode(key.model), "+", encode(key.gpu_type), "+mb", key.microbatch_size,
                      key.tp != 1 ? absl::StrCat("+tp", key.tp) : "", ".json");
}

absl::StatusOr<std::unique_ptr<ProfileStore>> ProfileStore::Open(const std::string& dir,
                                                                 ProfileCatalog* catalog) {
  if (dir.empty()) return absl::InvalidArgumentError("the data directory must not be empty");
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create data directory ", dir, ": ", error.message()));
  }
  if (!fs::is_directory(dir, error)) {
    return absl::FailedPreconditionError(absl::StrCat(dir, " is not a directory"));
  }
  return std::unique_ptr<ProfileStore>(new ProfileStore(dir, catalog));
}

ProfileStoreReport ProfileStore::LoadAll() {
  absl::MutexLock lock(&mu_);
  ProfileStoreReport report;
  std::error_code error;
  std::vector<fs::path> paths;
  for (fs::directory_iterator it(dir_, error); !error && it != fs::directory_iterator();
       it.increment(error)) {
    paths.push_back(it->path());
  }
  if (error) {
    report.errors.push_back(absl::StrCat(dir_, ": ", error.message()));
    return report;
  }
  std::sort(paths.begin(), paths.end());
  for (const fs::path& path : paths) {
    const std::string name = path.filename().string();
    if (absl::StartsWith(name, ".") && absl::StrContains(name, kTempMarker)) {
      // A write interrupted before its rename: the profile was never acknowledged.
      fs::remove(path, error);
      report.errors.push_back(
          error
              ? absl::StrCat(path.string(), ": unfinished write, cannot remove: ", error.message())
              : absl::StrCat(path.string(), ": removed the temp file of an unfinished write"));
      error.clear();
      continue;
    }
    if (!absl::EndsWith(name, ".json")) {
      report.errors.push_back(absl::StrCat(path.string(), ": not a stored profile (ignored)"));
      continue;
    }
    absl::StatusOr<std::string> text = ReadRegularFile(path);
    absl::StatusOr<ModelProfile> profile =
        text.ok() ? ParseStoredProfile(*text) : absl::StatusOr<ModelProfile>(text.status());
    if (!profile.ok()) {
      report.errors.push_back(absl::StrCat(path.string(), ": ", profile.status().ToString()));
      continue;
    }
    // One file per key: a copy under another name would make the loaded one ambiguous.
    if (const std::string expected = StoredProfileFileName(profile->key); expected != name) {
      report.errors.push_back(absl::StrCat(path.string(), ": holds profile ",
                                           profile->key.ToString(), ", which is stored as ",
                                           expected, " (ignored)"));
      continue;
    }
    const std::string key = profile->key.ToString();
    absl::StatusOr<bool> stored = catalog_->Put(*std::move(profile), /*replace=*/true);
    if (!stored.ok()) {
      report.errors.push_back(absl::StrCat(path.string(), ": ", stored.status().ToString()));
      continue;
    }
    report.loaded.push_back(key);
  }
  return report;
}

absl::StatusOr<bool> ProfileStore::Put(ModelProfile profile, bool replace) {
  RETURN_IF_ERROR(ValidateProfile(profile));
  const std::string file_name = StoredProfileFileName(profile.key);
  if (file_name.size() > kMaxStoredProfileFileNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model and gpu_type are too long to store under the data directory (file name of ",
        file_name.size(), " bytes; the limit is ", kMaxStoredProfileFileNameBytes, ")"));
  }
  absl::MutexLock lock(&mu_);
  bool exists = false;
  for (const auto& stored : catalog_->List(profile.key.model)) {
    exists = exists || stored->key == profile.key;
  }
  if (exists && !replace) {
    return absl::AlreadyExistsError(absl::StrCat("profile ", profile.key.ToString(),
                                                 " is already loaded; set replace to overwrite"));
  }
  RETURN_IF_ERROR(catalog_->CheckRoom(profile));  // nothing written that would not load
  if (absl::Status status = WriteAtomically(file_name, SerializeStoredProfile(profile));
      !status.ok()) {
    return status;
  }
  return catalog_->Put(std::move(profile), replace);
}

absl::Status ProfileStore::WriteAtomically(const std::string& file_name,
                                           std::string_view contents) {
  const std::string final_path = (fs::path(dir_) / file_name).string();
  const std::string temp_path = (fs::path(dir_) / absl::StrCat(".", file_name, kTempMarker,
                                                               ::getpid(), ".", temp_sequence_++))
                                    .string();
  auto fail = [&](const std::string& step, int error_number, bool remove_temp) {
    if (remove_temp) ::unlink(temp_path.c_str());
    return absl::InternalError(absl::StrCat("cannot store profile: ", step, " ", final_path, ": ",
                                            SystemError(error_number)));
  };

  const int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return fail("create temp file for", errno, false);
  if (!WriteAll(fd, contents)) {
    const int error_number = errno;
    ::close(fd);
    return fail("write", error_number, true);
  }
  if (::fsync(fd) != 0) {
    const int error_number = errno;
    ::close(fd);
    return fail("fsync", error_number, true);
  }
  if (::close(fd) != 0) return fail("close", errno, true);
  if (::rename(temp_path.c_str(), final_path.c_str()) != 0) return fail("rename to", errno, true);
  // The rename itself is durable only once the directory entry is.
  const int dir_fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return fail("open the directory of", errno, false);
  const int sync_result = ::fsync(dir_fd);
  const int sync_errno = errno;
  ::close(dir_fd);
  if (sync_result != 0) return fail("fsync the directory of", sync_errno, false);
  return absl::OkStatus();
}

}  // namespace oobleck::server
