#include "server/profile_tree.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/profile.h"

namespace oobleck::server {
namespace {

namespace fs = std::filesystem;

// Sorted entries of `dir` (so that loading order and logs are reproducible).
std::vector<fs::directory_entry> SortedEntries(const fs::path& dir, std::error_code* error) {
  std::vector<fs::directory_entry> entries;
  fs::directory_iterator it(dir, *error);
  for (; !*error && it != fs::directory_iterator(); it.increment(*error)) {
    entries.push_back(*it);
  }
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.path() < b.path(); });
  return entries;
}

bool IsDirectory(const fs::directory_entry& entry) {
  std::error_code error;
  return entry.is_directory(error);
}

// The m of "mb<m>.json", or 0 when the name has another form.
int MicrobatchSizeOf(const std::string& file_name) {
  if (!absl::StartsWith(file_name, "mb") || !absl::EndsWith(file_name, ".json")) return 0;
  const std::string digits = file_name.substr(2, file_name.size() - 2 - 5);
  int m = 0;
  if (digits.empty() || !absl::SimpleAtoi(digits, &m) || m < 1) return 0;
  return m;
}

void LoadGpuDir(const fs::path& dir, const std::string& model, const std::string& gpu_type,
                const ConfinedRoot& root, ProfileCatalog* catalog, ProfileTreeReport* report) {
  std::error_code error;
  std::vector<int> sizes;
  for (const fs::directory_entry& entry : SortedEntries(dir, &error)) {
    const int m = MicrobatchSizeOf(entry.path().filename().string());
    if (m > 0) sizes.push_back(m);
  }
  if (error) {
    report->errors.push_back(absl::StrCat(dir.string(), ": ", error.message()));
    return;
  }
  if (sizes.empty()) {
    report->errors.push_back(absl::StrCat(dir.string(), ": no mb<m>.json file"));
    return;
  }
  std::sort(sizes.begin(), sizes.end());
  for (int m : sizes) {
    absl::StatusOr<ModelProfile> profile =
        LoadOobleckProfileDir(dir.string(), model, gpu_type, m, &root);
    if (!profile.ok()) {
      report->errors.push_back(
          absl::StrCat(dir.string(), " (mb", m, "): ", profile.status().ToString()));
      continue;
    }
    const std::string key = profile->key.ToString();
    absl::StatusOr<bool> stored = catalog->Put(*std::move(profile), /*replace=*/false);
    if (!stored.ok()) {
      report->errors.push_back(
          absl::StrCat(dir.string(), " (mb", m, "): ", stored.status().ToString()));
      continue;
    }
    report->loaded.push_back(key);
  }
}

}  // namespace

ProfileTreeReport LoadProfileTree(const std::string& root, ProfileCatalog* catalog) {
  ProfileTreeReport report;
  // Files are read only inside the tree: a symlink out of it is skipped like a bad file.
  absl::StatusOr<ConfinedRoot> confined = ConfinedRoot::Open(root);
  if (!confined.ok()) {
    report.errors.push_back(std::string(confined.status().message()));
    return report;
  }
  std::error_code error;
  // Absolute, so that the confined loads below do not take the paths as root-relative.
  const std::vector<fs::directory_entry> models = SortedEntries(fs::absolute(root), &error);
  if (error) {
    report.errors.push_back(absl::StrCat(root, ": ", error.message()));
    return report;
  }
  for (const fs::directory_entry& model_dir : models) {
    if (!IsDirectory(model_dir)) continue;  // e.g. a README beside the models
    const std::string model = model_dir.path().filename().string();
    std::vector<fs::directory_entry> gpu_dirs = SortedEntries(model_dir.path(), &error);
    if (error) {
      report.errors.push_back(absl::StrCat(model_dir.path().string(), ": ", error.message()));
      error.clear();
      continue;
    }
    int gpu_types = 0;
    for (const fs::directory_entry& gpu_dir : gpu_dirs) {
      if (!IsDirectory(gpu_dir)) continue;
      ++gpu_types;
      LoadGpuDir(gpu_dir.path(), model, gpu_dir.path().filename().string(), *confined, catalog,
                 &report);
    }
    if (gpu_types == 0) {
      report.errors.push_back(
          absl::StrCat(model_dir.path().string(), ": no <gpu_type> directory inside"));
    }
  }
  return report;
}

}  // namespace oobleck::server
