#include "server/memory.h"

#include <malloc.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"

namespace oobleck::server {

std::string CapMallocArenas(int arena_max) {
  if (const char* env = std::getenv("MALLOC_ARENA_MAX"); env != nullptr && env[0] != '\0') {
    return absl::StrCat("malloc arenas: MALLOC_ARENA_MAX=", env, " from the environment");
  }
  if (arena_max <= 0) return "malloc arenas: glibc's default (8 per core)";
#if defined(__GLIBC__)
  if (mallopt(M_ARENA_MAX, arena_max) == 1) {
    return absl::StrCat("malloc arenas: at most ", arena_max, " (--malloc_arena_max)");
  }
  return absl::StrCat("malloc arenas: mallopt(M_ARENA_MAX, ", arena_max,
                      ") failed; glibc's default");
#else
  return "malloc arenas: not glibc, --malloc_arena_max has no effect";
#endif
}

HeapFigures ReadHeapFigures() {
  HeapFigures figures;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 info = mallinfo2();
  // uordblks: in use from the main heap and the arenas' heaps; hblkhd: big blocks mmapped
  // on their own (freed straight back to the OS). fordblks: free chunks in the arenas.
  figures.in_use_bytes = static_cast<int64_t>(info.uordblks + info.hblkhd);
  figures.free_bytes = static_cast<int64_t>(info.fordblks);
#endif
  return figures;
}

MallocTrimmer::MallocTrimmer(absl::Duration interval, int64_t min_free_bytes)
    : interval_(interval), min_free_bytes_(min_free_bytes), thread_([this] { Run(); }) {}

MallocTrimmer::~MallocTrimmer() {
  stop_.Notify();
  thread_.join();
}

int64_t MallocTrimmer::trims() const {
  absl::MutexLock lock(&mu_);
  return trims_;
}

int64_t MallocTrimmer::trimmed_free_bytes() const {
  absl::MutexLock lock(&mu_);
  return trimmed_free_bytes_;
}

void MallocTrimmer::Run() {
  // The figures just after the last trim. A trim releases the pages of free chunks but
  // leaves the chunks in the arenas, so the free bytes do not drop: an idle heap that
  // still looks like it did then has nothing more to give back.
  HeapFigures after_last_trim{-1, -1};
  while (!stop_.WaitForNotificationWithTimeout(interval_)) {
    // mallinfo2 walks the free lists of every arena (locking each in turn): cheap next to
    // the trim, which also touches every free page, so the trim runs only when it pays.
    const HeapFigures figures = ReadHeapFigures();
    if (figures.free_bytes < min_free_bytes_) continue;
    if (figures.in_use_bytes == after_last_trim.in_use_bytes &&
        figures.free_bytes == after_last_trim.free_bytes) {
      continue;
    }
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
    after_last_trim = ReadHeapFigures();
    absl::MutexLock lock(&mu_);
    ++trims_;
    trimmed_free_bytes_ += figures.free_bytes;
  }
}

}  // namespace oobleck::server
