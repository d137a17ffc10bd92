// The one way the planner reads a whole file: only regular files (a FIFO, device or
// directory is refused at once instead of blocking or streaming forever), and never more
// than a stated number of bytes (checked before reading). Messages name the path as the
// caller shows it, never the file's content.
#ifndef OOBLECK_CORE_FILE_READER_H_
#define OOBLECK_CORE_FILE_READER_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace oobleck {

// Profiles, cluster files and stored profiles are far below this; requests are capped at
// 64 MiB by gRPC as well.
inline constexpr int64_t kMaxInputFileBytes = int64_t{64} << 20;

// An open file descriptor, closed when this goes; -1 when empty.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept;
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd();
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

// Opens `name` relative to the directory `dir_fd` (AT_FDCWD: the working directory) for
// reading, without blocking on a FIFO; -1 (errno set) on failure. `follow_symlinks` false
// adds O_NOFOLLOW.
ScopedFd OpenForReading(int dir_fd, const std::string& name, bool follow_symlinks = true);

// The whole content of an opened file, with the checks of ReadRegularFile below.
absl::StatusOr<std::string> ReadOpenedFile(const ScopedFd& fd, const std::string& shown,
                                           int64_t max_bytes = kMaxInputFileBytes);

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
