// Structure-aware fuzzing of the three planning RPCs through the real service: the input
// does not become bytes of a message but decisions, field by field — how many node types
// (0 to 300), their counts, GPUs and bandwidths (special values included: 0, negative,
// NaN, inf, 5e-324, 1e308), mixes, node lists, global batches, plans that half-match
// their cluster, failures and joins. Each request goes over a real channel to an
// in-process server with a short deadline. A run fails (abort) on a crash, on a status a
// client is never meant to see (UNKNOWN, INTERNAL, ...), on a call that returns later than
// its deadline + 100 ms, or on a search that keeps burning CPU after its call ended.
// Node-type names are sometimes built of the separators a cache key could be made of
// ('|', ':', '#', ',', hex floats, ...), and every template answered from the cache is
// compared with a fresh answer of a service that caches nothing: a key shared by two
// different clusters would serve one the other's template. Shapes with properties of their
// own: profiles of subnormal layer times and runaway mix sizes (answered within the
// deadline); profiles of extreme magnitudes (an OK answer's times and speed-ups are finite
// and > 0), prices and budgets near the price steps (no plan over budget), Replan of
// many-type clusters with f >= 1 (no RESOURCE_EXHAUSTED where a fresh Plan of the
// survivors works). Oobleck's drop-in (issue 26): Instantiate (an OK answer uses every
// node, splits exactly the global batch and adds up its time), and the request fields
// stage_gpus, inline profiles and fault_tolerance_rule, decided after every older decision
// so that the older seeds keep their meaning. Evaluate (issue 27): plans in Sailor's format
// against stored per-tp profiles, after an Instantiate, then plans of ours (job_plan).
#include <fuzzer/FuzzedDataProvider.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/file_reader.h"
#include "core/profile.h"
#include "core/profile_catalog.h"
#include "core/template_planner.h"
#include "nlohmann/json.hpp"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "server/planner_server.h"
#include "server/planner_service.h"

namespace {

namespace pb = ::oobleck::planner::v1;
using Clock = std::chrono::steady_clock;

constexpr auto kDeadline = std::chrono::milliseconds(150);
constexpr auto kLateness = std::chrono::milliseconds(100);
// CPU the process may use in the kQuiet after a call that hit its deadline (threads
// winding down); a search still running would use about all of it on every core.
constexpr auto kQuiet = std::chrono::milliseconds(200);
constexpr double kMaxCpuAfterMs = 60;

std::string ReadOrDie(const std::string& path) {
  absl::StatusOr<std::string> text = oobleck::ReadRegularFile(path);
  if (!text.ok()) std::abort();
  return *std::move(text);
}

struct Harness {
  oobleck::ProfileCatalog catalog;
  oobleck::TemplateCache cache{32 << 20};
  oobleck::TemplateCache no_cache{0};  // caches nothing: every answer is searched
  std::unique_ptr<oobleck::server::PlannerService> service;
  std::unique_ptr<oobleck::server::PlannerService> fresh_service;
  oobleck::server::RunningServer running;
  oobleck::server::RunningServer fresh_running;
  std::unique_ptr<pb::Planner::Stub> stub;
  std::unique_ptr<pb::Planner::Stub> fresh;  // the same catalog, never a cache hit
  pb::PlanResponse plan;                     // a real plan of a 4-node cluster, for Replan requests
  pb::OobleckProfileFiles files;             // the harness profile's files, for inline profiles
  std::string fingerprint;                   // and its fingerprint
  pb::SailorNetwork network;                 // data/sailor's bandwidths, for Evaluate

  Harness() {
    const std::string dir = OOBLECK_SOURCE_DIR "/examples/profiles/gpt2-xl/rtx4090";
    auto profile = oobleck::LoadOobleckProfileDir(dir, "gpt2-xl", "rtx4090", 1);
    if (!profile.ok()) std::abort();
    fingerprint = profile->Fingerprint();
    if (!catalog.Put(*std::move(profile), false).ok()) std::abort();
    files.set_mb_json(ReadOrDie(dir + "/mb1.json"));
    files.set_allreduce_in_node_json(ReadOrDie(dir + "/allreduce_in_node.json"));
    files.set_allreduce_across_nodes_json(ReadOrDie(dir + "/allreduce_across_nodes.json"));
    service = std::make_unique<oobleck::server::PlannerService>(&catalog, &cache, 2);
    auto started = oobleck::server::StartPlannerServer("127.0.0.1:0", service.get());
    if (!started.ok()) std::abort();
    running = *std::move(started);
    stub = pb::Planner::NewStub(
        grpc::CreateChannel(running.address, grpc::InsecureChannelCredentials()));
    fresh_service = std::make_unique<oobleck::server::PlannerService>(&catalog, &no_cache, 2);
    auto fresh_started = oobleck::server::StartPlannerServer("127.0.0.1:0", fresh_service.get());
    if (!fresh_started.ok()) std::abort();
    fresh_running = *std::move(fresh_started);
    fresh = pb::Planner::NewStub(
        grpc::CreateChannel(fresh_running.address, grpc::InsecureChannelCredentials()));
    pb::PlanRequest request;
    request.set_model("gpt2-xl");
    request.set_microbatches(8);
    request.add_global_batch(64);
    pb::Cluster* cluster = request.mutable_cluster();
    cluster->set_inter_node_bytes_per_s(1e9);
    for (int i = 0; i < 2; ++i) {
      pb::NodeType* t = cluster->add_node_types();
      t->set_name(absl::StrCat("t", i));
      t->set_gpu_type("rtx4090");
      t->set_gpus_per_node(1 + i);
      t->set_gpu_memory_bytes(24e9);
      t->set_intra_node_bytes_per_s(1e10);
      t->set_count(2);
    }
    request.set_missing_allreduce_in_node(pb::MISSING_ALLREDUCE_RING);
    grpc::ClientContext context;
    if (!stub->Plan(&context, request, &plan).ok()) std::abort();
    LoadSailorProfiles();
  }

