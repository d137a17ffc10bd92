// Issue 26: profiles sent with the planning request (InlineProfile), the in-node all-reduce
// key convention (AllreduceKey) and the stage GPU policy (StageGpus), over a real channel.
#include <grpcpp/grpcpp.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "server/profile_store.h"
#include "tests/service/served_planner.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;
using ::testing::HasSubstr;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kBig = 1000;  // an all-reduce no good plan pays

// Four equal layers; in-node all-reduce times by GPU count (0 for 2 and 4 GPUs, kBig for
// the other counts up to `gpus`), keys shifted down by `key_offset` (1: the GPUs - 1
// convention). `scale` changes every compute time (another profile, same shape).
pb::ProfileLayers Layers(int gpus, int key_offset = 0, double scale = 1) {
  pb::ProfileLayers out;
  for (int l = 0; l < 4; ++l) {
    pb::LayerProfile* layer = out.add_layers();
    layer->set_forward_ms(1 * scale);
    layer->set_backward_ms(2 * scale);
    layer->set_param_bytes(1e6);
    layer->set_activation_bytes(1e6);
    for (int g = 2; g <= gpus; ++g) {
      (*layer->mutable_allreduce_in_node_ms())[g - key_offset] = g == 2 || g == 4 ? 0 : kBig;
    }
    (*layer->mutable_allreduce_across_nodes_ms())[1] = 0;
    (*layer->mutable_allreduce_across_nodes_ms())[2] = 0.5;
  }
  return out;
}

// The same layers as Oobleck's three files (keys as they are in `layers`).
pb::OobleckProfileFiles Files(const pb::ProfileLayers& layers) {
  std::string mb = "[", in_node = "[", across = "[";
  for (int l = 0; l < layers.layers_size(); ++l) {
    const pb::LayerProfile& layer = layers.layers(l);
    const char* sep = l == 0 ? "" : ", ";
    absl::StrAppend(&mb, sep, "{\"forward\": ", layer.forward_ms(),
                    ", \"backward\": ", layer.backward_ms(), ", \"mem_required\": [",
                    layer.param_bytes(), ", ", layer.activation_bytes(), "]}");
    auto table = [](const google::protobuf::Map<int32_t, double>& map) {
      std::map<int, double> sorted(map.begin(), map.end());
      std::string out = "{";
      for (const auto& [k, v] : sorted) {
        absl::StrAppend(&out, out.size() > 1 ? ", " : "", "\"", k, "\": ", v);
      }
      return out + "}";
    };
    absl::StrAppend(&in_node, sep, table(layer.allreduce_in_node_ms()));
    absl::StrAppend(&across, sep, table(layer.allreduce_across_nodes_ms()));
  }
  pb::OobleckProfileFiles files;
  files.set_mb_json(mb + "]");
  files.set_allreduce_in_node_json(in_node + "]");
  files.set_allreduce_across_nodes_json(across + "]");
  return files;
}

// One node of `gpus` GPUs, Oobleck's cost model, no model name: the profile inline.
pb::PlanTemplatesRequest Request(int gpus, pb::ProfileLayers layers, int key_offset = 0) {
  pb::PlanTemplatesRequest request;
  request.set_cost_model("oobleck-sosp23");
  pb::NodeType* type = request.mutable_cluster()->add_node_types();
  type->set_name("node");
  type->set_gpu_type("a100");
  type->set_count(1);
  type->set_gpus_per_node(gpus);
  type->set_gpu_memory_bytes(80 * kGiB);
  type->set_intra_node_bytes_per_s(100e9);
  request.mutable_cluster()->set_inter_node_bytes_per_s(10e9);
  pb::InlineProfile* profile = request.add_profiles();
  *profile->mutable_layers() = std::move(layers);
  if (key_offset == 1) profile->set_allreduce_key(pb::ALLREDUCE_KEY_GPUS_MINUS_ONE);
  return request;
}

std::multiset<int> StageGpus(const pb::PlanTemplatesResponse& response) {
  std::multiset<int> gpus;
  for (const pb::Stage& stage : response.results(0).template_().stages()) {
    gpus.insert(stage.gpus());
  }
  return gpus;
}

class InlineProfileTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(served_.Start().ok()); }

  grpc::Status Templates(const pb::PlanTemplatesRequest& request,
                         pb::PlanTemplatesResponse* response) {
    grpc::ClientContext context;
    return served_.stub->PlanTemplates(&context, request, response);
  }
  pb::PlanTemplatesResponse TemplatesOk(const pb::PlanTemplatesRequest& request) {
    pb::PlanTemplatesResponse response;
    const grpc::Status status = Templates(request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.results_size(), 1);
    if (response.results_size() == 1) {
      EXPECT_TRUE(response.results(0).feasible());
    }
    return response;
  }
  grpc::Status TemplatesError(const pb::PlanTemplatesRequest& request) {
    pb::PlanTemplatesResponse response;
    return Templates(request, &response);
  }

  ServedPlanner served_;
};

TEST_F(InlineProfileTest, LayersPlanWithoutModelAndAreNeverStored) {
  const pb::PlanTemplatesResponse response = TemplatesOk(Request(4, Layers(4)));
  ASSERT_EQ(response.inline_profiles_size(), 1);
  const pb::ProfileInfo& info = response.inline_profiles(0);
  EXPECT_EQ(info.model(), "inline");
  EXPECT_EQ(info.gpu_type(), "a100");
  EXPECT_EQ(info.num_layers(), 4);
  EXPECT_FALSE(info.fingerprint().empty());
  EXPECT_EQ(info.allreduce_key(), pb::ALLREDUCE_KEY_GPUS);
  // Never in the profile store or the catalog.
  grpc::ClientContext context;
  pb::ListProfilesResponse listed;
  ASSERT_TRUE(served_.stub->ListProfiles(&context, pb::ListProfilesRequest(), &listed).ok());
  EXPECT_EQ(listed.profiles_size(), 0);
  EXPECT_EQ(served_.catalog.size(), 0);
}

TEST_F(InlineProfileTest, FilesAndLayersAndFingerprintGiveOneProfile) {
  const pb::PlanTemplatesResponse from_layers = TemplatesOk(Request(4, Layers(4)));
  pb::PlanTemplatesRequest request = Request(4, Layers(4));
  *request.mutable_profiles(0)->mutable_files() = Files(Layers(4));
  const pb::PlanTemplatesResponse from_files = TemplatesOk(request);
  ASSERT_EQ(from_files.inline_profiles_size(), 1);
  const std::string fingerprint = from_layers.inline_profiles(0).fingerprint();
  EXPECT_EQ(from_files.inline_profiles(0).fingerprint(), fingerprint);
  EXPECT_TRUE(from_files.results(0).cache_hit());

  // A later request sends the fingerprint alone.
  request.mutable_profiles(0)->set_fingerprint(fingerprint);
  const pb::PlanTemplatesResponse reused = TemplatesOk(request);
  EXPECT_EQ(reused.inline_profiles(0).fingerprint(), fingerprint);
  EXPECT_DOUBLE_EQ(reused.results(0).template_().iteration_time_ms(),
                   from_layers.results(0).template_().iteration_time_ms());

  // One profile kept; found again by content (files) and by fingerprint.
  const CacheStats stats = served_.service->inline_profile_cache().stats();
  EXPECT_EQ(stats.entries, 1);
  EXPECT_EQ(stats.hits, 2);

  request.mutable_profiles(0)->set_fingerprint("0123456789abcdef");
  const grpc::Status missing = TemplatesError(request);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(missing.error_message(),
              HasSubstr("profiles[0].fingerprint \"0123456789abcdef\" is not cached"));
}

