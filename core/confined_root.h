// Server-side paths named by a client, confined to one directory tree the operator
// allowed (--load_root). Symlinks are resolved before the check, so a link inside the
// tree that points out of it is refused like a path outside it; and "not there" and "not
// allowed" give one and the same answer, so a client cannot probe what exists elsewhere.
#ifndef OOBLECK_CORE_CONFINED_ROOT_H_
#define OOBLECK_CORE_CONFINED_ROOT_H_

#include <filesystem>
#include <string>

#include "absl/status/statusor.h"

namespace oobleck {

class ConfinedRoot {
 public:
  // The real path of `root`; INVALID_ARGUMENT unless it is an existing directory.
  static absl::StatusOr<ConfinedRoot> Open(const std::string& root);

  // The real path of `requested` (absolute, or relative to the root) if it exists and
  // lies inside the root once every symlink is resolved. Otherwise NOT_FOUND saying
  // that `shown` (how the caller names it) "is not a readable path under the load root".
  // A path that is lexically outside the root is refused without touching the disk.
  absl::StatusOr<std::filesystem::path> Resolve(const std::filesystem::path& requested,
                                                const std::string& shown) const;

  const std::filesystem::path& path() const { return root_; }

 private:
  explicit ConfinedRoot(std::filesystem::path root) : root_(std::move(root)) {}
  bool Contains(const std::filesystem::path& real) const;

  std::filesystem::path root_;  // canonical, no trailing separator
};

}  // namespace oobleck

#endif  // OOBLECK_CORE_CONFINED_ROOT_H_