  // OPT-350's profiles of Sailor (GH-96 and A100-40, micro-batch size 2), and its network.
  void LoadSailorProfiles() {
    const std::string sailor = OOBLECK_SOURCE_DIR "/data/sailor/";
    pb::LoadProfileRequest load;
    load.set_microbatch_size(2);
    pb::SailorProfileFiles* files = load.mutable_sailor();
    files->set_profiles_json(ReadOrDie(sailor + "profiles_tmp.json"));
    files->set_llm_info_json(ReadOrDie(sailor + "llm_info.json"));
    files->set_training_config_json(ReadOrDie(sailor + "training_config_opt_350.json"));
    files->add_gpu_types("GH-96");
    files->add_gpu_types("A100-40");
    pb::LoadProfileResponse loaded;
    grpc::ClientContext context;
    if (!stub->LoadProfile(&context, load, &loaded).ok()) std::abort();
    network.set_multizone_bandwidths_json(ReadOrDie(sailor + "multizone_bandwidths.json"));
    network.set_multizone_bandwidths_het_json(ReadOrDie(sailor + "multizone_bandwidths_het.json"));
    network.set_intra_node_bandwidths_json(ReadOrDie(sailor + "intra_node_bandwidths.json"));
  }
};

Harness& Get() {
  static Harness* harness = new Harness;
  return *harness;
}

double Special(FuzzedDataProvider& in) {
  static const double kValues[] = {24e9,
                                   1e10,
                                   1e9,
                                   0,
                                   -1,
                                   5e-324,
                                   1e308,
                                   std::numeric_limits<double>::infinity(),
                                   std::numeric_limits<double>::quiet_NaN(),
                                   1};
  if (in.ConsumeBool()) return kValues[in.ConsumeIntegralInRange<size_t>(0, 9)];
  return in.ConsumeFloatingPoint<double>();
}

// Free text for a string field, printable ASCII: proto3 strings must be UTF-8, and a
// message that is not does not parse (gRPC itself answers INTERNAL before any handler).
std::string Text(FuzzedDataProvider& in, size_t max_length) {
  std::string text = in.ConsumeRandomLengthString(max_length);
  for (char& c : text) c = static_cast<char>(' ' + static_cast<unsigned char>(c) % 95);
  return text;
}

// A name made of what cache keys are made of: separators, numbers as %d and %a print
// them, and other names, so that two clusters' keys could meet if a key joined names
// unescaped.
std::string SeparatorName(FuzzedDataProvider& in, const char* prefix, int i) {
  // The last two are what an unescaped key wrote after a one-GPU node type's name (GPUs,
  // memory 1e308 or 1e9 bytes, bandwidth 1e10, the harness profile's fingerprint), so a
  // collision of such keys is reachable (seeded by make_rpc_structure_seeds.py).
  static const char* kPieces[] = {"|",
                                  ":",
                                  "#",
                                  ",",
                                  "=",
                                  "|mix=",
                                  "1",
                                  "8",
                                  "0x1p+34",
                                  "0x1.4p+36",
                                  "-",
                                  "x",
                                  "y",
                                  "t0",
                                  "t1",
                                  "3#",
                                  "|1#t",
                                  "%",
                                  "+mb1",
                                  "1:0x1.1ccf385ebc8ap+1023:0x1.2a05f2p+33:ef313a9fc96365a5",
                                  "1:0x1.dcd65p+29:0x1.2a05f2p+33:ef313a9fc96365a5"};
  constexpr size_t kCount = sizeof(kPieces) / sizeof(kPieces[0]);
  std::string name = absl::StrCat(prefix, i);
  const int pieces = in.ConsumeIntegralInRange(1, 8);
  for (int k = 0; k < pieces; ++k) {
    name += kPieces[in.ConsumeIntegralInRange<size_t>(0, kCount - 1)];
  }
  return name;
}

std::string Name(FuzzedDataProvider& in, const char* prefix, int i) {
  switch (in.ConsumeIntegralInRange(0, 4)) {
    case 0:
      return "";
    case 1:
      return Text(in, 12);
    case 4:
      return SeparatorName(in, prefix, i);
    default:
      return absl::StrCat(prefix, i);
  }
}

void FillCluster(FuzzedDataProvider& in, pb::Cluster* cluster) {
  const int types =
      in.ConsumeBool() ? in.ConsumeIntegralInRange(0, 300) : in.ConsumeIntegralInRange(0, 6);
  cluster->set_inter_node_bytes_per_s(Special(in));
  for (int i = 0; i < types && in.remaining_bytes() > 0; ++i) {
    pb::NodeType* t = cluster->add_node_types();
    t->set_name(Name(in, "t", i));
    t->set_gpu_type(in.ConsumeBool() ? "rtx4090" : Name(in, "g", i));
    t->set_gpus_per_node(in.ConsumeIntegralInRange(-1, 70));
    t->set_gpu_memory_bytes(Special(in));
    t->set_intra_node_bytes_per_s(Special(in));
    t->set_count(in.ConsumeBool() ? in.ConsumeIntegralInRange(-1, 9)
                                  : in.ConsumeIntegralInRange(-1, 5000));
    if (in.ConsumeIntegralInRange(0, 3) == 0) {
      t->mutable_derive()->set_measured_gpu_type(in.ConsumeBool() ? "rtx4090" : "");
      t->mutable_derive()->set_relative_speed(Special(in));
    }
  }
}

template <typename Request>
void FillJob(FuzzedDataProvider& in, Request* r) {
  r->set_model(in.ConsumeIntegralInRange(0, 7) == 0 ? Text(in, 8) : "gpt2-xl");
  r->set_microbatch_size(in.ConsumeIntegralInRange(-1, 2));
  static const char* kCostModels[] = {"", "1f1b", "oobleck-sosp23", "gpipe"};
  r->set_cost_model(kCostModels[in.ConsumeIntegralInRange(0, 3)]);
  r->set_microbatches(in.ConsumeIntegralInRange(-1, 64));
  if (in.ConsumeBool()) r->set_optimizer_state_multiplier(Special(in));
  r->set_missing_allreduce_in_node(
      static_cast<pb::MissingAllreduce>(in.ConsumeIntegralInRange(0, 2)));
  FillCluster(in, r->mutable_cluster());
}

// Sizes of searches that once ran away from their call (issue "Hardening round 3", item 2):
// min_nodes = max_nodes = the number of one-node types (one mix, found by walking 2^types
// branches), or huge node counts with min = max = their sum. Decided last, so that an input
// that ends before (every older seed) keeps its meaning: 0 leaves the request as it is.
void RunawaySizes(FuzzedDataProvider& in, pb::PlanTemplatesRequest* r) {
  pb::Cluster* cluster = r->mutable_cluster();
  int64_t total = 0;
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 1:
      for (pb::NodeType& type : *cluster->mutable_node_types()) type.set_count(1);
      r->set_min_nodes(cluster->node_types_size());
      r->set_max_nodes(cluster->node_types_size());
      break;
    case 2:
      for (pb::NodeType& type : *cluster->mutable_node_types()) {
        type.set_count(in.ConsumeBool() ? 1 << 19 : in.ConsumeIntegralInRange(1, 1 << 20));
        total += type.count();
      }
      r->set_min_nodes(static_cast<int32_t>(std::min<int64_t>(total, INT32_MAX)));
      r->set_max_nodes(r->min_nodes());
      break;
    case 3:
      for (const pb::NodeType& type : cluster->node_types()) total += std::max(type.count(), 0);
      r->set_min_nodes(static_cast<int32_t>(std::min<int64_t>(total, INT32_MAX)));
      r->set_max_nodes(r->min_nodes());
      break;
    default:
      break;
  }
}

