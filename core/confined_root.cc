#include "core/confined_root.h"

#include <fcntl.h>
#include <unistd.h>

#include <system_error>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

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
  const absl::Status refused =
      absl::NotFoundError(absl::StrCat(shown, " is not a readable path under the load root"));
  if (requested.empty()) return refused;
  const fs::path joined =
      (requested.is_absolute() ? requested : root_ / requested).lexically_normal();
  if (!Contains(joined)) return refused;
  std::error_code error;
  const fs::path real = fs::canonical(joined, error);
  if (error || !Contains(real)) return refused;
  return real;
}

absl::StatusOr<ScopedFd> ConfinedRoot::Confine(ScopedFd fd, const absl::Status& refused) const {
  if (fd.get() < 0) return refused;
  // The kernel's name of the open file: where it is now, whatever path led to it.
  const std::string link = "/proc/self/fd/" + std::to_string(fd.get());
  std::string target(4096, '\0');
  const ssize_t n = readlink(link.c_str(), target.data(), target.size());
  if (n <= 0 || static_cast<size_t>(n) >= target.size()) return refused;
  target.resize(static_cast<size_t>(n));
  const fs::path real(target);
  if (!real.is_absolute() || real.lexically_normal() != real || !Contains(real)) return refused;
  return fd;
}

absl::StatusOr<ScopedFd> ConfinedRoot::OpenDirectory(const fs::path& requested,
                                                     const std::string& shown) const {
  const absl::Status refused =
      absl::NotFoundError(absl::StrCat(shown, " is not a readable path under the load root"));
  ASSIGN_OR_RETURN(const fs::path real, Resolve(requested, shown));
  ScopedFd fd(open(real.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  return Confine(std::move(fd), refused);
}

absl::StatusOr<ScopedFd> ConfinedRoot::OpenFileIn(const ScopedFd& dir, const std::string& name,
                                                  const std::string& shown) const {
  const absl::Status refused =
      absl::NotFoundError(absl::StrCat(shown, " is not a readable path under the load root"));
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return refused;
  }
  return Confine(OpenForReading(dir.get(), name), refused);
}

}  // namespace oobleck
