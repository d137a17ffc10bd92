// The Planner service in-process on 127.0.0.1:0, called through a real gRPC channel.
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/profile_catalog.h"
#include "core/template_planner.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "server/planner_server.h"
#include "server/planner_service.h"
#include "server/templates_request.h"
#include "tests/service/test_load_root.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kExampleDir[] = OOBLECK_SOURCE_DIR "/examples/profiles/gpt2-xl/rtx4090";
constexpr char kRingDir[] = OOBLECK_EXAMPLE_DATA "/profiles-ring/gpt2-xl/rtx4090";
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int64_t kCacheBytes = 64 << 20;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Sums of the example profile, read straight from its mb1.json.
struct ProfileSums {
  double forward_ms = 0, backward_ms = 0, param_bytes = 0, activation_bytes = 0;
  int layers = 0;
};

ProfileSums ExampleSums() {
  ProfileSums sums;
  for (const auto& layer :
       nlohmann::json::parse(ReadFile(std::string(kExampleDir) + "/mb1.json"))) {
    sums.forward_ms += layer["forward"].get<double>();
    sums.backward_ms += layer["backward"].get<double>();
    sums.param_bytes += layer["mem_required"][0].get<double>();
    sums.activation_bytes += layer["mem_required"][1].get<double>();
    ++sums.layers;
  }
  return sums;
}

pb::NodeType MakeNodeType(const std::string& name, const std::string& gpu_type, int gpus,
                          double memory_bytes, int count) {
  pb::NodeType type;
  type.set_name(name);
  type.set_gpu_type(gpu_type);
  type.set_gpus_per_node(gpus);
  type.set_gpu_memory_bytes(memory_bytes);
  type.set_intra_node_bytes_per_s(25e9);
  type.set_count(count);
  return type;
}

// GPT-2 XL on 1-GPU RTX 4090 nodes, 1..4 nodes, Oobleck's own cost model without M.
pb::PlanTemplatesRequest HomogeneousRequest() {
  pb::PlanTemplatesRequest request;
  request.set_model("gpt2-xl");
  request.set_cost_model("oobleck-sosp23");
  *request.mutable_cluster()->add_node_types() =
      MakeNodeType("rtx4090", "rtx4090", 1, 24 * kGiB, 4);
  request.mutable_cluster()->set_inter_node_bytes_per_s(12.5e9);
  return request;
}

std::vector<int> Counts(const pb::NodeMix& mix) {
  return std::vector<int>(mix.counts().begin(), mix.counts().end());
}

// Structural checks every template must pass: stages cut [0, num_layers) contiguously,
// every pipeline node hosts stages whose GPUs add up to its GPUs, names match node_order.
void ExpectWellFormed(const pb::PipelineTemplate& tmpl, int num_layers,
                      const std::map<std::string, int>& gpus_per_type) {
  ASSERT_FALSE(tmpl.stages().empty());
  ASSERT_EQ(tmpl.node_order_size(), tmpl.num_nodes());
  int next_layer = 0;
  int last_node = -1;
  std::vector<int> gpus_on_node(tmpl.num_nodes(), 0);
  int gpus = 0;
  for (const pb::Stage& stage : tmpl.stages()) {
    EXPECT_EQ(stage.layer_begin(), next_layer);
    EXPECT_GT(stage.layer_end(), stage.layer_begin());
    next_layer = stage.layer_end();
    ASSERT_GE(stage.node_index(), 0);
    ASSERT_LT(stage.node_index(), tmpl.num_nodes());
    EXPECT_GE(stage.node_index(), last_node) << "stages run through nodes in order";
    last_node = stage.node_index();
    EXPECT_EQ(stage.node_type(), tmpl.node_order(stage.node_index()));
    gpus_on_node[stage.node_index()] += stage.gpus();
    gpus += stage.gpus();
    EXPECT_GT(stage.forward_ms(), 0);
    EXPECT_GT(stage.backward_ms(), 0);
  }
  EXPECT_EQ(next_layer, num_layers);
  for (int node = 0; node < tmpl.num_nodes(); ++node) {
    EXPECT_EQ(gpus_on_node[node], gpus_per_type.at(tmpl.node_order(node))) << "node " << node;
  }
  EXPECT_EQ(tmpl.num_gpus(), gpus);
}

// --- a minimal client of reflection v1alpha (its generated C++ code is not installed) --

// Top-level length-delimited fields of a protobuf message: field number -> payloads.
std::multimap<int, std::string> LengthDelimitedFields(const std::string& bytes) {
  std::multimap<int, std::string> fields;
  size_t pos = 0;
  auto varint = [&]() -> uint64_t {
    uint64_t value = 0;
    for (int shift = 0; pos < bytes.size(); shift += 7) {
      const uint8_t byte = static_cast<uint8_t>(bytes[pos++]);
      value |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) break;
    }
    return value;
  };
  while (pos < bytes.size()) {
    const uint64_t tag = varint();
    const int wire_type = static_cast<int>(tag & 7);
    if (wire_type == 0) {
      varint();
    } else if (wire_type == 2) {
      const uint64_t length = varint();
      fields.emplace(static_cast<int>(tag >> 3), bytes.substr(pos, length));
      pos += length;
    } else {
      ADD_FAILURE() << "unexpected wire type " << wire_type;
      break;
    }
  }
  return fields;
}