// An inline profile: fuzzed layers, Oobleck's files (the harness's, or text), or a
// fingerprint (the harness profile's, or text), under either all-reduce key convention.
void FillInlineProfile(FuzzedDataProvider& in, pb::InlineProfile* profile) {
  profile->set_gpu_type(in.ConsumeBool() ? "rtx4090" : Name(in, "g", 0));
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0: {
      const int layers = in.ConsumeIntegralInRange(0, 6);
      for (int l = 0; l < layers; ++l) {
        pb::LayerProfile* layer = profile->mutable_layers()->add_layers();
        layer->set_forward_ms(Special(in));
        layer->set_backward_ms(Special(in));
        layer->set_param_bytes(in.ConsumeBool() ? Special(in) : 1e6);
        layer->set_activation_bytes(in.ConsumeBool() ? Special(in) : 1e6);
        const int keys = in.ConsumeIntegralInRange(0, 3);
        for (int k = 0; k < keys; ++k) {
          (*layer->mutable_allreduce_in_node_ms())[in.ConsumeIntegralInRange(-1, 9)] = Special(in);
          (*layer->mutable_allreduce_across_nodes_ms())[in.ConsumeIntegralInRange(-1, 9)] =
              Special(in);
        }
      }
      break;
    }
    case 1:
      *profile->mutable_files() = Get().files;
      if (in.ConsumeBool()) profile->mutable_files()->set_allreduce_in_node_json(Text(in, 64));
      if (in.ConsumeBool()) profile->mutable_files()->set_mb_json(Text(in, 64));
      break;
    case 2:
      profile->set_fingerprint(Get().fingerprint);
      break;
    default:
      profile->set_fingerprint(Text(in, 20));
  }
  profile->set_allreduce_key(static_cast<pb::AllreduceKey>(in.ConsumeIntegralInRange(0, 2)));
}

// The drop-in's fields of PlanTemplatesRequest and PlanRequest: 0 (an input that ended
// before) leaves the request as it is.
template <typename Request>
void DropInFields(FuzzedDataProvider& in, Request* r) {
  r->set_stage_gpus(static_cast<pb::StageGpus>(in.ConsumeIntegralInRange(0, 3)));
  const int profiles = in.ConsumeIntegralInRange(0, 2);
  for (int i = 0; i < profiles; ++i) FillInlineProfile(in, r->add_profiles());
}

pb::PlanTemplatesRequest TemplatesRequest(FuzzedDataProvider& in) {
  pb::PlanTemplatesRequest r;
  FillJob(in, &r);
  r.set_min_nodes(in.ConsumeIntegralInRange(-1, 9));
  r.set_max_nodes(in.ConsumeIntegralInRange(-1, 9));
  const int mixes = in.ConsumeIntegralInRange(0, 4);
  for (int j = 0; j < mixes; ++j) {
    pb::NodeMix* mix = r.add_mixes();
    const int counts = in.ConsumeIntegralInRange(0, r.cluster().node_types_size() + 1);
    for (int k = 0; k < counts; ++k) mix->add_counts(in.ConsumeIntegralInRange(-1, 9));
  }
  RunawaySizes(in, &r);
  DropInFields(in, &r);
  return r;
}

pb::PlanRequest PlanRequest(FuzzedDataProvider& in) {
  pb::PlanRequest r;
  FillJob(in, &r);
  const int batches = in.ConsumeIntegralInRange(0, 3);
  for (int j = 0; j < batches; ++j) r.add_global_batch(in.ConsumeIntegralInRange(-1, 5000));
  r.set_min_nodes_per_pipeline(in.ConsumeIntegralInRange(-1, 9));
  r.set_max_nodes_per_pipeline(in.ConsumeIntegralInRange(-1, 9));
  if (in.ConsumeBool()) {
    const int nodes = in.ConsumeIntegralInRange(0, 12);
    for (int j = 0; j < nodes; ++j) {
      pb::Node* node = r.add_nodes();
      node->set_id(Name(in, "n", j));
      node->set_node_type(Name(in, "t", in.ConsumeIntegralInRange(0, 3)));
    }
  }
  DropInFields(in, &r);
  r.set_fault_tolerance_rule(static_cast<pb::FaultToleranceRule>(in.ConsumeIntegralInRange(0, 2)));
  r.set_fault_tolerance(r.fault_tolerance() + in.ConsumeIntegralInRange(0, 3));
  if (in.ConsumeBool()) r.set_objective("oobleck-instantiation");
  return r;
}

// Up to three edits of a plan of ours: a stage moved to another node index, its layer end
// or GPUs changed, a pipeline's micro-batches or node id changed. Returns how many were
// decided (0: the plan is as it was).
int EditPlan(FuzzedDataProvider& in, pb::ClusterPlan* plan) {
  const int edits = in.ConsumeIntegralInRange(0, 3);
  for (int j = 0; j < edits && plan->pipelines_size() > 0; ++j) {
    pb::PlannedPipeline* p =
        plan->mutable_pipelines(in.ConsumeIntegralInRange(0, plan->pipelines_size() - 1));
    pb::PipelineTemplate* t = p->mutable_template_();
    switch (in.ConsumeIntegralInRange(0, 4)) {
      case 0:
        if (t->stages_size() > 0) {
          t->mutable_stages(in.ConsumeIntegralInRange(0, t->stages_size() - 1))
              ->set_node_index(in.ConsumeIntegralInRange(-2, 9));
        }
        break;
      case 1:
        if (t->stages_size() > 0) {
          t->mutable_stages(in.ConsumeIntegralInRange(0, t->stages_size() - 1))
              ->set_layer_end(in.ConsumeIntegralInRange(-1, 60));
        }
        break;
      case 2:
        if (t->stages_size() > 0) {
          t->mutable_stages(in.ConsumeIntegralInRange(0, t->stages_size() - 1))
              ->set_gpus(in.ConsumeIntegralInRange(-1, 9));
        }
        break;
      case 3:
        p->set_microbatches(in.ConsumeIntegralInRange(-1, 100));
        break;
      default:
        if (p->node_ids_size() > 0) p->set_node_ids(0, Name(in, "n", j));
    }
  }
  return edits;
}

