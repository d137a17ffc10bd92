// Hardening round 3 (items 3, 5, 9 and the server half of 10), over a real channel where
// the behaviour is the service's: deep JSON in stored profiles, colliding template cache
// keys, a replica that has not read etcd yet, etcd's UNKNOWN "context deadline exceeded",
// the memory limit on loaded profiles, long names and the metrics' method labels.
#include <grpcpp/create_channel.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/server_process.h"
#include "core/profile.h"
#include "core/profile_catalog.h"
#include "core/template_planner.h"
#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "server/etcd_client.h"
#include "server/etcd_profile_store.h"
#include "server/metrics.h"
#include "server/planner_server.h"
#include "server/planner_service.h"
#include "server/profile_store.h"
#include "server/request_limits.h"
#include "tests/service/temp_dir.h"
#include "tests/service/test_load_root.h"

namespace oobleck::server {
namespace {

namespace fs = std::filesystem;
namespace pb = ::oobleck::planner::v1;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kExampleDir[] = OOBLECK_SOURCE_DIR "/examples/profiles/gpt2-xl/rtx4090";
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

ModelProfile ExampleProfile(const std::string& model = "gpt2-xl") {
  absl::StatusOr<ModelProfile> profile = LoadOobleckProfileDir(kExampleDir, model, "rtx4090", 1);
  EXPECT_TRUE(profile.ok()) << profile.status();
  return *std::move(profile);
}

std::string Nested(int depth) {
  return std::string(static_cast<size_t>(depth), '[') +
         std::string(static_cast<size_t>(depth), ']');
}

// A Planner service on 127.0.0.1:0 over `catalog`, with `options`.
struct Served {
  Served(ProfileCatalog* catalog, const ServiceOptions& options) {
    service = std::make_unique<PlannerService>(catalog, &cache, 1, options);
    auto started = StartPlannerServer("127.0.0.1:0", service.get());
    EXPECT_TRUE(started.ok()) << started.status();
    running = *std::move(started);
    stub = pb::Planner::NewStub(
        grpc::CreateChannel(running.address, grpc::InsecureChannelCredentials()));
  }
  ~Served() {
    if (running.server) running.server->Shutdown();
  }
  TemplateCache cache{64 << 20};
  std::unique_ptr<PlannerService> service;
  RunningServer running;
  std::unique_ptr<pb::Planner::Stub> stub;
};

// --- item 3: a stored value nested 200,000 deep is skipped, not fatal --------------------

TEST(StoreInputsTest, DeepStoredProfileIsDataLossNotACrash) {
  for (const std::string& text :
       {"{\"format\": " + Nested(200'000) + "}", Nested(200'000), std::string(200'000, '['),
        "{\"format\": \"oobleck-planner-profile\", \"version\": 1, \"checksum\": \"x\", "
        "\"profile\": {\"layers\": " +
            Nested(200'000) + "}}"}) {
    absl::StatusOr<ModelProfile> parsed = ParseStoredProfile(text);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(parsed.status().message(), HasSubstr("nested deeper than 64 levels"));
  }
}

TEST(StoreInputsTest, DeepFileUnderDataDirIsSkippedAtStartAndTheOthersLoad) {
  TempDir dir;
  const ModelProfile good = ExampleProfile();
  std::ofstream(dir.path() / StoredProfileFileName(good.key)) << SerializeStoredProfile(good);
  std::ofstream(dir.path() / "poison+rtx4090+mb1.json")
      << "{\"format\": " << Nested(200'000) << "}";
  ProfileCatalog catalog;
  auto store = ProfileStore::Open(dir.path().string(), &catalog);
  ASSERT_TRUE(store.ok()) << store.status();
  const ProfileStoreReport report = (*store)->LoadAll();
  EXPECT_THAT(report.loaded, ::testing::ElementsAre(good.key.ToString()));
  ASSERT_EQ(report.errors.size(), 1u);
  EXPECT_THAT(report.errors[0],
              AllOf(HasSubstr("poison+rtx4090+mb1.json"), HasSubstr("nested deeper")));
}

// --- item 5: colliding node-type names over a real channel -------------------------------

pb::NodeType OneGpuType(const std::string& name, double memory_bytes) {
  pb::NodeType type;
  type.set_name(name);
  type.set_gpu_type("rtx4090");
  type.set_gpus_per_node(1);
  type.set_gpu_memory_bytes(memory_bytes);
  type.set_intra_node_bytes_per_s(25e9);
  type.set_count(1);
  return type;
}

// What the unescaped key wrote after a name: gpus:memory:bandwidth:fingerprint.
std::string OldFields(double memory_bytes, const std::string& fingerprint) {
  return absl::StrFormat("%d:%a:%a:%s", 1, memory_bytes, 25e9, fingerprint);
}

pb::PlanTemplatesRequest TwoTypeRequest(pb::NodeType first, pb::NodeType second) {
  pb::PlanTemplatesRequest request;
  request.set_model("gpt2-xl");
  request.set_microbatches(8);
  request.mutable_cluster()->set_inter_node_bytes_per_s(12.5e9);
  *request.mutable_cluster()->add_node_types() = std::move(first);
  *request.mutable_cluster()->add_node_types() = std::move(second);
  pb::NodeMix* mix = request.add_mixes();
  mix->add_counts(1);
  mix->add_counts(0);
  return request;
}

TEST(StoreInputsTest, SixteenGibRequestAfterAnEightyGibOneIsInfeasibleNotACacheHit) {
  ProfileCatalog catalog;
  const ModelProfile profile = ExampleProfile();
  const std::string fp = profile.Fingerprint();
  ASSERT_TRUE(catalog.Put(profile, false).ok());
  Served served(&catalog, {});
  // A = {x: 80 GiB}, {y:<16 GiB fields>|z: 16 GiB}; B = {x:<80 GiB fields>|y: 16 GiB},
  // {z: 16 GiB}: the same text once names and fields are joined with '|' and ':'.
  const std::string small_first = "x:" + OldFields(80 * kGiB, fp) + "|y";
  const pb::PlanTemplatesRequest big = TwoTypeRequest(
      OneGpuType("x", 80 * kGiB), OneGpuType("y:" + OldFields(16 * kGiB, fp) + "|z", 16 * kGiB));
  const pb::PlanTemplatesRequest small =
      TwoTypeRequest(OneGpuType(small_first, 16 * kGiB), OneGpuType("z", 16 * kGiB));

  pb::PlanTemplatesResponse fresh;
  {
    Served other(&catalog, {});
    grpc::ClientContext context;
    ASSERT_TRUE(other.stub->PlanTemplates(&context, small, &fresh).ok());
  }
  ASSERT_EQ(fresh.results_size(), 1);
  ASSERT_FALSE(fresh.results(0).feasible()) << "gpt2-xl must not fit one 16 GiB GPU";

  pb::PlanTemplatesResponse first, second;
  grpc::ClientContext first_context, second_context;
  ASSERT_TRUE(served.stub->PlanTemplates(&first_context, big, &first).ok());
  ASSERT_TRUE(first.results(0).feasible()) << "gpt2-xl must fit one 80 GiB GPU";
  ASSERT_TRUE(served.stub->PlanTemplates(&second_context, small, &second).ok());
  EXPECT_FALSE(second.results(0).cache_hit());
  EXPECT_FALSE(second.results(0).feasible());
  EXPECT_EQ(second.results(0).infeasible_reason(), fresh.results(0).infeasible_reason());
}

// --- item 9: a replica that has not read etcd yet answers UNAVAILABLE --------------------

TEST(StoreInputsTest, ReplicaNotYetSyncedWithEtcdAnswersUnavailableNotNotFound) {
  // Port 1 on loopback: nothing listens, so the store never syncs.
  EtcdClient client({"127.0.0.1:1"}, absl::Milliseconds(200));
  ProfileCatalog catalog;
  EtcdProfileStore store(&client, "/t/", &catalog, [](const std::string&) {});
  store.Start({});
  ServiceOptions options;
  options.profile_store = &store;
  Served served(&catalog, options);

  pb::PlanRequest plan;
  plan.set_model("gpt2-xl");
  *plan.mutable_cluster()->add_node_types() = OneGpuType("a", 24 * kGiB);
  plan.mutable_cluster()->set_inter_node_bytes_per_s(12.5e9);
  plan.add_nodes()->set_id("n1");
  plan.mutable_nodes(0)->set_node_type("a");
  plan.add_global_batch(8);
  std::vector<grpc::Status> statuses;
  {
    grpc::ClientContext context;
    pb::PlanResponse response;
    statuses.push_back(served.stub->Plan(&context, plan, &response));
  }
  {
    grpc::ClientContext context;
    pb::ReplanRequest replan;
    *replan.mutable_request() = plan;
    replan.add_failed_node_ids("n1");
    pb::ReplanResponse response;
    statuses.push_back(served.stub->Replan(&context, replan, &response));
  }
  {
    grpc::ClientContext context;
    pb::PlanTemplatesResponse response;
    statuses.push_back(served.stub->PlanTemplates(
        &context, TwoTypeRequest(OneGpuType("a", kGiB), OneGpuType("b", kGiB)), &response));
  }
  {
    grpc::ClientContext context;
    pb::ListProfilesResponse response;
    statuses.push_back(served.stub->ListProfiles(&context, pb::ListProfilesRequest(), &response));
  }
  for (const grpc::Status& status : statuses) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
    EXPECT_THAT(status.error_message(),
                AllOf(HasSubstr("not yet synced with etcd at 127.0.0.1:1"), HasSubstr("retry")));
  }
}

// An etcd member that waited for a quorum until the deadline answers UNKNOWN "context
// deadline exceeded"; the upload must say UNAVAILABLE (retriable), as the docs promise.
class DeadlineExceededKv final : public ::etcdserverpb::KV::Service {
  grpc::Status Txn(grpc::ServerContext*, const ::etcdserverpb::TxnRequest*,
                   ::etcdserverpb::TxnResponse*) override {
    return grpc::Status(grpc::StatusCode::UNKNOWN, "context deadline exceeded");
  }
};

TEST(StoreInputsTest, EtcdUnknownContextDeadlineExceededIsUnavailable) {
  DeadlineExceededKv kv;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&kv);
  std::unique_ptr<grpc::Server> fake_etcd = builder.BuildAndStart();
  ASSERT_NE(fake_etcd, nullptr);
  EtcdClient client({absl::StrCat("127.0.0.1:", port)}, absl::Milliseconds(2000));
  ProfileCatalog catalog;
  EtcdProfileStore store(&client, "/t/", &catalog, [](const std::string&) {});
  absl::StatusOr<bool> put = store.Put(ExampleProfile(), /*replace=*/true);
  EXPECT_EQ(put.status().code(), absl::StatusCode::kUnavailable) << put.status();
  EXPECT_THAT(put.status().message(),
              AllOf(HasSubstr("etcd at 127.0.0.1:"), HasSubstr("context deadline exceeded")));
  EXPECT_EQ(catalog.size(), 0);
  fake_etcd->Shutdown();
}

// --- item 10: bounded profile memory, names and metric labels ----------------------------

grpc::Status Load(pb::Planner::Stub* stub, const std::string& model,
                  const std::string& gpu_type = "rtx4090", bool replace = false) {
  pb::LoadProfileRequest request;
  request.set_model(model);
  request.set_gpu_type(gpu_type);
  request.set_replace(replace);
  request.set_microbatch_size(1);
  request.set_directory(kExampleDir);
  grpc::ClientContext context;
  pb::LoadProfileResponse response;
  return stub->LoadProfile(&context, request, &response);
}

TEST(StoreInputsTest, ProfilesPastTheMemoryLimitAreRefusedAndNothingIsStored) {
  const int64_t one = ProfileMemoryBytes(ExampleProfile());
  TempDir dir;
  ProfileCatalog catalog(3 * one + one / 2);  // room for three
  auto store = ProfileStore::Open(dir.path().string(), &catalog);
  ASSERT_TRUE(store.ok()) << store.status();
  ServiceOptions options = WithTestLoadRoot();
  options.profile_store = store->get();
  Served served(&catalog, options);
  for (const char* model : {"m1", "m2", "m3"}) {
    grpc::Status status = Load(served.stub.get(), model);
    ASSERT_TRUE(status.ok()) << model << ": " << status.error_message();
  }
  grpc::Status fourth = Load(served.stub.get(), "m4");
  EXPECT_EQ(fourth.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(fourth.error_message(), AllOf(HasSubstr("--max_profile_mb"), HasSubstr("m4")));
  EXPECT_EQ(catalog.size(), 3);
  EXPECT_FALSE(fs::exists(dir.path() / "m4+rtx4090+mb1.json"));
  // Replacing a profile frees what it held, so that still fits.
  grpc::Status replaced = Load(served.stub.get(), "m1", "rtx4090", /*replace=*/true);
  EXPECT_TRUE(replaced.ok()) << replaced.error_message();
  EXPECT_EQ(catalog.bytes(), 3 * ProfileMemoryBytes(ExampleProfile("m1")));  // names count
}

TEST(StoreInputsTest, CatalogCountsReplacedAndRemovedProfilesAsFreed) {
  const ModelProfile profile = ExampleProfile();
  const int64_t one = ProfileMemoryBytes(profile);
  ProfileCatalog catalog(one + one / 2);
  ASSERT_TRUE(catalog.Put(profile, false).ok());
  EXPECT_EQ(catalog.bytes(), one);
  EXPECT_TRUE(catalog.Put(profile, /*replace=*/true).ok());
  EXPECT_EQ(catalog.bytes(), one);
  ModelProfile other = profile;
  other.key.model = "other";
  EXPECT_EQ(catalog.Put(other, false).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(catalog.Remove(profile.key));
  EXPECT_EQ(catalog.bytes(), 0);
  EXPECT_TRUE(catalog.Put(other, false).ok());
}

TEST(StoreInputsTest, LongModelOrGpuTypeIsInvalidArgumentNamingTheField) {
  ProfileCatalog catalog;
  Served served(&catalog, WithTestLoadRoot());
  const std::string long_name(kMaxProfileNameBytes + 1, 'm');
  grpc::Status model = Load(served.stub.get(), long_name);
  EXPECT_EQ(model.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(model.error_message(), AllOf(HasSubstr("model has 129 bytes"), HasSubstr("128")));
  grpc::Status gpu = Load(served.stub.get(), "gpt2-xl", long_name);
  EXPECT_EQ(gpu.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(gpu.error_message(), HasSubstr("gpu_type has 129 bytes"));
  EXPECT_EQ(catalog.size(), 0);
  EXPECT_TRUE(Load(served.stub.get(), std::string(kMaxProfileNameBytes, 'm')).ok());
}

TEST(StoreInputsTest, UnknownMethodNamesShareOneMetricLabel) {
  ProfileCatalog catalog;
  TemplateCache cache(1 << 20);
  auto metrics = ServerMetrics::Start("127.0.0.1:0", {&cache, &catalog, nullptr});
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  for (int i = 0; i < 2000; ++i) {
    (*metrics)->ObserveRpc(absl::StrCat("/evil.Service/Method", i), grpc::StatusCode::UNIMPLEMENTED,
                           0.001);
  }
  (*metrics)->ObserveRpc("no slash at all", grpc::StatusCode::UNIMPLEMENTED, 0.001);
  (*metrics)->ObserveRpc("/oobleck.planner.v1.Planner/Plan", grpc::StatusCode::OK, 0.001);
  const std::string text = bench::ScrapeMetrics((*metrics)->port());
  EXPECT_THAT(text, Not(HasSubstr("Method1")));
  EXPECT_THAT(text, HasSubstr("method=\"/oobleck.planner.v1.Planner/Plan\""));
  EXPECT_THAT(text,
              HasSubstr("oobleck_planner_rpcs_total{code=\"UNIMPLEMENTED\",method=\"unknown\"} "
                        "2001"));
  EXPECT_LT(text.size(), 64u << 10);
}

}  // namespace
}  // namespace oobleck::server
