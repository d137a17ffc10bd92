// One call's deadline and cancellation, and the server's own shutdown, as every RPC's
// searches and waits poll them: the one place that decides when a call must stop and
// with which status it then answers.
#ifndef OOBLECK_SERVER_CALL_WATCH_H_
#define OOBLECK_SERVER_CALL_WATCH_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "core/search.h"

namespace oobleck::server {

class SearchGate;  // server/search_gate.h

// Set once when the server starts shutting down (SIGTERM): every running search then
// stops at its next poll, so that the drain ends within its grace period.
class ShutdownFlag {
 public:
  void Set() { set_.store(true, std::memory_order_relaxed); }
  bool is_set() const { return set_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> set_{false};
};

// Why a call that takes one request message got none. A client that cancels, or whose
// deadline expires, before its request arrives still reaches the handler (or gRPC's
// generated one), whose read fails; the cancellation reaches the call's close op, which
// IsCancelled reads, a moment later and not always with the read flagged as failed. So
// a live call, whose client half-closed without a message or sent one that does not
// parse, is told apart only after kCancelNoticeWait: its INTERNAL comes that much later.
enum class MissingRequest { kDeadlinePassed, kCancelled, kClientsFault };
MissingRequest WhyNoRequest(grpc::ServerContextBase* context);
inline constexpr std::chrono::milliseconds kCancelNoticeWait{50};

class CallWatch {
 public:
  // `shutdown` may be null (never shutting down); both must outlive the watch.
  CallWatch(grpc::ServerContext* context, const ShutdownFlag* shutdown);

  // True once the deadline passed, the client cancelled or the server is shutting down.
  // Safe from several threads at once and cheap: the cancellation check, a system call on
  // the synchronous server, runs at most every kCancelPollInterval.
  bool Stopped() const;
  // Stopped() as a predicate for core (SearchOptions::cancelled) and for waits.
  std::function<bool()> Predicate() const {
    return [this] { return Stopped(); };
  }
  SearchOptions Options() const;
  // Options() for a search that, given a `gate` (may be null), also waits for one of its
  // slots before its first uncached work (SearchGate::AdmissionFor).
  SearchOptions Options(SearchGate* gate) const;
  // The one answer for a failed `status` of work this watch guarded: CANCELLED from core
  // while the watch has stopped is Interrupted(what); any other status, also a CANCELLED
  // the watch did not cause, goes out as it is (ToGrpcStatus).
  grpc::Status Answer(const absl::Status& status, const std::string& what) const;
  // The answer for work that stopped because of this watch, `what` saying what was under
  // way ("planning 12 nodes"): DEADLINE_EXCEEDED, UNAVAILABLE while shutting down, or
  // CANCELLED.
  grpc::Status Interrupted(const std::string& what) const;

  static constexpr std::chrono::nanoseconds kCancelPollInterval = std::chrono::milliseconds(5);

 private:
  bool DeadlinePassed() const { return std::chrono::system_clock::now() >= deadline_; }
  bool ClientCancelled() const;

  grpc::ServerContext* context_;
  const ShutdownFlag* shutdown_;
  std::chrono::system_clock::time_point deadline_;
  mutable std::atomic<int64_t> next_poll_ns_;
  mutable std::atomic<bool> cancelled_{false};
};

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_CALL_WATCH_H_
