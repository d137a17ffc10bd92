// Server-side paths named by a client, confined to one directory tree the operator
// allowed (--load_root). Symlinks are resolved before the check, so a link inside the
// tree that points out of it is refused like a path outside it; and "not there" and "not
// allowed" give one and the same answer, so a client cannot probe what exists elsewhere.
// Reads check the opened descriptors themselves (OpenDirectory, OpenFileIn), so swapping a
// directory for a symlink while a load runs cannot lead out either.
#ifndef OOBLECK_CORE_CONFINED_ROOT_H_
#define OOBLECK_CORE_CONFINED_ROOT_H_

#include <filesystem>
#include <string>

#include "absl/status/statusor.h"
#include "core/file_reader.h"

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

  // Opens the directory `requested` names (as Resolve) and then checks where the opened
  // descriptor really is, not the path: a directory swapped for a symlink to somewhere
  // else between a check and the open cannot lead out of the root. NOT_FOUND as Resolve.
  absl::StatusOr<ScopedFd> OpenDirectory(const std::filesystem::path& requested,
                                         const std::string& shown) const;
  // Opens `name` inside the directory `dir` (from OpenDirectory) for reading (symlinks
  // followed), and checks the opened file lies inside the root, likewise.
  absl::StatusOr<ScopedFd> OpenFileIn(const ScopedFd& dir, const std::string& name,
                                      const std::string& shown) const;

  const std::filesystem::path& path() const { return root_; }

 private:
  explicit ConfinedRoot(std::filesystem::path root) : root_(std::move(root)) {}
  bool Contains(const std::filesystem::path& real) const;
  // `fd` if the file it has open lies inside the root (by /proc/self/fd), else `refused`.
  absl::StatusOr<ScopedFd> Confine(ScopedFd fd, const absl::Status& refused) const;

  std::filesystem::path root_;  // canonical, no trailing separator
};

}  // namespace oobleck

#endif  // OOBLECK_CORE_CONFINED_ROOT_H_