// One request/response exchange on ServerReflectionInfo; request_field is the oneof
// field of ServerReflectionRequest (4 file_containing_symbol, 7 list_services).
std::string ReflectionExchange(const std::shared_ptr<grpc::Channel>& channel, int request_field,
                               const std::string& value) {
  std::string request;
  request.push_back(static_cast<char>((request_field << 3) | 2));
  request.push_back(static_cast<char>(value.size()));  // values here are < 128 bytes
  request += value;

  grpc::GenericStub stub(channel);
  grpc::CompletionQueue queue;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto call = stub.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &queue);
  void* tag = nullptr;
  bool ok = false;
  auto step = [&](intptr_t expected) {
    EXPECT_TRUE(queue.Next(&tag, &ok));
    EXPECT_EQ(reinterpret_cast<intptr_t>(tag), expected);
    return ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  EXPECT_TRUE(step(1));
  grpc::Slice slice(request);
  grpc::ByteBuffer out(&slice, 1);
  call->Write(out, reinterpret_cast<void*>(2));
  EXPECT_TRUE(step(2));
  call->WritesDone(reinterpret_cast<void*>(3));
  EXPECT_TRUE(step(3));
  grpc::ByteBuffer in;
  call->Read(&in, reinterpret_cast<void*>(4));
  const bool read = step(4);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  step(5);
  EXPECT_TRUE(status.ok()) << status.error_message();
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  if (!read) return "";
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(in.Dump(&slices).ok());
  std::string response;
  for (const grpc::Slice& s : slices) {
    response.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return response;
}

class PlannerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service_ =
        std::make_unique<PlannerService>(&catalog_, &cache_, /*threads=*/2, WithTestLoadRoot());
    absl::StatusOr<RunningServer> running = StartPlannerServer("127.0.0.1:0", service_.get());
    ASSERT_TRUE(running.ok()) << running.status();
    running_ = *std::move(running);
    ASSERT_GT(running_.port, 0);
    ASSERT_EQ(running_.address, "127.0.0.1:" + std::to_string(running_.port));
    channel_ = grpc::CreateChannel(running_.address, grpc::InsecureChannelCredentials());
    stub_ = pb::Planner::NewStub(channel_);
  }

  void TearDown() override {
    if (running_.server != nullptr) {
      running_.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    }
  }

  grpc::Status LoadProfile(const pb::LoadProfileRequest& request,
                           pb::LoadProfileResponse* response = nullptr) {
    pb::LoadProfileResponse ignored;
    grpc::ClientContext context;
    return stub_->LoadProfile(&context, request, response ? response : &ignored);
  }

  grpc::Status LoadExample(const std::string& gpu_type = "rtx4090",
                           pb::LoadProfileResponse* response = nullptr) {
    pb::LoadProfileRequest request;
    request.set_model("gpt2-xl");
    request.set_gpu_type(gpu_type);
    request.set_directory(kExampleDir);
    return LoadProfile(request, response);
  }

  grpc::Status Plan(const pb::PlanTemplatesRequest& request, pb::PlanTemplatesResponse* response,
                    std::chrono::milliseconds timeout = std::chrono::seconds(120)) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    return stub_->PlanTemplates(&context, request, response);
  }

  pb::GetStatsResponse Stats() {
    grpc::ClientContext context;
    pb::GetStatsResponse response;
    const grpc::Status status = stub_->GetStats(&context, pb::GetStatsRequest(), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  ProfileCatalog catalog_;
  TemplateCache cache_{kCacheBytes};
  std::unique_ptr<PlannerService> service_;
  RunningServer running_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Planner::Stub> stub_;
};

// --------------------------------------------------------------------------- profiles

TEST_F(PlannerServiceTest, LoadsProfileFromDirectory) {
  pb::LoadProfileResponse response;
  const grpc::Status status = LoadExample("rtx4090", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const ProfileSums sums = ExampleSums();
  const pb::ProfileInfo& info = response.profile();
  EXPECT_FALSE(response.replaced());
  EXPECT_EQ(info.model(), "gpt2-xl");
  EXPECT_EQ(info.gpu_type(), "rtx4090");
  EXPECT_EQ(info.microbatch_size(), 1);  // the only mb<m>.json there
  EXPECT_EQ(info.num_layers(), 50);
  EXPECT_EQ(sums.layers, 50);
  EXPECT_FALSE(info.fingerprint().empty());
  EXPECT_NEAR(info.total_forward_ms(), sums.forward_ms, 1e-6 * sums.forward_ms);
  EXPECT_NEAR(info.total_backward_ms(), sums.backward_ms, 1e-6 * sums.backward_ms);
  EXPECT_NEAR(info.total_param_bytes(), sums.param_bytes, 1e-6 * sums.param_bytes);
  // Only "1" was measured for the in-node all-reduce.
  EXPECT_THAT(info.allreduce_in_node_gpus(), ElementsAre(1));
  EXPECT_EQ(Stats().profiles_loaded(), 1);
}

TEST_F(PlannerServiceTest, InlineFilesGiveTheSameProfileAsTheDirectory) {
  pb::LoadProfileResponse from_directory;
  ASSERT_TRUE(LoadExample("rtx4090", &from_directory).ok());

  pb::LoadProfileRequest request;
  request.set_model("gpt2-xl");
  request.set_gpu_type("rtx4090-inline");
  request.set_microbatch_size(1);
  pb::OobleckProfileFiles* files = request.mutable_files();
  files->set_mb_json(ReadFile(std::string(kExampleDir) + "/mb1.json"));
  files->set_allreduce_in_node_json(ReadFile(std::string(kExampleDir) + "/allreduce_in_node.json"));
  files->set_allreduce_across_nodes_json(
      ReadFile(std::string(kExampleDir) + "/allreduce_across_nodes.json"));
  pb::LoadProfileResponse inline_files;
  const grpc::Status status = LoadProfile(request, &inline_files);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(inline_files.profile().gpu_type(), "rtx4090-inline");
  EXPECT_EQ(inline_files.profile().num_layers(), 50);
  EXPECT_EQ(inline_files.profile().fingerprint(), from_directory.profile().fingerprint());
  EXPECT_DOUBLE_EQ(inline_files.profile().total_forward_ms(),
                   from_directory.profile().total_forward_ms());
}

TEST_F(PlannerServiceTest, LoadsParsedLayers) {
  pb::LoadProfileRequest request;
  request.set_model("tiny");
  request.set_gpu_type("t4");
  request.set_microbatch_size(2);
  for (int i = 0; i < 3; ++i) {
    pb::LayerProfile* layer = request.mutable_layers()->add_layers();
    layer->set_forward_ms(1.0 + i);
    layer->set_backward_ms(2.0 + i);
    layer->set_param_bytes(1000);
    layer->set_activation_bytes(10);
    (*layer->mutable_allreduce_in_node_ms())[1] = 0.1;
    (*layer->mutable_allreduce_in_node_ms())[2] = 0.2;
    (*layer->mutable_allreduce_across_nodes_ms())[1] = 0.3;
  }
  pb::LoadProfileResponse response;
  const grpc::Status status = LoadProfile(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.profile().microbatch_size(), 2);
  EXPECT_EQ(response.profile().num_layers(), 3);
  EXPECT_DOUBLE_EQ(response.profile().total_forward_ms(), 6.0);
  EXPECT_DOUBLE_EQ(response.profile().total_backward_ms(), 9.0);
  EXPECT_DOUBLE_EQ(response.profile().total_param_bytes(), 3000.0);
  EXPECT_THAT(response.profile().allreduce_in_node_gpus(), ElementsAre(1, 2));
}

TEST_F(PlannerServiceTest, AcceptsProfilesLargerThanGrpcsDefaultMessageLimit) {
  // gRPC rejects requests over 4 MiB by default; the server raises the limit to 64 MiB.
  constexpr int kLayers = 150000;
  pb::LoadProfileRequest request;
  request.set_model("huge");
  request.set_gpu_type("h100");
  request.set_microbatch_size(1);
  for (int i = 0; i < kLayers; ++i) {
    pb::LayerProfile* layer = request.mutable_layers()->add_layers();
    layer->set_forward_ms(1.0 + i);
    layer->set_backward_ms(2.0 + i);
    layer->set_param_bytes(1e6 + i);
    layer->set_activation_bytes(1e5 + i);
  }
  ASSERT_GT(request.ByteSizeLong(), 4u << 20);
  pb::LoadProfileResponse response;
  const grpc::Status status = LoadProfile(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.profile().num_layers(), kLayers);
}

TEST_F(PlannerServiceTest, DuplicateIsAlreadyExistsUnlessReplaced) {
  ASSERT_TRUE(LoadExample().ok());
  const grpc::Status duplicate = LoadExample();
  EXPECT_EQ(duplicate.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(duplicate.error_message(), HasSubstr("rtx4090"));

  pb::LoadProfileRequest request;
  request.set_model("gpt2-xl");
  request.set_gpu_type("rtx4090");
  request.set_directory(kExampleDir);
  request.set_replace(true);
  pb::LoadProfileResponse response;
  const grpc::Status replaced = LoadProfile(request, &response);
  ASSERT_TRUE(replaced.ok()) << replaced.error_message();
  EXPECT_TRUE(response.replaced());
  EXPECT_EQ(Stats().profiles_loaded(), 1);
}

TEST_F(PlannerServiceTest, RejectsBadLoadProfileRequests) {
  struct Case {
    std::string name;
    std::function<void(pb::LoadProfileRequest*)> mutate;
    grpc::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"no model", [](auto* r) { r->clear_model(); }, grpc::StatusCode::INVALID_ARGUMENT,
       "model is required"},
      {"no gpu type", [](auto* r) { r->clear_gpu_type(); }, grpc::StatusCode::INVALID_ARGUMENT,
       "gpu_type is required"},
      {"no source", [](auto* r) { r->clear_source(); }, grpc::StatusCode::INVALID_ARGUMENT,
       "source is required"},
      {"negative micro-batch size", [](auto* r) { r->set_microbatch_size(-1); },
       grpc::StatusCode::INVALID_ARGUMENT, "microbatch_size must be >= 0 (got -1)"},
      {"files without micro-batch size", [](auto* r) { r->mutable_files()->set_mb_json("[]"); },
       grpc::StatusCode::INVALID_ARGUMENT, "microbatch_size must be >= 1"},
      {"empty layers",
       [](auto* r) {
         r->set_microbatch_size(1);
         r->mutable_layers();
       },
       grpc::StatusCode::INVALID_ARGUMENT, "layers.layers must not be empty"},
      {"all-reduce key 0",
       [](auto* r) {
         r->set_microbatch_size(1);
         pb::LayerProfile* layer = r->mutable_layers()->add_layers();
         layer->set_forward_ms(1);
         (*layer->mutable_allreduce_in_node_ms())[0] = 1;
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       "layers.layers[0].allreduce_in_node_ms key 0 is not a stage's GPU count under "
       "ALLREDUCE_KEY_GPUS"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    pb::LoadProfileRequest request;
    request.set_model("gpt2-xl");
    request.set_gpu_type("rtx4090");
    request.set_directory(kExampleDir);
    c.mutate(&request);
    const grpc::Status status = LoadProfile(request);
    EXPECT_EQ(status.error_code(), c.code) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.message));
  }

  // Errors from core keep their code and name what was wrong.
  pb::LoadProfileRequest missing;
  missing.set_model("gpt2-xl");
  missing.set_gpu_type("rtx4090");
  missing.set_directory("/nonexistent/profile/dir");
  const grpc::Status missing_status = LoadProfile(missing);
  EXPECT_FALSE(missing_status.ok());
  EXPECT_THAT(missing_status.error_message(), HasSubstr("/nonexistent/profile/dir"));

  pb::LoadProfileRequest malformed;
  malformed.set_model("gpt2-xl");
  malformed.set_gpu_type("rtx4090");
  malformed.set_microbatch_size(1);
  malformed.mutable_files()->set_mb_json("[{\"forward\": 1.0");
  malformed.mutable_files()->set_allreduce_in_node_json("[{\"1\": 0.1}]");
  malformed.mutable_files()->set_allreduce_across_nodes_json("[{\"1\": 0.1}]");
  EXPECT_EQ(LoadProfile(malformed).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Stats().profiles_loaded(), 0);
}

TEST_F(PlannerServiceTest, ListsProfilesSortedAndFiltered) {
  ASSERT_TRUE(LoadExample("rtx4090").ok());
  ASSERT_TRUE(LoadExample("a100").ok());
  pb::LoadProfileRequest tiny;
  tiny.set_model("tiny");
  tiny.set_gpu_type("t4");
  tiny.set_microbatch_size(1);
  tiny.mutable_layers()->add_layers()->set_forward_ms(1);
  ASSERT_TRUE(LoadProfile(tiny).ok());

  auto list = [&](const std::string& model) {
    pb::ListProfilesRequest request;
    request.set_model(model);
    pb::ListProfilesResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(stub_->ListProfiles(&context, request, &response).ok());
    std::vector<std::string> keys;
    for (const pb::ProfileInfo& info : response.profiles()) {
      keys.push_back(info.model() + "/" + info.gpu_type() + "/" +
                     std::to_string(info.microbatch_size()) + "/" +
                     std::to_string(info.num_layers()));
    }
    return keys;
  };
  EXPECT_THAT(list(""), ElementsAre("gpt2-xl/a100/1/50", "gpt2-xl/rtx4090/1/50", "tiny/t4/1/1"));
  EXPECT_THAT(list("tiny"), ElementsAre("tiny/t4/1/1"));
  EXPECT_THAT(list("gpt2-xl"), ElementsAre("gpt2-xl/a100/1/50", "gpt2-xl/rtx4090/1/50"));
  EXPECT_TRUE(list("unknown").empty());
}

// -------------------------------------------------------------------------- templates

TEST_F(PlannerServiceTest, HomogeneousMatchesOobleckPublishedTimes) {
  ASSERT_TRUE(LoadExample().ok());
  pb::PlanTemplatesResponse response;
  const grpc::Status status = Plan(HomogeneousRequest(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.cost_model(), "oobleck-sosp23");
  EXPECT_GE(response.planning_time_ms(), 0);
  // Oobleck's create_pipeline_templates on the same profile, 1..4 nodes.
  const std::vector<double> expected_ms = {25348.51, 28853.39, 27534.99, 27245.21};
  ASSERT_EQ(response.results_size(), 4);
  for (int n = 1; n <= 4; ++n) {
    SCOPED_TRACE(n);
    const pb::MixTemplate& result = response.results(n - 1);
    EXPECT_THAT(Counts(result.mix()), ElementsAre(n));
    EXPECT_EQ(result.mix_label(), std::to_string(n) + "xrtx4090");
    EXPECT_FALSE(result.cache_hit());
    ASSERT_TRUE(result.feasible()) << result.infeasible_reason();
    const pb::PipelineTemplate& tmpl = result.template_();
    EXPECT_NEAR(tmpl.iteration_time_ms(), expected_ms[n - 1], 0.01);
    EXPECT_EQ(tmpl.num_nodes(), n);
    EXPECT_EQ(tmpl.num_gpus(), n);
    EXPECT_EQ(tmpl.mix_label(), result.mix_label());
    EXPECT_THAT(Counts(tmpl.mix()), ElementsAre(n));
    EXPECT_TRUE(tmpl.derived_gpu_types().empty());
    ExpectWellFormed(tmpl, 50, {{"rtx4090", 1}});
  }
}

TEST_F(PlannerServiceTest, OneFOneBWithMicrobatches) {
  ASSERT_TRUE(LoadExample().ok());
  constexpr int kMicrobatches = 8;
  const double memory_bytes = 24 * kGiB;
  pb::PlanTemplatesRequest request = HomogeneousRequest();
  request.set_cost_model("1f1b");
  request.set_microbatches(kMicrobatches);
  pb::PlanTemplatesResponse response;
  const grpc::Status status = Plan(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.cost_model(), "1f1b");
  ASSERT_EQ(response.results_size(), 4);

  // One GPU holds all parameters with 6x optimizer state: 6 * 6.2 GB > 24 GiB.
  const ProfileSums sums = ExampleSums();
  const bool one_node_fits = 6 * sums.param_bytes + sums.activation_bytes <= memory_bytes;
  EXPECT_EQ(response.results(0).feasible(), one_node_fits);
  if (!one_node_fits) {
    EXPECT_FALSE(response.results(0).infeasible_reason().empty());
  }

  int feasible = 0;
  for (const pb::MixTemplate& result : response.results()) {
    if (!result.feasible()) continue;
    ++feasible;
    SCOPED_TRACE(result.mix_label());
    const pb::PipelineTemplate& tmpl = result.template_();
    ExpectWellFormed(tmpl, 50, {{"rtx4090", 1}});
    // T(M) = sum of stage costs + (M - 1) * the largest one.
    double sum_ms = 0, max_ms = 0;
    for (const pb::Stage& stage : tmpl.stages()) {
      EXPECT_GE(stage.cost_ms(), stage.forward_ms() + stage.backward_ms() - 1e-9);
      EXPECT_LE(stage.memory_bytes_per_gpu(), memory_bytes);
      EXPECT_GT(stage.memory_bytes_per_gpu(), 0);
      sum_ms += stage.cost_ms();
      max_ms = std::max(max_ms, stage.cost_ms());
    }
    EXPECT_NEAR(tmpl.iteration_time_ms(), sum_ms + (kMicrobatches - 1) * max_ms,
                1e-9 * tmpl.iteration_time_ms());
  }
  EXPECT_GE(feasible, 3);
}

TEST_F(PlannerServiceTest, HeterogeneousWithDerivedNodeType) {
  ASSERT_TRUE(LoadExample().ok());
  constexpr int kMicrobatches = 4;
  pb::PlanTemplatesRequest request;
  request.set_model("gpt2-xl");
  request.set_microbatches(kMicrobatches);  // cost_model "" = 1f1b
  pb::Cluster* cluster = request.mutable_cluster();
  cluster->set_inter_node_bytes_per_s(12.5e9);
  *cluster->add_node_types() = MakeNodeType("rtx4090", "rtx4090", 1, 24 * kGiB, 2);
  pb::NodeType* a100 = cluster->add_node_types();
  *a100 = MakeNodeType("a100-node", "a100", 1, 80 * kGiB, 2);
  a100->mutable_derive()->set_measured_gpu_type("rtx4090");
  a100->mutable_derive()->set_relative_speed(2.0);

  pb::PlanTemplatesResponse response;
  const grpc::Status status = Plan(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.cost_model(), "1f1b");
  std::vector<std::vector<int>> mixes;
  for (const pb::MixTemplate& result : response.results()) mixes.push_back(Counts(result.mix()));
  // Every mix of the 2 + 2 nodes, by size, then counts with the first count descending
  // (core's EnumerateMixes order).
  EXPECT_THAT(mixes, ElementsAre(ElementsAre(1, 0), ElementsAre(0, 1), ElementsAre(2, 0),
                                 ElementsAre(1, 1), ElementsAre(0, 2), ElementsAre(2, 1),
                                 ElementsAre(1, 2), ElementsAre(2, 2)));
  ASSERT_EQ(response.results_size(), 8);
  const ProfileSums sums = ExampleSums();
  for (const pb::MixTemplate& result : response.results()) {
    SCOPED_TRACE(result.mix_label());
    if (!result.feasible()) continue;
    const pb::PipelineTemplate& tmpl = result.template_();
    ExpectWellFormed(tmpl, 50, {{"rtx4090", 1}, {"a100-node", 1}});
    if (result.mix().counts(1) > 0) {
      EXPECT_THAT(tmpl.derived_gpu_types(), ElementsAre("a100"));
    } else {
      EXPECT_TRUE(tmpl.derived_gpu_types().empty());
    }
  }
  // One derived node: one stage at half the measured compute time; T = M * c.
  const pb::MixTemplate& one_a100 = response.results(1);
  EXPECT_EQ(one_a100.mix_label(), "1xa100-node");
  ASSERT_TRUE(one_a100.feasible()) << one_a100.infeasible_reason();
  ASSERT_EQ(one_a100.template_().stages_size(), 1);
  const pb::Stage& stage = one_a100.template_().stages(0);
  EXPECT_NEAR(stage.forward_ms(), sums.forward_ms / 2, 1e-6 * sums.forward_ms);
  EXPECT_NEAR(stage.backward_ms(), sums.backward_ms / 2, 1e-6 * sums.backward_ms);
  EXPECT_NEAR(one_a100.template_().iteration_time_ms(), kMicrobatches * stage.cost_ms(),
              1e-9 * stage.cost_ms());
  // A single 24 GiB RTX 4090 cannot hold GPT-2 XL with optimizer state.
  EXPECT_EQ(response.results(0).mix_label(), "1xrtx4090");
  EXPECT_FALSE(response.results(0).feasible());
  EXPECT_FALSE(response.results(0).infeasible_reason().empty());
}

TEST_F(PlannerServiceTest, ExplicitMixesAreAnsweredInSizeOrder) {
  ASSERT_TRUE(LoadExample().ok());
  pb::PlanTemplatesRequest request = HomogeneousRequest();
  *request.mutable_cluster()->add_node_types() = MakeNodeType("other", "rtx4090", 1, 24 * kGiB, 1);
  request.add_mixes()->add_counts(2);
  request.mutable_mixes(0)->add_counts(1);
  request.add_mixes()->add_counts(0);
  request.mutable_mixes(1)->add_counts(1);
  pb::PlanTemplatesResponse response;
  const grpc::Status status = Plan(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.results_size(), 2);
  EXPECT_THAT(Counts(response.results(0).mix()), ElementsAre(0, 1));
  EXPECT_THAT(Counts(response.results(1).mix()), ElementsAre(2, 1));
  ASSERT_TRUE(response.results(1).feasible());
  EXPECT_EQ(response.results(1).template_().num_nodes(), 3);

  // Same size: the same order as enumerated mixes (first count descending).
  request.clear_mixes();
  for (const std::vector<int>& counts : {std::vector<int>{1, 1}, {0, 2}, {2, 0}}) {
    *request.add_mixes()->mutable_counts() = {counts.begin(), counts.end()};
  }
  request.mutable_cluster()->mutable_node_types(1)->set_count(2);
  const grpc::Status same_size = Plan(request, &response);
  ASSERT_TRUE(same_size.ok()) << same_size.error_message();
  std::vector<std::vector<int>> order;
  for (const pb::MixTemplate& result : response.results()) order.push_back(Counts(result.mix()));
  EXPECT_THAT(order, ElementsAre(ElementsAre(2, 0), ElementsAre(1, 1), ElementsAre(0, 2)));
  request.clear_mixes();
  request.mutable_cluster()->mutable_node_types(1)->set_count(1);
  request.add_mixes()->add_counts(2);
  request.mutable_mixes(0)->add_counts(1);
  request.add_mixes()->add_counts(0);
  request.mutable_mixes(1)->add_counts(1);
  request.add_mixes()->add_counts(2);
  request.mutable_mixes(2)->add_counts(1);
  const grpc::Status repeated = Plan(request, &response);
  EXPECT_EQ(repeated.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(repeated.error_message(), HasSubstr("mixes[2] repeats mixes[0]"));
}

TEST_F(PlannerServiceTest, RepeatedRequestIsAnsweredFromTheCache) {
  ASSERT_TRUE(LoadExample().ok());
  pb::PlanTemplatesResponse first, second;
  ASSERT_TRUE(Plan(HomogeneousRequest(), &first).ok());
  const pb::GetStatsResponse before = Stats();
  ASSERT_TRUE(Plan(HomogeneousRequest(), &second).ok());
  const pb::GetStatsResponse after = Stats();

  ASSERT_EQ(second.results_size(), first.results_size());
  for (int i = 0; i < second.results_size(); ++i) {
    EXPECT_FALSE(first.results(i).cache_hit());
    EXPECT_TRUE(second.results(i).cache_hit());
    EXPECT_EQ(second.results(i).template_().iteration_time_ms(),
              first.results(i).template_().iteration_time_ms());
  }
  EXPECT_EQ(after.cache_hits() - before.cache_hits(), 4);
  EXPECT_EQ(after.cache_misses(), before.cache_misses());
  EXPECT_GE(before.cache_misses(), 4);
  EXPECT_GE(after.cache_entries(), 4);
  EXPECT_GT(after.cache_bytes(), 0);
  EXPECT_EQ(after.cache_capacity_bytes(), kCacheBytes);
  EXPECT_EQ(after.profiles_loaded(), 1);
  EXPECT_EQ(after.plan_templates_requests(), 2);
  EXPECT_GT(after.uptime_s(), 0);
}

TEST_F(PlannerServiceTest, ConcurrentRequestsAgree) {
  ASSERT_TRUE(LoadExample().ok());
  constexpr int kClients = 4;
  std::vector<pb::PlanTemplatesResponse> responses(kClients);
  std::vector<grpc::Status> statuses(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] { statuses[i] = Plan(HomogeneousRequest(), &responses[i]); });
  }
  for (std::thread& client : clients) client.join();
  for (int i = 0; i < kClients; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i].error_message();
    ASSERT_EQ(responses[i].results_size(), 4);
    for (int n = 0; n < 4; ++n) {
      EXPECT_EQ(responses[i].results(n).template_().iteration_time_ms(),
                responses[0].results(n).template_().iteration_time_ms());
    }
  }
  EXPECT_EQ(Stats().plan_templates_requests(), kClients);
}

TEST_F(PlannerServiceTest, RejectsBadPlanRequests) {
  ASSERT_TRUE(LoadExample().ok());
  struct Case {
    std::string name;
    std::function<void(pb::PlanTemplatesRequest*)> mutate;
    grpc::StatusCode code;
    std::vector<std::string> message_parts;
  };
  auto second_type = [](pb::PlanTemplatesRequest* r) {
    return r->mutable_cluster()->add_node_types();
  };
  const std::vector<Case> cases = {
      {"missing model",
       [](auto* r) { r->clear_model(); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"model is required"}},
      {"unknown model",
       [](auto* r) { r->set_model("gpt-17"); },
       grpc::StatusCode::NOT_FOUND,
       {"model \"gpt-17\""}},
      {"missing cluster",
       [](auto* r) { r->clear_cluster(); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"cluster is required"}},
      {"gpus_per_node 0",
       [&](auto* r) { *second_type(r) = MakeNodeType("b", "rtx4090", 0, 24 * kGiB, 1); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"cluster.node_types[1].gpus_per_node must be >= 1 (got 0)"}},
      {"gpus_per_node above 64",
       [&](auto* r) { *second_type(r) = MakeNodeType("b", "rtx4090", 65, 24 * kGiB, 1); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"cluster.node_types[1].gpus_per_node must be <= 64 (got 65)"}},
      {"oobleck-sosp23 without GPU memory",
       [](auto* r) {
         r->set_cost_model("oobleck-sosp23");
         r->mutable_cluster()->mutable_node_types(0)->set_gpu_memory_bytes(0);
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"cluster.node_types[0].gpu_memory_bytes must be > 0 (got 0)"}},
      {"negative optimizer_state_multiplier",
       [](auto* r) { r->set_optimizer_state_multiplier(-1); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"optimizer_state_multiplier must be finite and >= 0 (got -1)"}},
      {"count 0",
       [](auto* r) { r->mutable_cluster()->mutable_node_types(0)->set_count(0); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"cluster.node_types[0].count must be >= 1 (got 0)"}},
      {"repeated node type name",
       [&](auto* r) { *second_type(r) = MakeNodeType("rtx4090", "rtx4090", 1, 24 * kGiB, 1); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"cluster.node_types[1].name \"rtx4090\" repeats cluster.node_types[0].name"}},
      {"unknown gpu type",
       [](auto* r) { r->mutable_cluster()->mutable_node_types(0)->set_gpu_type("h200"); },
       grpc::StatusCode::NOT_FOUND,
       {"cluster.node_types[0].gpu_type", "h200"}},
      {"unknown measured gpu type",
       [](auto* r) {
         auto* derive = r->mutable_cluster()->mutable_node_types(0)->mutable_derive();
         derive->set_measured_gpu_type("v100");
         derive->set_relative_speed(1.5);
       },
       grpc::StatusCode::NOT_FOUND,
       {"cluster.node_types[0].derive.measured_gpu_type", "v100"}},
      {"relative speed 0",
       [](auto* r) {
         r->mutable_cluster()->mutable_node_types(0)->mutable_derive()->set_measured_gpu_type(
             "rtx4090");
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"cluster.node_types[0].derive.relative_speed must be > 0 (got 0)"}},
      {"1f1b without microbatches",
       [](auto* r) { r->set_cost_model("1f1b"); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"microbatches must be >= 1 for cost_model \"1f1b\" (got 0)"}},
      {"1f1b without GPU memory",
       [](auto* r) {
         r->set_cost_model("1f1b");
         r->set_microbatches(4);
         r->mutable_cluster()->mutable_node_types(0)->set_gpu_memory_bytes(0);
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"cluster.node_types[0].gpu_memory_bytes"}},
      {"negative microbatches",
       [](auto* r) { r->set_microbatches(-3); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"microbatches must be >= 0 (got -3)"}},
      {"unknown cost model",
       [](auto* r) { r->set_cost_model("fastest"); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"cost_model", "fastest"}},
      {"mix with wrong counts size",
       [](auto* r) {
         r->add_mixes()->add_counts(1);
         r->mutable_mixes(0)->add_counts(1);
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"mixes[0].counts must have 1 entries, one per cluster.node_types (got 2)"}},
      {"mix over the node count",
       [](auto* r) { r->add_mixes()->add_counts(5); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"mixes[0].counts[0] must be between 0 and cluster.node_types[0].count = 4 (got 5)"}},
      {"empty mix",
       [](auto* r) { r->add_mixes()->add_counts(0); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"mixes[0] must contain at least one node"}},
      {"min_nodes above the cluster",
       [](auto* r) { r->set_min_nodes(5); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"min_nodes must be <= 4", "(got 5)"}},
      {"max_nodes above the cluster",
       [](auto* r) { r->set_max_nodes(9); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"max_nodes must be <= 4", "(got 9)"}},
      {"min_nodes above max_nodes",
       [](auto* r) {
         r->set_min_nodes(3);
         r->set_max_nodes(2);
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"min_nodes must be <= max_nodes = 2 (got 3)"}},
      {"too many mixes",
       [](auto* r) {
         // 13 node types of one node each: 2^13 - 1 = 8191 mixes.
         for (int i = 1; i < 13; ++i) {
           *r->mutable_cluster()->add_node_types() =
               MakeNodeType("t" + std::to_string(i), "rtx4090", 1, 24 * kGiB, 1);
         }
         r->mutable_cluster()->mutable_node_types(0)->set_count(1);
       },
       grpc::StatusCode::RESOURCE_EXHAUSTED,
       {"4096"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    pb::PlanTemplatesRequest request = HomogeneousRequest();
    c.mutate(&request);
    pb::PlanTemplatesResponse response;
    const grpc::Status status = Plan(request, &response);
    EXPECT_EQ(status.error_code(), c.code) << status.error_message();
    for (const std::string& part : c.message_parts) {
      EXPECT_THAT(status.error_message(), HasSubstr(part));
    }
  }
}

TEST_F(PlannerServiceTest, ExplicitMixCountIsLimited) {
  ASSERT_TRUE(LoadExample().ok());
  pb::PlanTemplatesRequest request = HomogeneousRequest();
  for (int i = 0; i <= kMaxMixesPerRequest; ++i) request.add_mixes()->add_counts(1);
  pb::PlanTemplatesResponse response;
  const grpc::Status status = Plan(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("4096"));
}

// A big heterogeneous request on multi-GPU nodes (the ring profile has all-reduce times
// for 1, 2, 4 and 8 GPUs).
pb::PlanTemplatesRequest BigRequest() {
  pb::PlanTemplatesRequest request;
  request.set_model("gpt2-xl");
  request.set_microbatches(16);
  pb::Cluster* cluster = request.mutable_cluster();
  cluster->set_inter_node_bytes_per_s(12.5e9);
  *cluster->add_node_types() = MakeNodeType("ring4090", "ring4090", 4, 24 * kGiB, 4);
  const std::vector<std::pair<std::string, double>> derived = {{"v100", 0.5}, {"a100", 2.0}};
  for (const auto& [gpu, speed] : derived) {
    pb::NodeType* type = cluster->add_node_types();
    *type = MakeNodeType(gpu, gpu, 4, 40 * kGiB, 4);
    type->mutable_derive()->set_measured_gpu_type("ring4090");
    type->mutable_derive()->set_relative_speed(speed);
  }
  return request;
}

TEST_F(PlannerServiceTest, DeadlineStopsABigRequest) {
  pb::LoadProfileRequest load;
  load.set_model("gpt2-xl");
  load.set_gpu_type("ring4090");
  load.set_directory(kRingDir);
  const grpc::Status loaded = LoadProfile(load);
  ASSERT_TRUE(loaded.ok()) << loaded.error_message();

  pb::PlanTemplatesResponse response;
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status status = Plan(BigRequest(), &response, std::chrono::milliseconds(1));
  EXPECT_TRUE(status.ok() || status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
      << status.error_code() << ": " << status.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  if (status.ok()) {
    EXPECT_EQ(response.results_size(), 124);
  }

  // A client that gives up mid-search: CANCELLED on the wire (or a completed answer).
  grpc::ClientContext context;
  std::thread canceller([&context] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    context.TryCancel();
  });
  pb::PlanTemplatesResponse cancelled_response;
  const grpc::Status cancelled = stub_->PlanTemplates(&context, BigRequest(), &cancelled_response);
  canceller.join();
  EXPECT_TRUE(cancelled.ok() || cancelled.error_code() == grpc::StatusCode::CANCELLED)
      << cancelled.error_code() << ": " << cancelled.error_message();

  // The server keeps serving afterwards.
  EXPECT_EQ(Stats().profiles_loaded(), 1);
  pb::PlanTemplatesRequest small = BigRequest();
  small.set_max_nodes(1);
  pb::PlanTemplatesResponse small_response;
  const grpc::Status small_status = Plan(small, &small_response);
  ASSERT_TRUE(small_status.ok()) << small_status.error_message();
  EXPECT_EQ(small_response.results_size(), 3);
}

TEST_F(PlannerServiceTest, ShutdownDoesNotWaitForAnAbandonedSearch) {
  pb::LoadProfileRequest load;
  load.set_model("gpt2-xl");
  load.set_gpu_type("ring4090");
  load.set_directory(kRingDir);
  ASSERT_TRUE(LoadProfile(load).ok());
  pb::PlanTemplatesResponse response;
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status status = Plan(BigRequest(), &response, std::chrono::milliseconds(50));
  EXPECT_TRUE(status.ok() || status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
      << status.error_code() << ": " << status.error_message();
  // Shutdown must not wait for an abandoned search: the handler stops soon after.
  running_.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(30));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  running_.server.reset();
}

// ------------------------------------------------------------- health and reflection

TEST_F(PlannerServiceTest, HealthServiceReportsServing) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = health->Check(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(PlannerServiceTest, ReflectionListsAndDescribesServices) {
  // list_services (field 7) -> list_services_response (6) of ServiceResponse{name = 1}.
  const auto listed = LengthDelimitedFields(ReflectionExchange(channel_, 7, ""));
  ASSERT_EQ(listed.count(6), 1u);
  std::vector<std::string> services;
  for (const auto& [field, service] : LengthDelimitedFields(listed.find(6)->second)) {
    if (field == 1) services.push_back(LengthDelimitedFields(service).find(1)->second);
  }
  EXPECT_THAT(services,
              ::testing::IsSupersetOf({"oobleck.planner.v1.Planner", "grpc.health.v1.Health"}));

  // file_containing_symbol (4) -> file_descriptor_response (4), not error_response (7).
  for (const std::string symbol : {"grpc.health.v1.Health", "oobleck.planner.v1.Planner"}) {
    SCOPED_TRACE(symbol);
    const auto described = LengthDelimitedFields(ReflectionExchange(channel_, 4, symbol));
    EXPECT_EQ(described.count(7), 0u);
    ASSERT_EQ(described.count(4), 1u);
    const auto files = LengthDelimitedFields(described.find(4)->second);
    bool found = false;
    for (const auto& [field, bytes] : files) {
      google::protobuf::FileDescriptorProto file;
      ASSERT_TRUE(file.ParseFromString(bytes));
      for (const auto& service : file.service()) {
        if (file.package() + "." + service.name() == symbol) found = true;
      }
    }
    EXPECT_TRUE(found);
  }
}

}  // namespace
}  // namespace oobleck::server
