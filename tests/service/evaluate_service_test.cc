// LoadProfile with Sailor's files (one profile per GPU type, micro-batch size and tp) and
// the Evaluate RPC over a real channel: the server's answer is core/fidelity's prediction
// from the same data, and bad input gets the codes and fields of docs/ERRORS.md.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/fidelity/evaluate.h"
#include "core/fidelity/sailor_data.h"
#include "core/file_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "server/profile_store.h"
#include "tests/service/served_planner.h"
#include "tests/service/temp_dir.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;
namespace fs = std::filesystem;
using ::testing::HasSubstr;

const fs::path kSailorDir = fs::path(OOBLECK_SOURCE_DIR) / "data" / "sailor";
const fs::path kRunsDir = kSailorDir / "validation" / "clariden-opt-350";

std::string Text(const fs::path& path) { return *ReadRegularFile(path); }

pb::LoadProfileRequest SailorLoad(const std::string& training_config) {
  pb::LoadProfileRequest request;
  pb::SailorProfileFiles* files = request.mutable_sailor();
  files->set_profiles_json(Text(kSailorDir / "profiles_tmp.json"));
  files->set_llm_info_json(Text(kSailorDir / "llm_info.json"));
  files->set_training_config_json(Text(kSailorDir / training_config));
  return request;
}

pb::SailorNetwork Network() {
  pb::SailorNetwork network;
  network.set_multizone_bandwidths_json(Text(kSailorDir / "multizone_bandwidths.json"));
  network.set_multizone_bandwidths_het_json(Text(kSailorDir / "multizone_bandwidths_het.json"));
  network.set_intra_node_bandwidths_json(Text(kSailorDir / "intra_node_bandwidths.json"));
  return network;
}

std::vector<fs::path> Runs() {
  std::vector<fs::path> runs;
  for (const auto& entry : fs::directory_iterator(kRunsDir)) runs.push_back(entry.path());
  std::sort(runs.begin(), runs.end());
  return runs;
}

void ExpectNear(double served, double local, const std::string& what) {
  // The store keeps ms (s × 1e3): a value may come back one rounding away.
  EXPECT_NEAR(served, local, 1e-9 * std::max(1.0, std::abs(local))) << what;
}

class EvaluateServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(served_.Start().ok()); }

  grpc::Status Load(const pb::LoadProfileRequest& request, pb::LoadProfileResponse* response) {
    grpc::ClientContext context;
    return served_.stub->LoadProfile(&context, request, response);
  }
  grpc::Status LoadOpt350() {
    pb::LoadProfileResponse response;
    return Load(SailorLoad("training_config_opt_350.json"), &response);
  }
  grpc::Status Evaluate(const pb::EvaluateRequest& request, pb::EvaluateResponse* response,
                        std::chrono::milliseconds deadline = std::chrono::seconds(60)) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    return served_.stub->Evaluate(&context, request, response);
  }
  pb::EvaluateRequest RunRequest(const std::string& plan_json) {
    pb::EvaluateRequest request;
    request.set_sailor_plan_json(plan_json);
    *request.mutable_network() = Network();
    return request;
  }

  ServedPlanner served_;
};