TEST_F(InlineProfileTest, BothKeyConventionsGiveTheSameTemplates) {
  const pb::PlanTemplatesResponse by_gpus = TemplatesOk(Request(6, Layers(6)));
  const pb::PlanTemplatesResponse minus_one =
      TemplatesOk(Request(6, Layers(6, /*key_offset=*/1), /*key_offset=*/1));
  EXPECT_EQ(minus_one.inline_profiles(0).allreduce_key(), pb::ALLREDUCE_KEY_GPUS_MINUS_ONE);
  EXPECT_EQ(minus_one.inline_profiles(0).fingerprint(), by_gpus.inline_profiles(0).fingerprint());
  EXPECT_THAT(minus_one.inline_profiles(0).allreduce_in_node_gpus(),
              ::testing::ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ(StageGpus(minus_one), StageGpus(by_gpus));
  EXPECT_DOUBLE_EQ(minus_one.results(0).template_().iteration_time_ms(),
                   by_gpus.results(0).template_().iteration_time_ms());

  // The same keys read by GPU count are another profile (no 6-GPU entry, 1 to 5 instead).
  const pb::PlanTemplatesResponse misread = TemplatesOk(Request(6, Layers(6, /*key_offset=*/1)));
  EXPECT_NE(misread.inline_profiles(0).fingerprint(), by_gpus.inline_profiles(0).fingerprint());
}

// A node of 6 GPUs where only stages of 2 or 4 GPUs avoid a large all-reduce: ANY splits it
// 4 + 2; DIVISORS only into divisors of 6; EQUAL_HALVES into powers of two (4 + 2 again, as
// Oobleck develop's divide and conquer may), and on 8 GPUs too.
TEST_F(InlineProfileTest, EachStagePolicyShowsInTheStageSizes) {
  pb::PlanTemplatesRequest request = Request(6, Layers(6));
  const pb::PlanTemplatesResponse any = TemplatesOk(request);
  EXPECT_EQ(StageGpus(any), (std::multiset<int>{2, 4}));

  request.set_stage_gpus(pb::STAGE_GPUS_DIVISORS);
  const pb::PlanTemplatesResponse divisors = TemplatesOk(request);
  for (int g : StageGpus(divisors)) EXPECT_EQ(6 % g, 0) << g;
  EXPECT_FALSE(divisors.results(0).cache_hit());  // another policy, another problem
  EXPECT_GT(divisors.results(0).template_().iteration_time_ms(),
            any.results(0).template_().iteration_time_ms());

  request.set_stage_gpus(pb::STAGE_GPUS_EQUAL_HALVES);
  const pb::PlanTemplatesResponse halves = TemplatesOk(request);
  EXPECT_EQ(StageGpus(halves), (std::multiset<int>{2, 4}));
  EXPECT_FALSE(halves.results(0).cache_hit());

  pb::PlanTemplatesRequest eight = Request(8, Layers(8));
  eight.set_stage_gpus(pb::STAGE_GPUS_EQUAL_HALVES);
  for (int g : StageGpus(TemplatesOk(eight))) EXPECT_TRUE(g == 1 || g == 2 || g == 4 || g == 8);

  request.set_stage_gpus(static_cast<pb::StageGpus>(7));
  EXPECT_THAT(TemplatesError(request).error_message(), HasSubstr("stage_gpus has no value 7"));
}

TEST_F(InlineProfileTest, DifferentInlineProfilesNeverShareCachedTemplates) {
  const pb::PlanTemplatesResponse first = TemplatesOk(Request(4, Layers(4)));
  const pb::PlanTemplatesResponse second = TemplatesOk(Request(4, Layers(4, 0, /*scale=*/2)));
  EXPECT_NE(first.inline_profiles(0).fingerprint(), second.inline_profiles(0).fingerprint());
  EXPECT_FALSE(second.results(0).cache_hit());
  EXPECT_DOUBLE_EQ(second.results(0).template_().iteration_time_ms(),
                   2 * first.results(0).template_().iteration_time_ms());
}

TEST_F(InlineProfileTest, InlineProfileReplacesTheStoredOneForThatRequestOnly) {
  pb::LoadProfileRequest load;
  load.set_model("m");
  load.set_gpu_type("a100");
  load.set_microbatch_size(1);
  *load.mutable_layers() = Layers(4, 0, /*scale=*/3);
  {
    grpc::ClientContext context;
    pb::LoadProfileResponse loaded;
    ASSERT_TRUE(served_.stub->LoadProfile(&context, load, &loaded).ok());
  }
  pb::PlanTemplatesRequest stored = Request(4, Layers(4));
  stored.clear_profiles();
  stored.set_model("m");
  const pb::PlanTemplatesResponse from_store = TemplatesOk(stored);
  pb::PlanTemplatesRequest sent = Request(4, Layers(4));
  sent.set_model("m");
  const pb::PlanTemplatesResponse from_request = TemplatesOk(sent);
  EXPECT_EQ(from_request.inline_profiles(0).model(), "m");
  EXPECT_NEAR(from_store.results(0).template_().iteration_time_ms(),
              3 * from_request.results(0).template_().iteration_time_ms(), 1e-9);
  EXPECT_DOUBLE_EQ(TemplatesOk(stored).results(0).template_().iteration_time_ms(),
                   from_store.results(0).template_().iteration_time_ms());
}

TEST_F(InlineProfileTest, PlanAndReplanTakeInlineProfiles) {
  pb::PlanRequest plan;
  const pb::PlanTemplatesRequest templates = Request(4, Layers(4));
  plan.set_cost_model("oobleck-sosp23");
  *plan.mutable_cluster() = templates.cluster();
  plan.mutable_cluster()->mutable_node_types(0)->set_count(3);
  *plan.mutable_profiles() = templates.profiles();
  plan.set_stage_gpus(pb::STAGE_GPUS_DIVISORS);
  plan.add_global_batch(12);
  plan.set_fault_tolerance(1);  // two pipelines at least: one survives a failure
  pb::PlanResponse planned;
  {
    grpc::ClientContext context;
    const grpc::Status status = served_.stub->Plan(&context, plan, &planned);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  pb::ReplanRequest replan;
  *replan.mutable_request() = planned.request();
  *replan.mutable_plan() = planned.plan();
  replan.add_failed_node_ids(planned.plan().pipelines(0).node_ids(0));
  pb::ReplanResponse replanned;
  {
    grpc::ClientContext context;
    const grpc::Status status = served_.stub->Replan(&context, replan, &replanned);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_GT(replanned.plan().iteration_time_ms(), 0);

  // Inside Replan, errors name the field under request.
  replan.mutable_request()->mutable_profiles(0)->set_fingerprint("feedfeedfeedfeed");
  grpc::ClientContext context;
  const grpc::Status status = served_.stub->Replan(&context, replan, &replanned);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("request.profiles[0].fingerprint"));
}

TEST_F(InlineProfileTest, BadInlineProfilesNameTheirField) {
  struct Case {
    const char* name;
    std::function<void(pb::PlanTemplatesRequest*)> mutate;
    grpc::StatusCode code;
    const char* message;
  };
  auto first_layer = [](pb::PlanTemplatesRequest* r) {
    return r->mutable_profiles(0)->mutable_layers()->mutable_layers(0);
  };
  const std::vector<Case> cases = {
      {"no source", [](auto* r) { r->mutable_profiles(0)->clear_source(); },
       grpc::StatusCode::INVALID_ARGUMENT, "profiles[0].source is required"},
      {"key 0 counted by GPUs",
       [&](auto* r) { (*first_layer(r)->mutable_allreduce_in_node_ms())[0] = 1; },
       grpc::StatusCode::INVALID_ARGUMENT,
       "profiles[0].layers.layers[0].allreduce_in_node_ms key 0 is not a stage's GPU count "
       "under ALLREDUCE_KEY_GPUS"},
      {"negative key counted by GPUs - 1",
       [&](auto* r) {
         r->mutable_profiles(0)->set_allreduce_key(pb::ALLREDUCE_KEY_GPUS_MINUS_ONE);
         (*first_layer(r)->mutable_allreduce_in_node_ms())[-1] = 1;
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       "key -1 is not a stage's GPU count minus one under ALLREDUCE_KEY_GPUS_MINUS_ONE"},
      {"key past any node",
       [&](auto* r) { (*first_layer(r)->mutable_allreduce_in_node_ms())[65] = 1; },
       grpc::StatusCode::INVALID_ARGUMENT, "key 65 is not a stage's GPU count"},
      {"unknown convention",
       [](auto* r) { r->mutable_profiles(0)->set_allreduce_key(static_cast<pb::AllreduceKey>(5)); },
       grpc::StatusCode::INVALID_ARGUMENT, "profiles[0].allreduce_key has no value 5"},
      {"negative time", [&](auto* r) { first_layer(r)->set_forward_ms(-1); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "profiles[0]: profile inline/a100/mb1: layer 0 forward_ms must be a finite number"},
      {"bad files",
       [](auto* r) { r->mutable_profiles(0)->mutable_files()->set_mb_json("not json"); },
       grpc::StatusCode::INVALID_ARGUMENT, "profiles[0].files/mb<m>.json"},
      {"repeated gpu type",
       [](auto* r) {
         *r->add_profiles() = r->profiles(0);
         r->mutable_profiles(0)->set_gpu_type("a100");
         r->mutable_profiles(1)->set_gpu_type("a100");
       },
       grpc::StatusCode::INVALID_ARGUMENT, "profiles[1].gpu_type \"a100\" repeats profiles[0]"},
      {"unused gpu type", [](auto* r) { r->mutable_profiles(0)->set_gpu_type("h100"); },
       grpc::StatusCode::INVALID_ARGUMENT, "profiles[0].gpu_type \"h100\" is not the gpu_type"},
      {"no model and a GPU type without a profile",
       [](auto* r) {
         pb::NodeType* other = r->mutable_cluster()->add_node_types();
         *other = r->cluster().node_types(0);
         other->set_name("other");
         other->set_gpu_type("v100");
         r->mutable_profiles(0)->set_gpu_type("a100");
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       "model is required: cluster.node_types[1].gpu_type \"v100\" has no inline profile"},
      {"unnamed profile over two GPU types",
       [](auto* r) {
         pb::NodeType* other = r->mutable_cluster()->add_node_types();
         *other = r->cluster().node_types(0);
         other->set_name("other");
         other->set_gpu_type("v100");
       },
       grpc::StatusCode::INVALID_ARGUMENT, "profiles[0].gpu_type is required: cluster.node_types"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    pb::PlanTemplatesRequest request = Request(4, Layers(4));
    c.mutate(&request);
    const grpc::Status status = TemplatesError(request);
    EXPECT_EQ(status.error_code(), c.code) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.message));
  }
}

// LoadProfile reads either convention and keeps it, through a restart of --data_dir or
// etcd (both store this serialization).
TEST_F(InlineProfileTest, LoadProfileKeepsItsConventionAcrossRestart) {
  pb::LoadProfileRequest load;
  load.set_model("m");
  load.set_gpu_type("a100");
  load.set_microbatch_size(1);
  load.set_allreduce_key(pb::ALLREDUCE_KEY_GPUS_MINUS_ONE);
  // Keys 0 to 3: Oobleck sosp23's table for stages of 1 to 4 GPUs.
  pb::ProfileLayers layers = Layers(4, /*key_offset=*/1);
  for (pb::LayerProfile& layer : *layers.mutable_layers()) {
    (*layer.mutable_allreduce_in_node_ms())[0] = 0;
  }
  *load.mutable_files() = Files(layers);
  grpc::ClientContext context;
  pb::LoadProfileResponse loaded;
  const grpc::Status status = served_.stub->LoadProfile(&context, load, &loaded);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(loaded.profile().allreduce_key(), pb::ALLREDUCE_KEY_GPUS_MINUS_ONE);
  EXPECT_THAT(loaded.profile().allreduce_in_node_gpus(), ::testing::ElementsAre(1, 2, 3, 4));

  absl::StatusOr<std::shared_ptr<const ModelProfile>> held = served_.catalog.Find("m", "a100", 1);
  ASSERT_TRUE(held.ok());
  absl::StatusOr<ModelProfile> reread = ParseStoredProfile(SerializeStoredProfile(**held));
  ASSERT_TRUE(reread.ok()) << reread.status();
  EXPECT_EQ(reread->allreduce_key, AllreduceKey::kGpusMinusOne);
  EXPECT_EQ(reread->Fingerprint(), (*held)->Fingerprint());
  EXPECT_EQ(reread->layers[0].allreduce_in_node_ms, (*held)->layers[0].allreduce_in_node_ms);

  // Key 0 is a GPU count minus one, never a GPU count.
  load.set_allreduce_key(pb::ALLREDUCE_KEY_GPUS);
  load.set_replace(true);
  grpc::ClientContext again;
  const grpc::Status refused = served_.stub->LoadProfile(&again, load, &loaded);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("files/allreduce_in_node.json: layer 0 key 0 is not a stage's GPU count "
                        "under ALLREDUCE_KEY_GPUS"));
}

}  // namespace
}  // namespace oobleck::server
