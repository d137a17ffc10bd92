// `oobleck-plan render`: which answer a saved JSON holds (proto or camelCase field names,
// as Python's json_format prints them), and the errors for everything else.
#include "client/render_command.h"

#include <filesystem>

#include "client/output.h"
#include "client/svg/canvas.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/client/answers.h"

namespace oobleck::client {
namespace {

using ::testing::HasSubstr;
using namespace ::oobleck::client::testing;  // NOLINT: the sample answers

std::string CamelCaseJson(const google::protobuf::Message& m) {
  std::string out;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(m, &out).ok());
  return out;
}

// A templates answer saved before the answers carried the stage timing
// (PipelineTemplate.microbatches, Stage.p2p_out_ms): a clear error naming the file and the
// template, whatever --microbatches says, instead of a schedule without transfers.
TEST(RenderAnswer, RefusesATemplatesAnswerOlderThanTheStageTiming) {
  pb::PlanTemplatesResponse old = SampleTemplates(5);
  for (pb::MixTemplate& r : *old.mutable_results()) {
    r.mutable_template_()->clear_microbatches();
    for (pb::Stage& s : *r.mutable_template_()->mutable_stages()) s.clear_p2p_out_ms();
  }
  for (int microbatches : {0, 3}) {
    const absl::StatusOr<std::string> svg =
        RenderAnswer(ToJson(old), "old.json", {}, "", microbatches);
    EXPECT_EQ(svg.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(svg.status().message(),
                HasSubstr("old.json: results[1].template (1xh100) has no microbatches"));
  }
}

TEST(RenderAnswer, DrawsEachKindOfAnswer) {
  absl::StatusOr<std::string> plan = RenderAnswer(ToJson(SamplePlan()), "plan.json", {}, "", 0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan, HasSubstr("global batch 24 micro-batches"));
  EXPECT_THAT(*plan, HasSubstr(svg::EscapeXml(kHostileId)));

  absl::StatusOr<std::string> templates =
      RenderAnswer(ToJson(SampleTemplates(5)), "t.json", {}, "", 0);
  ASSERT_TRUE(templates.ok()) << templates.status();
  EXPECT_THAT(*templates, HasSubstr("M = 5 micro-batches (from the answer)"));
  templates = RenderAnswer(ToJson(SampleTemplates(5)), "t.json", {}, "", 3);
  ASSERT_TRUE(templates.ok()) << templates.status();
  EXPECT_THAT(*templates, HasSubstr("M = 3 micro-batches"));

  absl::StatusOr<std::string> replan =
      RenderAnswer(ToJson(SampleReplan()), "r.json", ToJson(SamplePlan()), "p.json", 0);
  ASSERT_TRUE(replan.ok()) << replan.status();
  EXPECT_THAT(*replan, HasSubstr("failed: h100-0"));
}

TEST(RenderAnswer, ReadsCamelCaseJsonOfOtherClients) {
  absl::StatusOr<std::string> proto_names = RenderAnswer(ToJson(SamplePlan()), "a", {}, "", 0);
  absl::StatusOr<std::string> camel = RenderAnswer(CamelCaseJson(SamplePlan()), "b", {}, "", 0);
  ASSERT_TRUE(camel.ok()) << camel.status();
  EXPECT_EQ(*camel, *proto_names);
  absl::StatusOr<std::string> replan =
      RenderAnswer(CamelCaseJson(SampleReplan()), "r", CamelCaseJson(SamplePlan()), "p", 0);
  ASSERT_TRUE(replan.ok()) << replan.status();
}

TEST(RenderAnswer, ErrorsNameTheFileAndWhatIsMissing) {
  auto error = [](const std::string& json, std::optional<std::string> old = {}) {
    return RenderAnswer(json, "answer.json", old, "old.json", 0).status();
  };
  EXPECT_EQ(error("not json").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(error("not json").message(), HasSubstr("answer.json is not a JSON object"));
  EXPECT_THAT(error("[1, 2]").message(), HasSubstr("answer.json is not a JSON object"));
  EXPECT_THAT(error("{}").message(),
              HasSubstr("answer.json is not the --json answer of templates, plan or replan"));
  EXPECT_THAT(error(R"({"plan": {"pipelines": 3}})").message(),
              HasSubstr("answer.json is not the JSON of a PlanResponse"));
  EXPECT_THAT(error(ToJson(SampleReplan())).message(),
              HasSubstr("answer.json is a replan answer: pass --plan OLD.json"));
  EXPECT_THAT(error(ToJson(SampleReplan()), R"({"results": []})").message(),
              HasSubstr("old.json has no \"request\" and \"plan\""));
  EXPECT_THAT(error(ToJson(SamplePlan()), ToJson(SamplePlan())).message(),
              HasSubstr("--plan is for a replan answer (the plan it started from); answer.json "
                        "is a plan answer"));
  EXPECT_THAT(RenderAnswer(ToJson(SamplePlan()), "answer.json", {}, "", 4).status().message(),
              HasSubstr("--microbatches is for a templates answer"));
}

TEST(WriteSvgFile, NamesThePathItCannotWrite) {
  const absl::Status s = WriteSvgFile("/nonexistent-dir/x.svg", "<svg/>");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("cannot write --svg /nonexistent-dir/x.svg"));
  const std::string path = (std::filesystem::path(::testing::TempDir()) / "w.svg").string();
  ASSERT_TRUE(WriteSvgFile(path, "<svg/>").ok());
  EXPECT_EQ(std::filesystem::file_size(path), 6u);
}

// A stage's GPUs: "2g" when they split the layers' work, "tp4" when they run tensor-parallel.
TEST(FormatStage, ShowsATensorParallelDegree) {
  pb::Stage stage;
  stage.set_layer_begin(0);
  stage.set_layer_end(12);
  stage.set_node_type("gh200");
  stage.set_gpus(4);
  EXPECT_EQ(FormatStage(stage), "[0,12)@n0:gh200/4g");
  stage.set_tensor_parallel(4);
  EXPECT_EQ(FormatStage(stage), "[0,12)@n0:gh200/tp4");
}

}  // namespace
}  // namespace oobleck::client
