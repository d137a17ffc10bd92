// Cancellation as the long loops of the searches see it: a predicate polled now and then,
// whose first `true` is latched so that every thread of a search stops at its next check.
#ifndef OOBLECK_CORE_INTERRUPT_H_
#define OOBLECK_CORE_INTERRUPT_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#ifdef OOBLECK_POLL_GAP_REPORT_MS
#include "core/poll_gap_trace.h"
#endif

namespace oobleck {

class Interrupt {
 public:
  // `cancelled` may be empty (never cancelled); it must be safe to call from any thread.
  explicit Interrupt(std::function<bool()> cancelled) : cancelled_(std::move(cancelled)) {}

  // Asks the predicate (unless already stopped). Cheap enough for every few hundred
  // microseconds of work; loops that do less per step ask every kStride steps via Every().
  bool Poll() {
#ifdef OOBLECK_POLL_GAP_REPORT_MS
    trace_.Mark();
#endif
    if (stopped()) return true;
    if (cancelled_ && cancelled_()) stopped_.store(true, std::memory_order_relaxed);
    return stopped();
  }
  // For a loop's step number i: polls on every kStride-th step, else only reads the latch.
  bool Every(int64_t i) { return (i % kStride) == 0 ? Poll() : stopped(); }
  bool stopped() const { return stopped_.load(std::memory_order_relaxed); }
  // CANCELLED with `what` was stopped (the caller maps it to the call's own status).
  static absl::Status Status(const char* what) {
    return absl::CancelledError(std::string(what) + " cancelled");
  }

  static constexpr int64_t kStride = 64;

 private:
  std::function<bool()> cancelled_;
  std::atomic<bool> stopped_{false};
#ifdef OOBLECK_POLL_GAP_REPORT_MS
  PollGapTrace trace_;
#endif
};

// Entries a table reset sets between two polls of the interrupt (AssignPolled).
inline constexpr int64_t kAssignPollChunk = int64_t{1} << 16;

// v = n copies of `value`, polling `interrupt` every kAssignPollChunk entries: a table of
// millions of entries is a long fill in an instrumented build (the fuzzers' server takes
// about 100 ms per table), where a call must still stop within its deadline's slack.
// False if the interrupt stopped it (v is then shorter than n).
template <typename V>
bool AssignPolled(std::vector<V>& v, int64_t n, V value, Interrupt& interrupt) {
  v.clear();
  v.reserve(n);
  for (int64_t filled = 0; filled < n; filled += kAssignPollChunk) {
    if (interrupt.Poll()) return false;
    v.insert(v.end(), std::min(kAssignPollChunk, n - filled), value);
  }
  return true;
}

}  // namespace oobleck

#endif  // OOBLECK_CORE_INTERRUPT_H_
