#include "core/file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace oobleck {

ScopedFd& ScopedFd::operator=(ScopedFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) close(fd_);
}

ScopedFd OpenForReading(int dir_fd, const std::string& name, bool follow_symlinks) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (ReadOpenedFile refuses it).
  return ScopedFd(
      openat(dir_fd, name.c_str(),
             O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (follow_symlinks ? 0 : O_NOFOLLOW)));
}

absl::StatusOr<std::string> ReadOpenedFile(const ScopedFd& fd, const std::string& shown,
                                           int64_t max_bytes) {
  if (fd.get() < 0) return absl::NotFoundError(absl::StrCat("cannot read ", shown));
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return absl::NotFoundError(absl::StrCat("cannot read ", shown));
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(shown, " is not a regular file (a directory, FIFO, socket or device)"));
  }
  if (st.st_size > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(shown, " has ", st.st_size,
                                                     " bytes, more than the limit of ", max_bytes,
                                                     " bytes per file"));
  }
  std::string text;
  text.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  // A file that grows while it is read is cut at the size it had, plus nothing.
  while (done < text.size()) {
    const ssize_t n = read(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::NotFoundError(absl::StrCat("cannot read ", shown));
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

absl::StatusOr<std::string> ReadRegularFile(const std::filesystem::path& path,
                                            const std::string& shown, int64_t max_bytes) {
  return ReadOpenedFile(OpenForReading(AT_FDCWD, path.string()), shown, max_bytes);
}

}  // namespace oobleck