// The harness's real plan, half-broken: events, stages and node ids changed.
pb::ReplanRequest ReplanRequest(FuzzedDataProvider& in) {
  const pb::PlanResponse& planned = Get().plan;
  pb::ReplanRequest r;
  *r.mutable_request() = planned.request();
  *r.mutable_plan() = planned.plan();
  const int failures = in.ConsumeIntegralInRange(0, 5);
  for (int j = 0; j < failures; ++j) {
    r.add_failed_node_ids(
        in.ConsumeBool() && planned.request().nodes_size() > 0
            ? planned.request()
                  .nodes(in.ConsumeIntegralInRange(0, planned.request().nodes_size() - 1))
                  .id()
            : Name(in, "x", j));
  }
  const int joins = in.ConsumeIntegralInRange(0, 3);
  for (int j = 0; j < joins; ++j) {
    pb::Node* node = r.add_joined_nodes();
    node->set_id(Name(in, "new", j));
    node->set_node_type(Name(in, "t", in.ConsumeIntegralInRange(0, 2)));
  }
  if (in.ConsumeBool()) r.set_tolerance(Special(in));
  EditPlan(in, r.mutable_plan());
  if (in.ConsumeBool()) FillCluster(in, r.mutable_request()->mutable_cluster());
  pb::PlanRequest* job = r.mutable_request();
  job->set_stage_gpus(static_cast<pb::StageGpus>(in.ConsumeIntegralInRange(0, 3)));
  job->set_fault_tolerance_rule(
      static_cast<pb::FaultToleranceRule>(in.ConsumeIntegralInRange(0, 2)));
  job->set_fault_tolerance(job->fault_tolerance() + in.ConsumeIntegralInRange(0, 3));
  return r;
}

bool Documented(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return true;
    default:
      return false;
  }
}

double CpuMs() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec * 1e3 + usage.ru_utime.tv_usec / 1e3 + usage.ru_stime.tv_sec * 1e3 +
         usage.ru_stime.tv_usec / 1e3;
}

// One call, checked as the header says; its status, and the response in *out when given.
template <typename Request, typename Response>
grpc::Status Call(grpc::Status (pb::Planner::Stub::*method)(grpc::ClientContext*, const Request&,
                                                            Response*),
                  const Request& request, const char* name, Response* out = nullptr,
                  std::chrono::milliseconds deadline = kDeadline) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  Response local;
  Response& response = out != nullptr ? *out : local;
  // The harness is set up (server started, profiles loaded) before the call is timed: the
  // first call of a run would otherwise count its setup against the deadline.
  pb::Planner::Stub* stub = Get().stub.get();
  const auto start = Clock::now();
  const grpc::Status status = (stub->*method)(&context, request, &response);
  const auto took = Clock::now() - start;
  // A finding names the request it was given, so it can be replayed with grpcurl too.
  const auto fail = [&request] {
    std::fprintf(stderr, "request: %s\n", request.ShortDebugString().c_str());
    std::abort();
  };
  if (!Documented(status.error_code())) {
    std::fprintf(stderr, "%s answered undocumented code %d: %s\n", name, status.error_code(),
                 status.error_message().c_str());
    fail();
  }
  if (took > deadline + kLateness) {
    std::fprintf(
        stderr, "%s took %lld ms against a %lld ms deadline\n", name,
        static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()),
        static_cast<long long>(deadline.count()));
    fail();
  }
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    // The client gave up; the server's search must have stopped with the call.
    std::this_thread::sleep_for(kLateness);
    const double before = CpuMs();
    std::this_thread::sleep_for(kQuiet);
    if (CpuMs() - before > kMaxCpuAfterMs) {
      std::fprintf(stderr, "%s: the server still burnt %.0f ms of CPU %lld ms after the call\n",
                   name, CpuMs() - before, static_cast<long long>(kLateness.count()));
      fail();
    }
  }
  return status;
}

// Every template of `cached` that was a cache hit equals the fresh service's answer to the
// same request (when that answers within its deadline).
void CheckCacheHits(const pb::PlanTemplatesRequest& request,
                    const pb::PlanTemplatesResponse& cached) {
  bool any_hit = false;
  for (const pb::MixTemplate& r : cached.results()) any_hit |= r.cache_hit();
  if (!any_hit) return;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 4 * kDeadline);
  pb::PlanTemplatesResponse fresh;
  if (!Get().fresh->PlanTemplates(&context, request, &fresh).ok()) return;
  if (fresh.results_size() != cached.results_size()) std::abort();
  for (int i = 0; i < cached.results_size(); ++i) {
    const pb::MixTemplate& a = cached.results(i);
    const pb::MixTemplate& b = fresh.results(i);
    if (!a.cache_hit()) continue;
    if (a.mix_label() != b.mix_label() || a.feasible() != b.feasible() ||
        a.infeasible_reason() != b.infeasible_reason() ||
        a.template_().iteration_time_ms() != b.template_().iteration_time_ms()) {
      std::fprintf(stderr,
                   "cache hit %s differs from a fresh answer: feasible %d vs %d, %.17g vs "
                   "%.17g ms, \"%s\" vs \"%s\"\nrequest: %s\n",
                   a.mix_label().c_str(), a.feasible(), b.feasible(),
                   a.template_().iteration_time_ms(), b.template_().iteration_time_ms(),
                   a.infeasible_reason().c_str(), b.infeasible_reason().c_str(),
                   request.ShortDebugString().c_str());
      std::abort();
    }
  }
}

