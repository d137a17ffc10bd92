// The one way the planner reads a whole file: only regular files (a FIFO, device or
// directory is refused at once instead of blocking or streaming forever), and never more
// than a stated number of bytes (checked before reading). Messages name the path as the
// caller shows it, never the file's content.
#ifndef OOBLECK_CORE_FILE_READER_H_
#define OOBLECK_CORE_FILE_READER_H_

#include <cstdint>
#include <filesystem>
#include <string>

#include "absl/status/statusor.h"

namespace oobleck {

// Profiles, cluster files and stored profiles are far below this; requests are capped at
// 64 MiB by gRPC as well.
inline constexpr int64_t kMaxInputFileBytes = int64_t{64} << 20;

// NOT_FOUND if it cannot be opened, INVALID_ARGUMENT if it is not a regular file,
// RESOURCE_EXHAUSTED if it is larger than max_bytes. `shown` names the file in messages.
absl::StatusOr<std::string> ReadRegularFile(const std::filesystem::path& path,
                                            const std::string& shown,
                                            int64_t max_bytes = kMaxInputFileBytes);
inline absl::StatusOr<std::string> ReadRegularFile(const std::filesystem::path& path) {
  return ReadRegularFile(path, path.string());
}

}  // namespace oobleck

#endif  // OOBLECK_CORE_FILE_READER_H_
