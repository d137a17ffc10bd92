#include "server/etcd_profile_store.h"

#include <iostream>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/status_macros.h"
#include "server/profile_store.h"

namespace oobleck::server {
namespace {

// Pause between attempts while etcd cannot be read or watched.
constexpr absl::Duration kRetryDelay = absl::Milliseconds(300);

}  // namespace

EtcdProfileStore::EtcdProfileStore(EtcdClient* client, std::string prefix, ProfileCatalog* catalog,
                                   LogFn log)
    : client_(client),
      prefix_(absl::StrCat(prefix, "profiles/")),
      catalog_(catalog),
      log_(std::move(log)) {}

EtcdProfileStore::~EtcdProfileStore() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  client_->StopWatch();
  if (thread_.joinable()) thread_.join();
}

void EtcdProfileStore::Start(std::function<void()> on_synced) {
  thread_ = std::thread([this, on_synced = std::move(on_synced)] { Run(on_synced); });
}

std::string EtcdProfileStore::KeyOf(const ProfileKey& key) const {
  return absl::StrCat(prefix_, StoredProfileFileName(key));
}

bool EtcdProfileStore::synced() const {
  absl::MutexLock lock(&mu_);
  return synced_;
}

absl::Status EtcdProfileStore::CheckSynced() const {
  if (synced()) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("this replica has not yet synced with etcd at ", client_->endpoints_text(),
                   " (it has not read the stored profiles yet); retry, or call another replica"));
}

void EtcdProfileStore::Log(const std::string& line) const {
  if (log_) {
    log_(line);
  } else {
    std::cerr << line << std::endl;
  }
}

absl::StatusOr<bool> EtcdProfileStore::Put(ModelProfile profile, bool replace) {
  RETURN_IF_ERROR(ValidateProfile(profile));
  // Checked before the write: a profile this replica could not hold is not shared.
  RETURN_IF_ERROR(catalog_->CheckRoom(profile));
  const std::string key = KeyOf(profile.key);
  const std::string value = SerializeStoredProfile(profile);
  ASSIGN_OR_RETURN(EtcdWrite written, client_->Put(key, value, /*overwrite=*/replace));
  if (written.existed && !replace) {
    return absl::AlreadyExistsError(absl::StrCat("profile ", profile.key.ToString(),
                                                 " is already stored in etcd (", key,
                                                 "); set replace to overwrite"));
  }
  Apply(key, written.revision, value);
  return written.existed;
}

void EtcdProfileStore::Apply(const std::string& etcd_key, int64_t revision,
                             const std::optional<std::string>& value) {
  std::optional<ModelProfile> profile;
  if (value.has_value()) {
    absl::StatusOr<ModelProfile> parsed = ParseStoredProfile(*value);
    if (parsed.ok() && KeyOf(parsed->key) != etcd_key) {
      parsed = absl::InvalidArgumentError(absl::StrCat(
          "holds profile ", parsed->key.ToString(), ", which is stored as ", KeyOf(parsed->key)));
    }
    if (!parsed.ok()) {
      Log(absl::StrCat("skipped profile in etcd: ", etcd_key, " at revision ", revision, ": ",
                       parsed.status().ToString()));
      return;
    }
    profile = *std::move(parsed);
  }
  absl::MutexLock lock(&mu_);
  int64_t& applied = applied_revision_[etcd_key];
  if (applied >= revision) return;  // this replica already holds a newer state
  applied = revision;
  if (auto it = loaded_.find(etcd_key); it != loaded_.end()) {
    catalog_->Remove(it->second);
    loaded_.erase(it);
  }
  if (!profile.has_value()) return;
  ProfileKey key = profile->key;
  // Validated by ParseStoredProfile; only the memory limit (--max_profile_mb) can refuse.
  if (absl::StatusOr<bool> put = catalog_->Put(*std::move(profile), /*replace=*/true); put.ok()) {
    loaded_[etcd_key] = key;
  } else {
    Log(absl::StrCat("skipped profile in etcd: ", etcd_key, " at revision ", revision, ": ",
                     put.status().ToString()));
  }
}

absl::StatusOr<int64_t> EtcdProfileStore::ReadAll() {
  ASSIGN_OR_RETURN(EtcdRange range, client_->RangePrefix(prefix_));
  std::set<std::string> present;
  for (const EtcdKeyValue& kv : range.kvs) {
    present.insert(kv.key);
    Apply(kv.key, kv.mod_revision, kv.value);
  }
  // Keys deleted while this replica was not watching.
  std::vector<std::string> gone;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [etcd_key, profile_key] : loaded_) {
      if (!present.contains(etcd_key)) gone.push_back(etcd_key);
    }
  }
  for (const std::string& etcd_key : gone) Apply(etcd_key, range.revision, std::nullopt);
  return range.revision;
}

void EtcdProfileStore::Run(std::function<void()> on_synced) {
  int64_t next_revision = 0;  // 0: everything must be read (again)
  std::string last_problem;
  auto report = [&](const absl::Status& status, const std::string& doing) {
    const std::string problem = absl::StrCat(doing, ": ", status.message());
    if (problem != last_problem) Log(absl::StrCat(problem, " (retrying)"));
    last_problem = problem;
  };
  auto wait_or_stop = [this](absl::Duration delay) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), delay);
    return stopping_;
  };
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    if (next_revision == 0) {
      absl::StatusOr<int64_t> revision = ReadAll();
      if (!revision.ok()) {
        report(revision.status(), "cannot read the profiles from etcd");
        if (wait_or_stop(kRetryDelay)) return;
        continue;
      }
      next_revision = *revision + 1;
      bool first = false;
      int loaded = 0;
      {
        absl::MutexLock lock(&mu_);
        first = !synced_;
        synced_ = true;
        loaded = static_cast<int>(loaded_.size());
      }
      Log(absl::StrCat(first ? "read " : "read again ", loaded, " profile(s) from etcd at ",
                       client_->endpoints_text(), " (revision ", *revision, ")"));
      last_problem.clear();
      if (first && on_synced) on_synced();
    }
    bool compacted = false;
    absl::Status watched = client_->Watch(
        prefix_, next_revision,
        [&](const std::vector<EtcdEvent>& events, int64_t /*header_revision*/) {
          for (const EtcdEvent& event : events) {
            Apply(event.kv.key, event.kv.mod_revision,
                  event.deleted ? std::nullopt : std::optional<std::string>(event.kv.value));
            next_revision = std::max(next_revision, event.kv.mod_revision + 1);
          }
          if (!last_problem.empty()) {
            Log("the etcd watch is back");
            last_problem.clear();
          }
        },
        &compacted);
    if (watched.code() == absl::StatusCode::kCancelled) return;
    if (compacted) {
      Log(absl::StrCat(watched.message(), "; reading every profile again"));
      next_revision = 0;
      continue;
    }
    report(watched, absl::StrCat("watching etcd from revision ", next_revision));
    if (wait_or_stop(kRetryDelay)) return;
  }
}

}  // namespace oobleck::server