// ---- Shapes of answers with impossible values and of the f-guarantee's count (docs/
// ERRORS.md: an OK answer never has a non-finite or zero iteration time or speed-up, a
// plan never costs more than budget_per_hour, and Replan of one failure with f >= 1 does
// not answer RESOURCE_EXHAUSTED where a fresh Plan of the survivors works). ----

[[noreturn]] void Finding(const std::string& what, const google::protobuf::Message& request) {
  std::fprintf(stderr, "%s\nrequest: %s\n", what.c_str(), request.ShortDebugString().c_str());
  std::abort();
}

// Times and sizes across the magnitudes a double holds (0, tiny, huge), or any double.
double Magnitude(FuzzedDataProvider& in) {
  static const double kValues[] = {0, 1e-300, 1e-12, 1e-3, 1, 1e3, 1e12, 1e15, 1e307, 1e308};
  if (in.ConsumeBool()) return in.ConsumeFloatingPoint<double>();
  return kValues[in.ConsumeIntegralInRange<size_t>(0, 9)];
}

// Every size of an OK Plan answer: finite times > 0, a finite speed-up >= 0 (0: n/a).
void CheckFiniteAnswer(const pb::PlanRequest& request, const pb::PlanResponse& response) {
  for (const pb::BatchSizePlan& size : response.sweep()) {
    if (!size.feasible()) continue;
    const double t = size.plan().iteration_time_ms();
    if (!(std::isfinite(t) && t > 0)) Finding(absl::StrCat("iteration_time_ms = ", t), request);
    if (!(std::isfinite(size.speedup()) && size.speedup() >= 0)) {
      Finding(absl::StrCat("speedup = ", size.speedup()), request);
    }
    if (!std::isfinite(size.data_parallel_iteration_time_ms())) {
      Finding("data_parallel_iteration_time_ms is not finite", request);
    }
  }
}

void PlanTemplates(FuzzedDataProvider& in) {
  const pb::PlanTemplatesRequest request = TemplatesRequest(in);
  pb::PlanTemplatesResponse response;
  if (Call(&pb::Planner::Stub::PlanTemplates, request, "PlanTemplates", &response).ok()) {
    CheckCacheHits(request, response);
  }
}

// A profile uploaded with fuzzed layer values (subnormal times among them: issue
// "Hardening round 3", item 1, where 5e-324 ms layers made a search grow without bound),
// then templates of a cluster whose node types may use it.
void UploadedProfileTemplates(FuzzedDataProvider& in) {
  pb::LoadProfileRequest load;
  load.set_model("gpt2-xl");
  load.set_gpu_type("uploaded");
  load.set_microbatch_size(1);
  load.set_replace(true);
  const int layers = in.ConsumeIntegralInRange(1, 8);
  for (int l = 0; l < layers; ++l) {
    pb::LayerProfile* layer = load.mutable_layers()->add_layers();
    layer->set_forward_ms(Special(in));
    layer->set_backward_ms(Special(in));
    layer->set_param_bytes(in.ConsumeBool() ? Special(in) : 1e6);
    layer->set_activation_bytes(in.ConsumeBool() ? Special(in) : 1e6);
  }
  Call(&pb::Planner::Stub::LoadProfile, load, "LoadProfile");
  pb::PlanTemplatesRequest request = TemplatesRequest(in);
  for (pb::NodeType& type : *request.mutable_cluster()->mutable_node_types()) {
    if (in.ConsumeBool()) type.set_gpu_type("uploaded");
  }
  Call(&pb::Planner::Stub::PlanTemplates, request, "PlanTemplates");
}

// A profile of extreme layer times, sizes and all-reduce tables (or all zeros), loaded
// under a fuzz GPU type, then planned on 1-2 node types of it.
void ExtremeProfilePlan(FuzzedDataProvider& in) {
  pb::LoadProfileRequest load;
  load.set_model("fz-model");
  load.set_gpu_type(absl::StrCat("fz", in.ConsumeIntegralInRange(0, 3)));
  load.set_microbatch_size(1);
  load.set_replace(true);
  const int layers = in.ConsumeIntegralInRange(1, 4);
  const bool all_zero = in.ConsumeBool();
  for (int l = 0; l < layers; ++l) {
    pb::LayerProfile* layer = load.mutable_layers()->add_layers();
    layer->set_forward_ms(all_zero ? 0 : Magnitude(in));
    layer->set_backward_ms(all_zero ? 0 : Magnitude(in));
    layer->set_param_bytes(all_zero ? 0 : Magnitude(in));
    layer->set_activation_bytes(all_zero ? 0 : Magnitude(in));
    (*layer->mutable_allreduce_in_node_ms())[1] = 0;
    if (in.ConsumeBool()) (*layer->mutable_allreduce_across_nodes_ms())[2] = Magnitude(in);
  }
  if (!Call(&pb::Planner::Stub::LoadProfile, load, "LoadProfile").ok()) return;
  pb::PlanRequest r;
  r.set_model("fz-model");
  static const char* kCostModels[] = {"1f1b", "oobleck-sosp23"};
  r.set_cost_model(kCostModels[in.ConsumeIntegralInRange(0, 1)]);
  r.set_microbatches(in.ConsumeIntegralInRange(1, 8));
  r.set_missing_allreduce_in_node(pb::MISSING_ALLREDUCE_RING);
  r.set_fault_tolerance(in.ConsumeIntegralInRange(0, 2));
  r.add_global_batch(in.ConsumeIntegralInRange(1, 64));
  pb::Cluster* cluster = r.mutable_cluster();
  static const double kInterNode[] = {1e9, 0, 5e-324, 1e308};
  cluster->set_inter_node_bytes_per_s(kInterNode[in.ConsumeIntegralInRange(0, 3)]);
  const int types = in.ConsumeIntegralInRange(1, 2);
  for (int t = 0; t < types; ++t) {
    pb::NodeType* type = cluster->add_node_types();
    type->set_name(absl::StrCat("t", t));
    type->set_gpu_type(load.gpu_type());
    type->set_gpus_per_node(in.ConsumeIntegralInRange(1, 2));
    type->set_gpu_memory_bytes(in.ConsumeBool() ? 1e300 : 24e9);
    type->set_intra_node_bytes_per_s(1e10);
    type->set_count(in.ConsumeIntegralInRange(1, 3));
  }
  pb::PlanResponse response;
  if (Call(&pb::Planner::Stub::Plan, r, "Plan", &response).ok()) CheckFiniteAnswer(r, response);
}

