#include "core/confined_root.h"

#include <system_error>

#include "absl/strings/str_cat.h"

namespace oobleck {

namespace fs = std::filesystem;

absl::StatusOr<ConfinedRoot> ConfinedRoot::Open(const std::string& root) {
  std::error_code error;
  const fs::path real = fs::canonical(root, error);
  if (error || !fs::is_directory(real, error) || error) {
    return absl::InvalidArgumentError(
        absl::StrCat("load root \"", root, "\" is not an existing directory"));
  }
  return ConfinedRoot(real);
}

bool ConfinedRoot::Contains(const fs::path& real) const {
  // Component by component: "/data/root2" is not inside "/data/root".
  auto r = root_.begin();
  auto p = real.begin();
  for (; r != root_.end(); ++r, ++p) {
    if (p == real.end() || *p != *r) return false;
  }
  return true;
}

absl::StatusOr<fs::path> ConfinedRoot::Resolve(const fs::path& requested,
                                               const std::string& shown) const {
  const absl::Status refused = absl::NotFoundError(
      absl::StrCat(shown, " is not a readable path under the load root"));
  if (requested.empty()) return refused;
  const fs::path joined = (requested.is_absolute() ? requested : root_ / requested).lexically_normal();
  if (!Contains(joined)) return refused;
  std::error_code error;
  const fs::path real = fs::canonical(joined, error);
  if (error || !Contains(real)) return refused;
  return real;
}

}  // namespace oobleck
