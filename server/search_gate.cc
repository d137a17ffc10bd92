#include "server/search_gate.h"

#include <algorithm>
#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace oobleck::server {
namespace {

// A waiting call notices its own cancellation at least this often.
constexpr absl::Duration kCancellationPoll = absl::Milliseconds(50);

}  // namespace

SearchGate::Slot& SearchGate::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    if (gate_ != nullptr) gate_->Release();
    gate_ = other.gate_;
    other.gate_ = nullptr;
  }
  return *this;
}

SearchGate::Slot::~Slot() {
  if (gate_ != nullptr) gate_->Release();
}

SearchGate::SearchGate(int max_concurrent, absl::Duration max_queue_wait)
    : max_concurrent_(std::max(1, max_concurrent)), max_queue_wait_(max_queue_wait) {}

absl::StatusOr<SearchGate::Slot> SearchGate::Acquire(absl::Time give_up_at,
                                                     const std::function<bool()>& cancelled) {
  const absl::Time start = absl::Now();
  give_up_at = std::min(give_up_at, start + max_queue_wait_);
  absl::MutexLock lock(&mu_);
  while (!HasFreeSlot()) {
    if (cancelled && cancelled()) {
      return absl::CancelledError("the call was cancelled while waiting for a search slot");
    }
    const absl::Time now = absl::Now();
    if (now >= give_up_at) {
      ++rejected_;
      return absl::ResourceExhaustedError(absl::StrCat(
          "all ", max_concurrent_, " search slots (--max_concurrent_searches=", max_concurrent_,
          ") stayed busy for ", absl::ToInt64Milliseconds(now - start),
          " ms, as long as this call could wait; retry later with a longer deadline"));
    }
    mu_.AwaitWithDeadline(absl::Condition(this, &SearchGate::HasFreeSlot),
                          std::min(give_up_at, now + kCancellationPoll));
  }
  ++in_use_;
  return Slot(this);
}

absl::StatusOr<SearchGate::Slot> SearchGate::AcquireForCall(
    grpc::ServerContext* context, const std::function<bool()>& cancelled) {
  const absl::Time now = absl::Now();
  absl::Time give_up_at = absl::InfiniteFuture();
  const std::chrono::system_clock::time_point deadline = context->deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    const absl::Time call_deadline = absl::FromChrono(deadline);
    // Leave the answer time to travel back: a tenth of the call's time, within [5, 200] ms.
    const absl::Duration margin =
        std::clamp((call_deadline - now) / 10, absl::Milliseconds(5), absl::Milliseconds(200));
    give_up_at = call_deadline - margin;
  }
  return Acquire(give_up_at, cancelled);
}

int SearchGate::in_use() const {
  absl::MutexLock lock(&mu_);
  return in_use_;
}

int64_t SearchGate::rejected() const {
  absl::MutexLock lock(&mu_);
  return rejected_;
}

void SearchGate::Release() {
  absl::MutexLock lock(&mu_);
  --in_use_;
}

std::function<absl::StatusOr<std::shared_ptr<void>>()> SearchGate::AdmissionFor(
    grpc::ServerContext* context, std::function<bool()> cancelled) {
  return [this, context, cancelled]() -> absl::StatusOr<std::shared_ptr<void>> {
    ASSIGN_OR_RETURN(Slot slot, AcquireForCall(context, cancelled));
    return std::static_pointer_cast<void>(std::make_shared<Slot>(std::move(slot)));
  };
}

}  // namespace oobleck::server