// Prices per hour of very different magnitudes, on the 0.0001 grid or between its steps.
double Price(FuzzedDataProvider& in) {
  static const double kValues[] = {0, 4e-05, 1e-4, 0.0003, 0.1 + 0.2, 1.0, 2.4801, 1e6, 5e-05};
  if (in.ConsumeBool()) return in.ConsumeFloatingPoint<double>();
  return kValues[in.ConsumeIntegralInRange<size_t>(0, 8)];
}

// A priced Plan with a budget near the price steps: no plan may cost more than the budget.
void BudgetPlan(FuzzedDataProvider& in) {
  pb::PlanRequest r;
  r.set_model("gpt2-xl");
  r.set_microbatches(8);
  r.set_missing_allreduce_in_node(pb::MISSING_ALLREDUCE_RING);
  r.set_objective(in.ConsumeBool() ? "cost" : "time");
  r.add_global_batch(in.ConsumeIntegralInRange(1, 64));
  r.set_max_nodes_per_pipeline(in.ConsumeIntegralInRange(1, 2));
  pb::Cluster* cluster = r.mutable_cluster();
  cluster->set_inter_node_bytes_per_s(1e9);
  const int types = in.ConsumeIntegralInRange(1, 3);
  double all = 0;  // the price of every node
  for (int t = 0; t < types; ++t) {
    pb::NodeType* type = cluster->add_node_types();
    type->set_name(absl::StrCat("t", t));
    type->set_gpu_type("rtx4090");
    type->set_gpus_per_node(in.ConsumeIntegralInRange(1, 2));
    type->set_gpu_memory_bytes(24e9);
    type->set_intra_node_bytes_per_s(1e10);
    type->set_count(in.ConsumeIntegralInRange(1, 3));
    type->set_price_per_hour(Price(in));
    all += type->price_per_hour() * type->count();
  }
  double budget = 0;
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0:
      budget = Price(in);
      break;
    case 1:  // a quarter of every node's price or more, one ulp below
      budget = std::nextafter(all * in.ConsumeIntegralInRange(1, 4) / 4, 0.0);
      break;
    case 2:  // half a price step above a step
      budget = (in.ConsumeIntegralInRange(0, 1000000) + 0.5) / 1e4;
      break;
    default:
      budget = in.ConsumeFloatingPoint<double>();
  }
  r.set_budget_per_hour(budget);
  pb::PlanResponse response;
  if (!Call(&pb::Planner::Stub::Plan, r, "Plan", &response).ok() || budget <= 0) return;
  for (const pb::BatchSizePlan& size : response.sweep()) {
    if (size.feasible() && !(size.plan().price_per_hour() <= budget)) {
      Finding(absl::StrFormat("a plan of %.17g per hour over budget_per_hour = %.17g",
                              size.plan().price_per_hour(), budget),
              r);
    }
  }
}

// Plan of up to 8 node types of up to 6 two-GPU nodes with f >= 1, then Replan of one
// failure: RESOURCE_EXHAUSTED is a finding when a fresh Plan of the survivors works.
void ManyTypeReplan(FuzzedDataProvider& in) {
  constexpr auto kLong = std::chrono::milliseconds(3000);  // a real plan first
  pb::PlanRequest r;
  r.set_model("gpt2-xl");
  r.set_microbatches(16);
  r.set_missing_allreduce_in_node(pb::MISSING_ALLREDUCE_RING);
  r.set_fault_tolerance(in.ConsumeIntegralInRange(1, 2));
  r.add_global_batch(in.ConsumeBool() ? 128 : in.ConsumeIntegralInRange(1, 256));
  r.set_max_nodes_per_pipeline(in.ConsumeIntegralInRange(1, 2));
  pb::Cluster* cluster = r.mutable_cluster();
  cluster->set_inter_node_bytes_per_s(12.5e9);
  const int types = in.ConsumeIntegralInRange(2, 8), per_type = in.ConsumeIntegralInRange(1, 6);
  for (int t = 0; t < types; ++t) {
    pb::NodeType* type = cluster->add_node_types();
    type->set_name(absl::StrCat("t", t));
    type->set_gpu_type(t == 0 ? "rtx4090" : absl::StrCat("g", t));
    type->set_gpus_per_node(2);
    type->set_gpu_memory_bytes((16 + 2 * t) * 1073741824.0);
    type->set_intra_node_bytes_per_s(25e9);
    type->set_count(per_type);
    if (t > 0) {
      type->mutable_derive()->set_measured_gpu_type("rtx4090");
      type->mutable_derive()->set_relative_speed(1.0 / (1 + t));
    }
  }
  pb::PlanResponse planned;
  if (!Call(&pb::Planner::Stub::Plan, r, "Plan", &planned, kLong).ok()) return;
  if (planned.plan().pipelines_size() == 0) return;
  pb::ReplanRequest replan;
  *replan.mutable_request() = planned.request();
  *replan.mutable_plan() = planned.plan();
  const pb::PlannedPipeline& victim =
      planned.plan().pipelines(in.ConsumeIntegralInRange(0, planned.plan().pipelines_size() - 1));
  const std::string failed = victim.node_ids(0);
  replan.add_failed_node_ids(failed);
  pb::ReplanResponse replanned;
  const grpc::Status status = Call(&pb::Planner::Stub::Replan, replan, "Replan", &replanned, kLong);
  if (status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) return;
  pb::PlanRequest survivors = planned.request();
  survivors.clear_nodes();
  for (const pb::Node& node : planned.request().nodes()) {
    if (node.id() != failed) *survivors.add_nodes() = node;
  }
  for (pb::NodeType& type : *survivors.mutable_cluster()->mutable_node_types()) type.set_count(0);
  if (Call(&pb::Planner::Stub::Plan, survivors, "Plan", &planned, kLong).ok()) {
    Finding(absl::StrCat("Replan of one failure answered RESOURCE_EXHAUSTED (",
                         status.error_message(), ") where a fresh Plan of the survivors works"),
            replan);
  }
}

