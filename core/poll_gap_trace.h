// A diagnostic of the sanitizer build only (build-asan/, whose fuzz/CMakeLists.txt defines
// OOBLECK_POLL_GAP_REPORT_MS for the fuzz targets and the sanitized tests that share its
// core): it reports every stretch of more than that many ms of one thread's CPU between two
// polls of one search's Interrupt, with where each poll was.
//
// Why: a search must stop within its deadline's slack, so no loop may run long between two
// polls. rpc_structure_fuzzer notices a long gap only when a deadline happens to fall in
// it, and then only as CPU the process burnt afterwards, which says nothing about where.
// This report names both ends of every long gap on any input, whatever the deadline.
#ifndef OOBLECK_CORE_POLL_GAP_TRACE_H_
#define OOBLECK_CORE_POLL_GAP_TRACE_H_

#include <execinfo.h>
#include <sanitizer/common_interface_defs.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace oobleck {

class PollGapTrace {
 public:
  // The construction counts as a poll: set-up before the first real poll is a gap too.
  PollGapTrace() : search_(NextSearch()) { Mark(); }

  // A poll of this search on the calling thread.
  void Mark() const {
    Last& last = LastOnThread();
    const double now_ms = ThreadCpuMs();
    void* frames[kFrames];
    const int depth = backtrace(frames, kFrames);
    if (last.search == search_ && now_ms - last.cpu_ms > OOBLECK_POLL_GAP_REPORT_MS) {
      std::fprintf(stderr, "poll gap: %.0f ms of thread CPU between two polls of one search\n",
                   now_ms - last.cpu_ms);
      Print("  from the poll at", last.frames, last.depth);
      Print("  to the poll at", frames, depth);
    }
    last.search = search_;
    last.cpu_ms = now_ms;
    last.depth = depth;
    for (int i = 0; i < depth; ++i) last.frames[i] = frames[i];
  }

 private:
  static constexpr int kFrames = 24;
  struct Last {
    uint64_t search = 0;
    double cpu_ms = 0;
    void* frames[kFrames];
    int depth = 0;
  };
  static Last& LastOnThread() {
    thread_local Last last;
    return last;
  }
  static uint64_t NextSearch() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
  }
  static double ThreadCpuMs() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
  }
  // Our own frames, symbolised by the sanitizer runtime (gRPC's, oneTBB's and the C
  // library's are left out: they say nothing about which loop did not poll), cut to a
  // readable width.
  static void Print(const char* title, void* const* frames, int depth) {
    std::fprintf(stderr, "%s\n", title);
    char line[512];
    for (int i = 0; i < depth; ++i) {
      __sanitizer_symbolize_pc(frames[i], "%f %s:%l", line, sizeof(line));
      const bool ours = std::strstr(line, "oobleck::") != nullptr &&
                        std::strstr(line, "tbb::") == nullptr &&
                        std::strstr(line, "PollGapTrace") == nullptr &&
                        std::strstr(line, "Interrupt::") == nullptr;
      if (ours) std::fprintf(stderr, "    %.240s\n", line);
    }
  }

  uint64_t search_;
};

}  // namespace oobleck

#endif  // OOBLECK_CORE_POLL_GAP_TRACE_H_