TEST_F(EvaluateServiceTest, SailorFilesStoreOneProfilePerGpuTypeMicroBatchSizeAndTp) {
  pb::LoadProfileRequest request = SailorLoad("training_config_opt_350.json");
  request.mutable_sailor()->add_gpu_types("GH-96");
  pb::LoadProfileResponse response;
  const grpc::Status status = Load(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  // GH-96 of OPT-350: micro-batch sizes 1 … 128, tp 1, 2 and 4 where measured (21).
  EXPECT_EQ(response.profiles_size(), 21);
  EXPECT_TRUE(response.skipped().empty());
  grpc::ClientContext context;
  pb::ListProfilesResponse list;
  ASSERT_TRUE(served_.stub->ListProfiles(&context, pb::ListProfilesRequest(), &list).ok());
  ASSERT_EQ(list.profiles_size(), 21);
  std::vector<int> tps;
  for (const pb::ProfileInfo& info : list.profiles()) {
    EXPECT_EQ(info.model(), "OPT-350");
    EXPECT_EQ(info.gpu_type(), "GH-96");
    EXPECT_EQ(info.num_layers(), 26);
    if (info.microbatch_size() == 1) tps.push_back(info.tp());
  }
  EXPECT_THAT(tps, ::testing::ElementsAre(1, 2, 4));
  // Loading again without replace changes nothing and names a key that is taken.
  const grpc::Status again = Load(request, &response);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(again.error_message(), HasSubstr("OPT-350/GH-96/mb1"));
}

TEST_F(EvaluateServiceTest, SailorFilesWithoutLayerSizesAtATpSkipThatTp) {
  pb::LoadProfileRequest request = SailorLoad("training_config_opt_350.json");
  nlohmann::json info = nlohmann::json::parse(request.sailor().llm_info_json());
  info["OPT-350"].erase("8");
  request.mutable_sailor()->set_llm_info_json(info.dump());
  request.mutable_sailor()->add_gpu_types("V100-16");
  request.set_microbatch_size(1);
  pb::LoadProfileResponse response;
  ASSERT_TRUE(Load(request, &response).ok());
  EXPECT_EQ(response.profiles_size(), 3);  // tp 1, 2, 4
  EXPECT_THAT(response.skipped(), ::testing::ElementsAre(HasSubstr("V100-16/mb1/tp8")));
}

TEST_F(EvaluateServiceTest, SailorFilesThatAreMalformedNameTheFieldAndPath) {
  pb::LoadProfileRequest request = SailorLoad("training_config_opt_350.json");
  nlohmann::json profiles = nlohmann::json::parse(request.sailor().profiles_json());
  profiles["OPT-350"]["GH-96"]["1"]["2"]["3"][0] = "slow";
  request.mutable_sailor()->set_profiles_json(profiles.dump());
  pb::LoadProfileResponse response;
  grpc::Status status = Load(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("sailor.profiles_json.profiles_tmp.json/OPT-350/GH-96/1/2/3/0 must be a "
                        "number"));
  request = SailorLoad("training_config_opt_350.json");
  request.set_gpu_type("GH-96");
  status = Load(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("gpu_type must be empty with sailor"));
}

// One home: the server's answer is what core/fidelity computes from Sailor's files.
TEST_F(EvaluateServiceTest, AgreesWithTheLocalEvaluationOnEveryMeasuredRun) {
  ASSERT_TRUE(LoadOpt350().ok());
  const absl::StatusOr<fidelity::SailorData> data = fidelity::LoadSailorData(kSailorDir);
  ASSERT_TRUE(data.ok()) << data.status();
  const std::vector<fs::path> runs = Runs();
  ASSERT_EQ(runs.size(), 15u);
  for (const fs::path& run : runs) {
    const absl::StatusOr<fidelity::SailorPlan> plan = fidelity::LoadSailorPlan(run);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const absl::StatusOr<fidelity::Evaluation> local =
        fidelity::EvaluateSailorPlan(*data, *plan, "OPT-350");
    ASSERT_TRUE(local.ok()) << local.status();
    pb::EvaluateRequest request = RunRequest(Text(run));
    request.set_model("OPT-350");
    pb::EvaluateResponse served;
    const grpc::Status status = Evaluate(request, &served);
    ASSERT_TRUE(status.ok()) << run << ": " << status.error_message();
    const std::string name = run.filename().string();
    ExpectNear(served.iteration_time_ms(), local->iteration_s * 1e3, name + " iteration");
    ExpectNear(served.pipeline_ms(), local->pipeline_s * 1e3, name + " pipeline");
    ExpectNear(served.bubbles_ms(), local->bubble_s * 1e3, name + " bubbles");
    ExpectNear(served.p2p_ms(), local->p2p_s * 1e3, name + " p2p");
    ExpectNear(served.sync_ms(), local->sync_s * 1e3, name + " sync");
    ExpectNear(served.update_ms(), local->update_s * 1e3, name + " update");
    ExpectNear(served.peak_memory_bytes(), local->peak_memory_bytes, name + " memory");
    EXPECT_EQ(served.microbatches(), local->microbatches) << name;
    EXPECT_EQ(served.slowest_pipeline(), local->slowest_pipeline) << name;
    size_t gpus = 0;
    for (const auto& stage : local->memory) gpus += stage.size();
    ASSERT_EQ(static_cast<size_t>(served.memory_per_gpu_size()), gpus) << name;
    const pb::GpuMemoryUse& first = served.memory_per_gpu(0);
    ExpectNear(first.total_bytes(), local->memory[0][0].total(), name + " stage 0");
    EXPECT_EQ(first.gpu_type(), plan->replicas[0][0].gpu_type);
    EXPECT_EQ(first.tp(), plan->replicas[0][0].tp);
  }
}

std::string FirstRun() { return Text(Runs().front()); }

TEST_F(EvaluateServiceTest, APlanNeedingAProfileNotStoredIsFailedPreconditionNamingTheKey) {
  pb::LoadProfileRequest load = SailorLoad("training_config_opt_350.json");
  load.mutable_sailor()->add_gpu_types("A100-40");  // not the runs' GH-96
  pb::LoadProfileResponse loaded;
  ASSERT_TRUE(Load(load, &loaded).ok());
  pb::EvaluateResponse response;
  const grpc::Status status = Evaluate(RunRequest(FirstRun()), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(),
              HasSubstr("sailor_plan_json.pipeline_list/0/tmp_per_stage/0/0"));
  EXPECT_THAT(status.error_message(), HasSubstr("no profile OPT-350/GH-96/mb"));
}

TEST_F(EvaluateServiceTest, AnOobleckProfileIsNotTakenForSailorsData) {
  pb::LoadProfileRequest load;
  load.set_model("OPT-350");
  load.set_gpu_type("GH-96");
  load.set_microbatch_size(1);
  pb::LayerProfile* layer = load.mutable_layers()->add_layers();
  layer->set_forward_ms(1);
  layer->set_backward_ms(2);
  pb::LoadProfileResponse loaded;
  ASSERT_TRUE(Load(load, &loaded).ok());
  nlohmann::json plan = nlohmann::json::parse(FirstRun());
  plan["mbs"] = 1;
  plan["pipeline_list"][0]["tmp_per_stage"][0][0][1] = 1;
  pb::EvaluateRequest request = RunRequest(plan.dump());
  request.set_model("OPT-350");
  pb::EvaluateResponse response;
  const grpc::Status status = Evaluate(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(),
              HasSubstr("of Sailor's format (with update times and output sizes)"));
}

TEST_F(EvaluateServiceTest, LayersThatAreNotAPartitionAreInvalidArgument) {
  ASSERT_TRUE(LoadOpt350().ok());
  nlohmann::json plan = nlohmann::json::parse(FirstRun());
  nlohmann::json& last = plan["pipeline_list"][0]["layers_per_stage"].back();
  last.erase(last.size() - 1);  // the model's last layer in no stage
  pb::EvaluateRequest request = RunRequest(plan.dump());
  request.set_model("OPT-350");
  pb::EvaluateResponse response;
  grpc::Status status = Evaluate(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("sailor_plan_json"));
  EXPECT_THAT(status.error_message(), HasSubstr("layers"));
  plan = nlohmann::json::parse(FirstRun());
  plan["pipeline_list"][0]["layers_per_stage"][0][3] = 7;  // out of order
  status = Evaluate(RunRequest(plan.dump()), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("sailor_plan_json.pipeline_list/0/layers_per_stage/0/3"));
}

TEST_F(EvaluateServiceTest, MalformedJsonIsInvalidArgumentWithThePath) {
  ASSERT_TRUE(LoadOpt350().ok());
  pb::EvaluateResponse response;
  grpc::Status status = Evaluate(RunRequest("{\"mbs\": "), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("sailor_plan_json"));
  EXPECT_THAT(status.error_message(), HasSubstr("not valid JSON"));
  nlohmann::json plan = nlohmann::json::parse(FirstRun());
  plan["mbs"] = "four";
  status = Evaluate(RunRequest(plan.dump()), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("sailor_plan_json.mbs must be an integer"));
  pb::EvaluateRequest request = RunRequest(FirstRun());
  request.mutable_network()->set_intra_node_bandwidths_json("{\"GH-96\": {\"2\": [[1, 2], 3]}}");
  status = Evaluate(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("network.intra_node_bandwidths_json.intra_node_bandwidths.json/GH-96/2"));
  status = Evaluate(pb::EvaluateRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("sailor_plan_json is required"));
}

// A runtime reserve measured on a GPU type, loaded with its profiles: listed with each, and
// Evaluate counts it in place of the calibrated fraction (docs/COST_MODEL.md).
TEST_F(EvaluateServiceTest, ARuntimeReserveLoadedWithTheProfilesIsListedAndEvaluated) {
  pb::LoadProfileRequest load = SailorLoad("training_config_opt_350.json");
  load.mutable_sailor()->add_gpu_types("GH-96");
  load.set_runtime_reserve_bytes(3e9);
  pb::LoadProfileResponse loaded;
  const grpc::Status status = Load(load, &loaded);
  ASSERT_TRUE(status.ok()) << status.error_message();
  grpc::ClientContext context;
  pb::ListProfilesResponse list;
  ASSERT_TRUE(served_.stub->ListProfiles(&context, pb::ListProfilesRequest(), &list).ok());
  ASSERT_EQ(list.profiles_size(), 21);
  for (const pb::ProfileInfo& info : list.profiles()) {
    EXPECT_TRUE(info.has_runtime_reserve_bytes());
    EXPECT_EQ(info.runtime_reserve_bytes(), 3e9);
  }
  absl::StatusOr<fidelity::SailorData> data = fidelity::LoadSailorData(kSailorDir);
  ASSERT_TRUE(data.ok()) << data.status();
  data->runtime_reserve_bytes["GH-96"] = 3e9;
  const fs::path run = Runs().front();
  const absl::StatusOr<fidelity::Evaluation> local =
      fidelity::EvaluateSailorPlan(*data, *fidelity::LoadSailorPlan(run), "OPT-350");
  ASSERT_TRUE(local.ok()) << local.status();
  pb::EvaluateResponse served;
  const grpc::Status evaluated = Evaluate(RunRequest(Text(run)), &served);
  ASSERT_TRUE(evaluated.ok()) << evaluated.error_message();
  EXPECT_EQ(served.memory_per_gpu(0).reserve_bytes(), 3e9);
  ExpectNear(served.peak_memory_bytes(), local->peak_memory_bytes, "peak memory");
}

TEST_F(EvaluateServiceTest, BadRuntimeReservesAreInvalidArgumentNamingTheField) {
  const double gh200 = *fidelity::GpuMemoryBytes("GH-96");
  for (double bad : {-1.0, std::nan(""), HUGE_VAL, gh200}) {
    pb::LoadProfileRequest load = SailorLoad("training_config_opt_350.json");
    load.mutable_sailor()->add_gpu_types("GH-96");
    load.set_runtime_reserve_bytes(bad);
    pb::LoadProfileResponse loaded;
    const grpc::Status status = Load(load, &loaded);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_THAT(status.error_message(), HasSubstr("runtime_reserve_bytes must be")) << bad;
  }
  // One reserve is one GPU type's: Sailor's files of every type cannot share it.
  pb::LoadProfileRequest all_types = SailorLoad("training_config_opt_350.json");
  all_types.set_runtime_reserve_bytes(3e9);
  pb::LoadProfileResponse loaded;
  grpc::Status status = Load(all_types, &loaded);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("runtime_reserve_bytes is one GPU type's"));
  // Oobleck's format: checked against the GPU type's memory when it is known.
  pb::LoadProfileRequest layers;
  layers.set_model("OPT-350");
  layers.set_gpu_type("RTX-2080");
  layers.set_microbatch_size(1);
  pb::LayerProfile* layer = layers.mutable_layers()->add_layers();
  layer->set_forward_ms(1);
  layer->set_backward_ms(2);
  layers.set_runtime_reserve_bytes(12e9);  // an 11 GiB card
  status = Load(layers, &loaded);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("runtime_reserve_bytes must be less than"));
  grpc::ClientContext context;
  pb::ListProfilesResponse list;
  ASSERT_TRUE(served_.stub->ListProfiles(&context, pb::ListProfilesRequest(), &list).ok());
  EXPECT_EQ(list.profiles_size(), 0);  // nothing stored
  layers.set_runtime_reserve_bytes(1.5e9);
  ASSERT_TRUE(Load(layers, &loaded).ok());
  EXPECT_EQ(loaded.profile().runtime_reserve_bytes(), 1.5e9);
}

