// How the server keeps glibc's allocator from holding on to memory it no longer uses.
//
// Searches run on gRPC and oneTBB worker threads; glibc gives each thread that contends
// for the heap its own arena (up to 8 per core), and an arena keeps the high-water mark of
// the searches it served: after a 10-minute soak, 16 arenas held 670 MB with 97 MB in use
// (bench/README.md, "Soak"). Two mechanisms, both glibc-only:
//  - CapMallocArenas, at start before any thread exists: at most N arenas, so freed
//    memory is reused by the next search instead of sitting in another thread's arena;
//  - MallocTrimmer, a background thread: when the arenas hold more than a threshold of
//    free memory, malloc_trim(0) gives it back to the OS. It never runs on a request's
//    thread, so the warm Replan path pays nothing.
#ifndef OOBLECK_SERVER_MEMORY_H_
#define OOBLECK_SERVER_MEMORY_H_

#include <cstdint>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace oobleck::server {

// Caps glibc's malloc arenas at `arena_max` (mallopt M_ARENA_MAX) unless the environment
// sets MALLOC_ARENA_MAX (glibc reads that itself; the operator's choice wins) or
// `arena_max` is 0 (glibc's default: 8 per core). Returns a line saying what is in effect.
// Call before starting threads: threads that already have an arena keep it.
std::string CapMallocArenas(int arena_max);

// Heap figures of the whole process, from mallinfo2().
struct HeapFigures {
  int64_t in_use_bytes = 0;  // allocated and not freed
  int64_t free_bytes = 0;    // held by the allocator but free (what a trim can return)
};
HeapFigures ReadHeapFigures();

// Every `interval`, reads the heap figures and calls malloc_trim(0) when the arenas hold
// at least `min_free_bytes` of free memory. Stops (and joins) on destruction.
class MallocTrimmer {
 public:
  MallocTrimmer(absl::Duration interval, int64_t min_free_bytes);
  ~MallocTrimmer();
  MallocTrimmer(const MallocTrimmer&) = delete;
  MallocTrimmer& operator=(const MallocTrimmer&) = delete;

  // Trims done so far and the free bytes they found (for tests and logs).
  int64_t trims() const;
  int64_t trimmed_free_bytes() const;

 private:
  void Run();

  const absl::Duration interval_;
  const int64_t min_free_bytes_;
  absl::Notification stop_;
  mutable absl::Mutex mu_;
  int64_t trims_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t trimmed_free_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_MEMORY_H_
