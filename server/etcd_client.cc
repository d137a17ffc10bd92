#include "server/etcd_client.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/status_macros.h"

namespace oobleck::server {
namespace {

namespace pb = ::etcdserverpb;

// A restarted member is found again within about this long.
constexpr int kMaxReconnectBackoffMs = 1000;

std::chrono::system_clock::time_point DeadlineAfter(absl::Duration timeout) {
  return std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout);
}

bool EndpointUnreachable(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

// etcd answers a request whose context ran out on its side (it waited for a quorum that
// is not there) with UNKNOWN "context deadline exceeded"; so does a failure at our own
// deadline. Both are the deadline: the call may be retried, unlike a real UNKNOWN.
grpc::Status AsDeadline(const grpc::Status& status,
                        std::chrono::system_clock::time_point deadline) {
  if (status.ok() || EndpointUnreachable(status)) return status;
  const bool timed_out = absl::StrContains(status.error_message(), "context deadline exceeded") ||
                         std::chrono::system_clock::now() >= deadline;
  return timed_out ? grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, status.error_message())
                   : status;
}

EtcdKeyValue FromProto(const mvccpb::KeyValue& kv) {
  return EtcdKeyValue{kv.key(), kv.value(), kv.mod_revision()};
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseEtcdEndpoints(const std::string& endpoints,
                                                            const std::string& flag) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(endpoints, ',')) {
    const size_t colon = part.rfind(':');
    int port = 0;
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(part.substr(colon + 1), &port) || port < 1 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": \"", part, "\" is not host:port (in \"", endpoints, "\")"));
    }
    out.emplace_back(part);
  }
  return out;
}

std::string PrefixRangeEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key (etcd's convention for an empty prefix)
}

EtcdClient::EtcdClient(std::vector<std::string> endpoints, absl::Duration call_timeout)
    : endpoints_(std::move(endpoints)), call_timeout_(call_timeout) {
  for (const std::string& endpoint : endpoints_) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectBackoffMs);
    // Profiles may be large; etcd itself refuses requests over its --max-request-bytes.
    args.SetMaxReceiveMessageSize(64 << 20);
    auto channel = grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
    kv_.push_back(pb::KV::NewStub(channel));
    watch_.push_back(pb::Watch::NewStub(channel));
    lease_.push_back(pb::Lease::NewStub(channel));
    channels_.push_back(std::move(channel));
  }
}

std::string EtcdClient::endpoints_text() const { return absl::StrJoin(endpoints_, ","); }

absl::Status EtcdClient::EtcdError(const std::string& what, const grpc::Status& status,
                                   absl::Duration timeout) const {
  const std::string message =
      absl::StrCat("etcd at ", endpoints_text(), ": ", what, ": ", status.error_message());
  if (EndpointUnreachable(status)) {
    return absl::UnavailableError(absl::StrCat(
        message,
        status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
            ? absl::StrCat(" (no answer within ", absl::FormatDuration(timeout),
                           "; has the cluster lost its quorum? A write may still take effect "
                           "once it is back)")
            : ""));
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), message);
}

absl::Status EtcdClient::CallAnyEndpoint(
    const std::string& what,
    const std::function<grpc::Status(int endpoint, grpc::ClientContext*)>& call,
    absl::Duration timeout) {
  if (timeout == absl::ZeroDuration()) timeout = call_timeout_;
  const int n = static_cast<int>(endpoints_.size());
  const int first = preferred_.load(std::memory_order_relaxed);
  grpc::Status last;
  for (int i = 0; i < n; ++i) {
    const int endpoint = (first + i) % n;
    grpc::ClientContext context;
    const auto deadline = DeadlineAfter(timeout);
    context.set_deadline(deadline);
    last = AsDeadline(call(endpoint, &context), deadline);
    if (last.ok()) {
      preferred_.store(endpoint, std::memory_order_relaxed);
      return absl::OkStatus();
    }
    // A member that answers but has no quorum makes us wait out the deadline: the next
    // call starts elsewhere, but this one does not wait again (a write may have landed).
    if (last.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      preferred_.store((endpoint + 1) % n, std::memory_order_relaxed);
      break;
    }
    if (last.error_code() != grpc::StatusCode::UNAVAILABLE) break;
  }
  return EtcdError(what, last, timeout);
}

absl::StatusOr<EtcdRange> EtcdClient::RangePrefix(const std::string& prefix) {
  pb::RangeRequest request;
  request.set_key(prefix);
  request.set_range_end(PrefixRangeEnd(prefix));
  pb::RangeResponse response;
  RETURN_IF_ERROR(CallAnyEndpoint(absl::StrCat("reading ", prefix, "*"),
                                  [&](int endpoint, grpc::ClientContext* context) {
                                    response.Clear();
                                    return kv_[endpoint]->Range(context, request, &response);
                                  }));
  EtcdRange range;
  range.revision = response.header().revision();
  for (const mvccpb::KeyValue& kv : response.kvs()) range.kvs.push_back(FromProto(kv));
  return range;
}

absl::StatusOr<std::vector<std::optional<std::string>>> EtcdClient::GetMany(
    const std::vector<std::string>& keys, absl::Duration timeout) {
  // One read-only transaction of serializable ranges: one round trip, answered locally.
  pb::TxnRequest request;
  for (const std::string& key : keys) {
    pb::RangeRequest* range = request.add_success()->mutable_request_range();
    range->set_key(key);
    range->set_serializable(true);
  }
  pb::TxnResponse response;
  RETURN_IF_ERROR(CallAnyEndpoint(
      absl::StrCat("reading ", keys.size(), " key(s)"),
      [&](int endpoint, grpc::ClientContext* context) {
        response.Clear();
        return kv_[endpoint]->Txn(context, request, &response);
      },
      timeout));
  if (response.responses_size() != static_cast<int>(keys.size())) {
    return absl::InternalError(absl::StrCat("etcd at ", endpoints_text(), ": asked for ",
                                            keys.size(), " key(s), got ", response.responses_size(),
                                            " answers"));
  }
  std::vector<std::optional<std::string>> values(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const pb::RangeResponse& range = response.responses(static_cast<int>(i)).response_range();
    if (!range.kvs().empty()) values[i] = range.kvs(0).value();
  }
  return values;
}