// Instantiate: templates, node counts, batches and all-reduce tables at and past their limits
// (docs/ERRORS.md#instantiate). An OK answer uses every node, splits exactly the global batch
// with one count per used template, and its times add up and are finite.
pb::InstantiateRequest InstantiateRequest(FuzzedDataProvider& in) {
  pb::InstantiateRequest r;
  const int templates =
      in.ConsumeBool() ? in.ConsumeIntegralInRange(0, 1100) : in.ConsumeIntegralInRange(0, 5);
  for (int t = 0; t < templates && in.remaining_bytes() > 0; ++t) {
    pb::TemplateShape* shape = r.add_templates();
    shape->set_num_nodes(in.ConsumeBool() ? in.ConsumeIntegralInRange(1, 8)
                                          : in.ConsumeIntegral<int32_t>());
    shape->set_num_stages(in.ConsumeIntegralInRange(-1, 64));
    shape->set_iteration_time_ms(in.ConsumeBool() ? in.ConsumeIntegralInRange(1, 1000)
                                                  : Magnitude(in));
  }
  r.set_num_nodes(in.ConsumeBool() ? in.ConsumeIntegralInRange(-1, 40)
                                   : in.ConsumeIntegral<int32_t>());
  r.set_global_batch(in.ConsumeBool() ? in.ConsumeIntegralInRange(-1, 600)
                                      : in.ConsumeIntegralInRange(-1, (1 << 20) + 1));
  const int entries = in.ConsumeIntegralInRange(0, 40);
  for (int e = 0; e < entries; ++e) {
    const int pipelines = in.ConsumeBool() ? e + 1 : in.ConsumeIntegralInRange(-1, 70000);
    (*r.mutable_allreduce_across_pipelines_ms())[pipelines] = in.ConsumeBool() ? e : Special(in);
  }
  if (in.ConsumeBool()) {
    for (int t = 0; t < r.templates_size(); ++t) {
      r.add_instances(in.ConsumeIntegralInRange(-1, 9));
    }
    if (in.ConsumeBool()) r.add_instances(1);  // one too many
    if (in.ConsumeBool()) r.set_num_nodes(0);
  }
  return r;
}

void CheckInstantiateAnswer(const pb::InstantiateRequest& r, const pb::InstantiateResponse& a) {
  if (a.instances_size() != r.templates_size() || a.microbatches_size() != r.templates_size()) {
    Finding("an answer without one instance and micro-batch count per template", r);
  }
  int64_t nodes = 0, batch = 0, pipelines = 0;
  double slowest = 0;
  for (int t = 0; t < r.templates_size(); ++t) {
    if (a.instances(t) < 0 || (a.instances(t) > 0) != (a.microbatches(t) > 0)) {
      Finding(absl::StrCat("template ", t, ": instances ", a.instances(t), ", microbatches ",
                           a.microbatches(t)),
              r);
    }
    nodes += int64_t{a.instances(t)} * r.templates(t).num_nodes();
    batch += int64_t{a.instances(t)} * a.microbatches(t);
    pipelines += a.instances(t);
    if (a.instances(t) > 0) {
      slowest = std::max(slowest, r.templates(t).iteration_time_ms() * a.microbatches(t));
    }
  }
  const int64_t want_nodes = r.num_nodes() > 0 ? r.num_nodes() : nodes;
  if (nodes != want_nodes || batch != r.global_batch() || pipelines != a.num_pipelines()) {
    Finding(absl::StrCat("an answer of ", nodes, " nodes, ", batch, " micro-batches, ", pipelines,
                         " pipelines (num_pipelines ", a.num_pipelines(), ")"),
            r);
  }
  if (!std::isfinite(a.iteration_time_ms()) || a.pipeline_time_ms() != slowest ||
      a.iteration_time_ms() != a.pipeline_time_ms() + a.allreduce_ms()) {
    Finding(absl::StrFormat("times %.17g = %.17g + %.17g (slowest pipeline %.17g)",
                            a.iteration_time_ms(), a.pipeline_time_ms(), a.allreduce_ms(), slowest),
            r);
  }
}

void Instantiate(FuzzedDataProvider& in) {
  const pb::InstantiateRequest request = InstantiateRequest(in);
  pb::InstantiateResponse response;
  if (Call(&pb::Planner::Stub::Instantiate, request, "Instantiate", &response).ok()) {
    CheckInstantiateAnswer(request, response);
  }
}

// Evaluate (docs/ERRORS.md#evaluate): a plan in Sailor's format of fuzzed stages, layer
// cuts (a partition or not), replicas, GPU types, tp, mbs and gbs, against OPT-350's stored
// profiles. An OK answer's times are finite, >= 0 and add up; its memory is finite and > 0.
std::string SailorPlan(FuzzedDataProvider& in) {
  static const char* kGpus[] = {"GH-96", "A100-40", "V100-16", ""};
  const int stages = in.ConsumeIntegralInRange(0, 6), dp = in.ConsumeIntegralInRange(0, 4);
  const int mbs = in.ConsumeBool() ? 2 : in.ConsumeIntegralInRange(-1, 9);
  nlohmann::json pipeline = {{"num_stages", stages},
                             {"layers_per_stage", nlohmann::json::array()},
                             {"dp", nlohmann::json::array()},
                             {"tmp_per_stage", nlohmann::json::array()}};
  int next = 0;
  for (int s = 0; s < stages; ++s) {
    const int size = s + 1 == stages && in.ConsumeBool() ? std::max(26 - next, 1)
                                                         : in.ConsumeIntegralInRange(0, 9);
    nlohmann::json layers = nlohmann::json::array();
    for (int l = 0; l < size; ++l) layers.push_back(in.ConsumeBool() ? next + l : l);
    next += size;
    pipeline["layers_per_stage"].push_back(layers);
    pipeline["dp"].push_back(dp);
    nlohmann::json replicas = nlohmann::json::array();
    for (int r = 0; r < dp; ++r) {
      const std::string gpu = kGpus[in.ConsumeIntegralInRange(0, 3)];
      const int tp = in.ConsumeBool() ? 1 << in.ConsumeIntegralInRange(0, 2)
                                      : in.ConsumeIntegralInRange(-1, 9);
      replicas.push_back({{{gpu, 4, in.ConsumeBool() ? "zone-a" : "us-central1-a"}}, tp});
    }
    pipeline["tmp_per_stage"].push_back(replicas);
  }
  nlohmann::json plan = {{"mbs", mbs},
                         {"gbs", in.ConsumeBool() ? mbs * dp * in.ConsumeIntegralInRange(1, 64)
                                                  : in.ConsumeIntegralInRange(-1, 1 << 12)},
                         {"pipeline_list", {pipeline}}};
  std::string text = plan.dump();
  if (in.ConsumeBool()) text.resize(in.ConsumeIntegralInRange<size_t>(0, text.size()));
  return text;
}

