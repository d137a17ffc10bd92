// Admission control for template searches (--max_concurrent_searches): each search may
// use every core, so a few huge requests running at once would make every other request
// wait behind them. A bounded number run at a time; the rest wait for a slot, but never
// past their deadline: they get RESOURCE_EXHAUSTED naming the limit instead.
#ifndef OOBLECK_SERVER_SEARCH_GATE_H_
#define OOBLECK_SERVER_SEARCH_GATE_H_

#include <grpcpp/server_context.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace oobleck::server {

class SearchGate {
 public:
  // Holds one slot until destroyed. A default-constructed Slot holds none.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept : gate_(other.gate_) { other.gate_ = nullptr; }
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot();

   private:
    friend class SearchGate;
    explicit Slot(SearchGate* gate) : gate_(gate) {}
    SearchGate* gate_ = nullptr;
  };

  // max_concurrent >= 1 searches at once; a call without a deadline waits at most
  // max_queue_wait for a slot.
  SearchGate(int max_concurrent, absl::Duration max_queue_wait);

  // Waits for a free slot until `give_up_at` (capped at now + max_queue_wait) or until
  // `cancelled` (polled; may be empty) returns true. RESOURCE_EXHAUSTED naming the limit
  // when no slot frees in time, CANCELLED when the caller went away.
  absl::StatusOr<Slot> Acquire(absl::Time give_up_at, const std::function<bool()>& cancelled);

  // Acquire for a gRPC call: gives up shortly before the call's deadline, so that the
  // client receives RESOURCE_EXHAUSTED (and why) rather than its own DEADLINE_EXCEEDED.
  // `cancelled` (may be empty) is polled while waiting, e.g. CallWatch::Predicate().
  absl::StatusOr<Slot> AcquireForCall(grpc::ServerContext* context,
                                      const std::function<bool()>& cancelled);
  // AcquireForCall as core's SearchOptions::admit, so that only calls that really search
  // take a slot (answers from the cache never wait behind a long search).
  std::function<absl::StatusOr<std::shared_ptr<void>>()> AdmissionFor(
      grpc::ServerContext* context, std::function<bool()> cancelled);

  int max_concurrent() const { return max_concurrent_; }
  int in_use() const;
  int64_t rejected() const;  // calls answered RESOURCE_EXHAUSTED so far

 private:
  bool HasFreeSlot() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_use_ < max_concurrent_; }
  void Release();

  const int max_concurrent_;
  const absl::Duration max_queue_wait_;
  mutable absl::Mutex mu_;
  int in_use_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rejected_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_SEARCH_GATE_H_