TEST_F(EvaluateServiceTest, AnExpiredDeadlineIsDeadlineExceeded) {
  ASSERT_TRUE(LoadOpt350().ok());
  pb::EvaluateResponse response;
  const grpc::Status status =
      Evaluate(RunRequest(FirstRun()), &response, std::chrono::milliseconds(0));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

}  // namespace
}  // namespace oobleck::server

namespace oobleck::server {
namespace {

// A file a server wrote before profiles had a tp (its --data_dir, or an etcd value): it
// still loads under the same key and name, and is written back byte for byte.
TEST(StoredProfileTpTest, AProfileStoredBeforeTpExistedStillLoads) {
  const std::string text =
      Text(fs::path(OOBLECK_SOURCE_DIR) / "tests" / "service" / "stored_profile_before_tp.json");
  const absl::StatusOr<ModelProfile> profile = ParseStoredProfile(text);
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(profile->key.tp, 1);
  EXPECT_EQ(profile->key.ToString(), "gpt2-xl/rtx4090/mb1");
  EXPECT_EQ(profile->Fingerprint(), "ef313a9fc96365a5");
  EXPECT_EQ(StoredProfileFileName(profile->key), "gpt2-xl+rtx4090+mb1.json");
  EXPECT_EQ(SerializeStoredProfile(*profile), text);
}

// The reserve is persisted like the rest of a profile: a server started on the same
// --data_dir evaluates with it.
TEST(StoredRuntimeReserveTest, ARestartedServerStillHasIt) {
  TempDir dir;
  {
    // Declared before the server, so that they outlive it.
    ServiceOptions options;
    std::unique_ptr<ProfileStore> store;
    ServedPlanner first;
    auto opened = ProfileStore::Open(dir.path().string(), &first.catalog);
    ASSERT_TRUE(opened.ok()) << opened.status();
    store = *std::move(opened);
    options.profile_store = store.get();
    ASSERT_TRUE(first.Start(options).ok());
    pb::LoadProfileRequest load = SailorLoad("training_config_opt_350.json");
    load.mutable_sailor()->add_gpu_types("GH-96");
    load.set_microbatch_size(8);
    load.set_runtime_reserve_bytes(3e9);
    pb::LoadProfileResponse loaded;
    grpc::ClientContext context;
    const grpc::Status status = first.stub->LoadProfile(&context, load, &loaded);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  ServiceOptions options;
  std::unique_ptr<ProfileStore> store;
  ServedPlanner second;
  auto opened = ProfileStore::Open(dir.path().string(), &second.catalog);
  ASSERT_TRUE(opened.ok()) << opened.status();
  store = *std::move(opened);
  const ProfileStoreReport report = store->LoadAll();
  EXPECT_TRUE(report.errors.empty());
  EXPECT_EQ(report.loaded.size(), 3u);  // GH-96 at micro-batch 8: tp 1, 2, 4
  options.profile_store = store.get();
  ASSERT_TRUE(second.Start(options).ok());
  pb::EvaluateRequest request;
  request.set_sailor_plan_json(Text(kRunsDir / "plan_config_N8_D4.json"));  // mbs 8, tp 4
  *request.mutable_network() = Network();
  pb::EvaluateResponse served;
  grpc::ClientContext context;
  const grpc::Status status = second.stub->Evaluate(&context, request, &served);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(served.memory_per_gpu(0).reserve_bytes(), 3e9);
}

TEST(StoredProfileTpTest, TpAndSailorsFieldsRoundTrip) {
  ModelProfile profile;
  profile.key = ProfileKey{"OPT-350", "GH-96", 4, 2};
  LayerProfile& layer = profile.layers.emplace_back();
  layer.forward_ms = 1.5;
  layer.backward_ms = 3;
  layer.param_bytes = 1e6;
  layer.activation_bytes = 2e6;
  layer.update_ms = 0.7;
  layer.activation_output_bytes = 3e5;
  EXPECT_EQ(profile.key.ToString(), "OPT-350/GH-96/mb4/tp2");
  EXPECT_EQ(StoredProfileFileName(profile.key), "OPT-350+GH-96+mb4+tp2.json");
  const absl::StatusOr<ModelProfile> read = ParseStoredProfile(SerializeStoredProfile(profile));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->key, profile.key);
  EXPECT_EQ(read->layers[0].update_ms, 0.7);
  EXPECT_EQ(read->layers[0].activation_output_bytes, 3e5);
  EXPECT_EQ(read->Fingerprint(), profile.Fingerprint());
  EXPECT_FALSE(read->runtime_reserve_bytes.has_value());
  profile.runtime_reserve_bytes = 2.5e9;
  const absl::StatusOr<ModelProfile> with_reserve =
      ParseStoredProfile(SerializeStoredProfile(profile));
  ASSERT_TRUE(with_reserve.ok()) << with_reserve.status();
  EXPECT_EQ(with_reserve->runtime_reserve_bytes, 2.5e9);
  EXPECT_EQ(with_reserve->Fingerprint(), profile.Fingerprint());  // not layer data
}

}  // namespace
}  // namespace oobleck::server