void Evaluate(FuzzedDataProvider& in) {
  pb::EvaluateRequest request;
  request.set_model(in.ConsumeBool() ? "OPT-350" : "");
  request.set_sailor_plan_json(SailorPlan(in));
  *request.mutable_network() = Get().network;
  if (in.ConsumeBool()) request.mutable_network()->clear_intra_node_bandwidths_json();
  pb::EvaluateResponse a;
  if (!Call(&pb::Planner::Stub::Evaluate, request, "Evaluate", &a).ok()) return;
  const double parts = a.pipeline_ms() + a.sync_ms() + a.update_ms();
  if (!std::isfinite(a.iteration_time_ms()) || !(a.iteration_time_ms() > 0) ||
      std::abs(a.iteration_time_ms() - parts) > 1e-9 * a.iteration_time_ms() ||
      !(a.bubbles_ms() >= 0) || !(a.p2p_ms() >= 0) || !std::isfinite(a.peak_memory_bytes()) ||
      !(a.peak_memory_bytes() > 0)) {
    Finding(absl::StrFormat("an evaluation of %.17g ms = %.17g + %.17g + %.17g, peak %.17g bytes",
                            a.iteration_time_ms(), a.pipeline_ms(), a.sync_ms(), a.update_ms(),
                            a.peak_memory_bytes()),
            request);
  }
}

// Evaluate of a plan of ours (job_plan, docs/ERRORS.md#evaluate): the harness's Plan answer,
// as it was planned or half-broken as Replan's plans are (EditPlan), with its request's
// options or cluster changed, or with the fields a job_plan must leave unset (model,
// network) set. Any OK answer's times are finite, >= 0 and add up; the plan as it was
// planned, for the request it was planned for, has the Plan answer's figures bit for bit.
void EvaluateJobPlan(FuzzedDataProvider& in) {
  const pb::PlanResponse& planned = Get().plan;
  pb::EvaluateRequest request;
  pb::JobPlan* job = request.mutable_job_plan();
  *job->mutable_request() = planned.request();
  *job->mutable_plan() = planned.plan();
  bool as_planned = true;
  switch (in.ConsumeIntegralInRange(0, 6)) {
    case 1:
      request.set_model(in.ConsumeBool() ? "gpt2-xl" : Text(in, 8));
      break;
    case 2:
      *request.mutable_network() = Get().network;
      break;
    case 3:
      if (in.ConsumeBool()) {
        job->clear_request();
      } else {
        job->clear_plan();
      }
      break;
    case 4:
      as_planned = EditPlan(in, job->mutable_plan()) == 0;
      break;
    case 5: {
      pb::PlanRequest* options = job->mutable_request();
      static const char* kCostModels[] = {"", "1f1b", "oobleck-sosp23", "gpipe"};
      options->set_cost_model(kCostModels[in.ConsumeIntegralInRange(0, 3)]);
      static const char* kObjectives[] = {"", "time", "oobleck-instantiation", "cost", "x"};
      options->set_objective(kObjectives[in.ConsumeIntegralInRange(0, 4)]);
      options->set_microbatches(in.ConsumeIntegralInRange(-1, 64));
      if (in.ConsumeBool()) options->set_optimizer_state_multiplier(Special(in));
      as_planned = false;
      break;
    }
    case 6:
      FillCluster(in, job->mutable_request()->mutable_cluster());
      as_planned = false;
      break;
    default:
      break;
  }
  pb::EvaluateResponse a;
  if (!Call(&pb::Planner::Stub::Evaluate, request, "Evaluate", &a).ok()) return;
  if (!std::isfinite(a.iteration_time_ms()) || !(a.iteration_time_ms() >= 0) ||
      !(a.pipeline_ms() >= 0) || !(a.sync_ms() >= 0) || !(a.bubbles_ms() >= 0) ||
      !(a.p2p_ms() >= 0) || a.iteration_time_ms() != a.pipeline_ms() + a.sync_ms() ||
      !std::isfinite(a.peak_memory_bytes()) || !(a.peak_memory_bytes() >= 0)) {
    Finding(absl::StrFormat("a job_plan evaluation of %.17g ms = %.17g + %.17g, bubbles %.17g, "
                            "p2p %.17g, peak %.17g bytes",
                            a.iteration_time_ms(), a.pipeline_ms(), a.sync_ms(), a.bubbles_ms(),
                            a.p2p_ms(), a.peak_memory_bytes()),
            request);
  }
  const pb::ClusterPlan& plan = planned.plan();
  if (as_planned &&
      (a.iteration_time_ms() != plan.iteration_time_ms() ||
       a.pipeline_ms() != plan.pipeline_time_ms() || a.sync_ms() != plan.allreduce_ms())) {
    Finding(absl::StrFormat("the plan as planned evaluated to %.17g = %.17g + %.17g ms, Plan "
                            "answered %.17g = %.17g + %.17g",
                            a.iteration_time_ms(), a.pipeline_ms(), a.sync_ms(),
                            plan.iteration_time_ms(), plan.pipeline_time_ms(), plan.allreduce_ms()),
            request);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  switch (in.ConsumeIntegralInRange(0, 7)) {
    case 0:
      PlanTemplates(in);
      // A second request in the same input may meet the first one's cache entries.
      if (in.remaining_bytes() > 0 && in.ConsumeBool()) PlanTemplates(in);
      break;
    case 1: {
      pb::PlanResponse response;
      Call(&pb::Planner::Stub::Plan, PlanRequest(in), "Plan", &response);
      break;
    }
    case 2: {
      pb::ReplanResponse response;
      Call(&pb::Planner::Stub::Replan, ReplanRequest(in), "Replan", &response);
      break;
    }
    case 3:
      UploadedProfileTemplates(in);
      break;
    case 4:
      ExtremeProfilePlan(in);
      break;
    case 5:
      BudgetPlan(in);
      break;
    case 6:
      ManyTypeReplan(in);
      break;
    default:
      Instantiate(in);
      // Decided after every older decision, so that older seeds keep their meaning.
      if (in.remaining_bytes() > 0 && in.ConsumeBool()) {
        Evaluate(in);
        if (in.remaining_bytes() > 0 && in.ConsumeBool()) EvaluateJobPlan(in);
      }
  }
  return 0;
}
