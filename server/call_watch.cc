#include "server/call_watch.h"

#include <grpc/grpc.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "server/search_gate.h"
#include "server/status_conversion.h"

namespace oobleck::server {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool CancelledWithin(grpc::ServerContextBase* context, std::chrono::steady_clock::duration wait) {
  const auto give_up = std::chrono::steady_clock::now() + wait;
  while (!context->IsCancelled()) {
    if (std::chrono::steady_clock::now() >= give_up) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

}  // namespace

MissingRequest WhyNoRequest(grpc::ServerContextBase* context) {
  if (context->deadline() <= std::chrono::system_clock::now()) {
    return MissingRequest::kDeadlinePassed;
  }
  if ((context->c_call() != nullptr && grpc_call_failed_before_recv_message(context->c_call())) ||
      CancelledWithin(context, kCancelNoticeWait)) {
    return MissingRequest::kCancelled;
  }
  return MissingRequest::kClientsFault;
}

CallWatch::CallWatch(grpc::ServerContext* context, const ShutdownFlag* shutdown)
    : context_(context),
      shutdown_(shutdown),
      deadline_(context->deadline()),
      next_poll_ns_(NowNs() + kCancelPollInterval.count()) {}

bool CallWatch::Stopped() const {
  return DeadlinePassed() || (shutdown_ != nullptr && shutdown_->is_set()) || ClientCancelled();
}

SearchOptions CallWatch::Options() const {
  SearchOptions options;
  options.cancelled = Predicate();
  return options;
}

SearchOptions CallWatch::Options(SearchGate* gate) const {
  SearchOptions options = Options();
  if (gate != nullptr) options.admit = gate->AdmissionFor(context_, Predicate());
  return options;
}

grpc::Status CallWatch::Answer(const absl::Status& status, const std::string& what) const {
  if (status.code() == absl::StatusCode::kCancelled && Stopped()) return Interrupted(what);
  return ToGrpcStatus(status);
}

bool CallWatch::ClientCancelled() const {
  if (cancelled_.load(std::memory_order_relaxed)) return true;
  const int64_t now = NowNs();
  int64_t next = next_poll_ns_.load(std::memory_order_relaxed);
  // One thread polls per interval (never during a call shorter than that).
  if (now < next ||
      !next_poll_ns_.compare_exchange_strong(next, now + kCancelPollInterval.count())) {
    return false;
  }
  if (!context_->IsCancelled()) return false;
  cancelled_.store(true, std::memory_order_relaxed);
  return true;
}

grpc::Status CallWatch::Interrupted(const std::string& what) const {
  if (DeadlinePassed()) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        absl::StrCat("the deadline passed while ", what));
  }
  if (shutdown_ != nullptr && shutdown_->is_set()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat("the server is shutting down; it stopped ", what,
                                     " (retry on another replica or after the restart)"));
  }
  return grpc::Status(grpc::StatusCode::CANCELLED,
                      absl::StrCat("the call was cancelled while ", what));
}

}  // namespace oobleck::server