absl::StatusOr<EtcdWrite> EtcdClient::Put(const std::string& key, const std::string& value,
                                          bool overwrite, int64_t lease) {
  // One transaction: "if the key was never created, put; else (when overwriting) put" —
  // which branch ran says whether the key existed, without a separate read.
  pb::TxnRequest request;
  pb::Compare* absent = request.add_compare();
  absent->set_key(key);
  absent->set_target(pb::Compare::CREATE);
  absent->set_result(pb::Compare::EQUAL);
  absent->set_create_revision(0);
  pb::PutRequest put;
  put.set_key(key);
  put.set_value(value);
  put.set_lease(lease);
  *request.add_success()->mutable_request_put() = put;
  if (overwrite) *request.add_failure()->mutable_request_put() = put;
  pb::TxnResponse response;
  RETURN_IF_ERROR(CallAnyEndpoint(absl::StrCat("writing ", key),
                                  [&](int endpoint, grpc::ClientContext* context) {
                                    response.Clear();
                                    return kv_[endpoint]->Txn(context, request, &response);
                                  }));
  EtcdWrite write;
  write.existed = !response.succeeded();
  if (response.succeeded() || overwrite) write.revision = response.header().revision();
  return write;
}

absl::StatusOr<int64_t> EtcdClient::Delete(const std::string& key) {
  pb::DeleteRangeRequest request;
  request.set_key(key);
  pb::DeleteRangeResponse response;
  RETURN_IF_ERROR(CallAnyEndpoint(absl::StrCat("deleting ", key),
                                  [&](int endpoint, grpc::ClientContext* context) {
                                    response.Clear();
                                    return kv_[endpoint]->DeleteRange(context, request, &response);
                                  }));
  return response.header().revision();
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(absl::Duration ttl) {
  pb::LeaseGrantRequest request;
  request.set_ttl(std::max<int64_t>(1, absl::ToInt64Seconds(ttl)));
  pb::LeaseGrantResponse response;
  RETURN_IF_ERROR(
      CallAnyEndpoint("granting a lease", [&](int endpoint, grpc::ClientContext* context) {
        response.Clear();
        return lease_[endpoint]->LeaseGrant(context, request, &response);
      }));
  if (!response.error().empty()) {
    return absl::UnavailableError(
        absl::StrCat("etcd at ", endpoints_text(), ": granting a lease: ", response.error()));
  }
  return response.id();
}

absl::Status EtcdClient::Watch(
    const std::string& prefix, int64_t start_revision,
    const std::function<void(const std::vector<EtcdEvent>&, int64_t)>& on_events, bool* compacted) {
  *compacted = false;
  const int n = static_cast<int>(endpoints_.size());
  const int endpoint = preferred_.load(std::memory_order_relaxed) % n;
  grpc::ClientContext context;
  {
    absl::MutexLock lock(&watch_mu_);
    if (watch_stopped_) return absl::CancelledError("the watch was stopped");
    watch_context_ = &context;
  }
  auto forget_context = [this] {
    absl::MutexLock lock(&watch_mu_);
    watch_context_ = nullptr;
  };
  auto stream = watch_[endpoint]->Watch(&context);
  pb::WatchRequest request;
  pb::WatchCreateRequest* create = request.mutable_create_request();
  create->set_key(prefix);
  create->set_range_end(PrefixRangeEnd(prefix));
  create->set_start_revision(start_revision);
  stream->Write(request);  // the send side stays open: etcd ends a watch whose client closed it
  pb::WatchResponse response;
  absl::Status result;
  while (stream->Read(&response)) {
    if (response.compact_revision() > 0) {
      *compacted = true;
      result = absl::FailedPreconditionError(
          absl::StrCat("etcd at ", endpoints_text(), ": revision ", start_revision,
                       " was compacted (oldest kept: ", response.compact_revision(), ")"));
      break;
    }
    if (response.canceled()) {
      result = absl::UnavailableError(
          absl::StrCat("etcd at ", endpoints_[endpoint],
                       ": the watch was cancelled: ", response.cancel_reason()));
      break;
    }
    if (response.events().empty()) continue;
    std::vector<EtcdEvent> events;
    for (const mvccpb::Event& event : response.events()) {
      events.push_back(EtcdEvent{event.type() == mvccpb::Event::DELETE, FromProto(event.kv())});
    }
    on_events(events, response.header().revision());
  }
  context.TryCancel();  // Finish waits for the stream to end
  const grpc::Status finished = stream->Finish();
  forget_context();
  if (!result.ok()) return result;
  // The member went away (or StopWatch): the caller watches again, elsewhere.
  preferred_.store((endpoint + 1) % n, std::memory_order_relaxed);
  {
    absl::MutexLock lock(&watch_mu_);
    if (watch_stopped_) return absl::CancelledError("the watch was stopped");
  }
  return absl::UnavailableError(absl::StrCat("etcd at ", endpoints_[endpoint],
                                             ": the watch ended: ", finished.error_message()));
}

void EtcdClient::StopWatch() {
  absl::MutexLock lock(&watch_mu_);
  watch_stopped_ = true;
  if (watch_context_ != nullptr) watch_context_->TryCancel();
}

}  // namespace oobleck::server
