// The SVG pictures of oobleck-plan, drawn from hand-made answers, rendered by a real SVG
// renderer (rsvg-convert) and read back: the renderer accepts them, the PNG shows the
// GPU types' colours, and the text holds the answer's layer ranges and node ids,
// escaped.
#include <png.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/output.h"
#include "client/svg/canvas.h"
#include "client/svg/plan_picture.h"
#include "client/svg/schedule_picture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/answers.h"

namespace oobleck::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace ::oobleck::client::testing;  // NOLINT: the sample answers

using Rgb = std::tuple<int, int, int>;

struct Rendered {
  int width = 0;
  int height = 0;
  std::set<Rgb> colours;
};

// Renders `svg` with rsvg-convert into a PNG and reads its pixels back.
Rendered Render(const std::string& svg, const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "oobleck_pictures";
  std::filesystem::create_directories(dir);
  const std::filesystem::path svg_path = dir / (name + ".svg");
  const std::filesystem::path png_path = dir / (name + ".png");
  std::ofstream(svg_path, std::ios::binary) << svg;
  std::filesystem::remove(png_path);
  const std::string command = absl::StrCat(OOBLECK_RSVG_CONVERT, " -o '", png_path.string(), "' '",
                                           svg_path.string(), "' 2>&1");
  EXPECT_EQ(std::system(command.c_str()), 0)
      << command << " failed (rsvg-convert comes with librsvg2-bin, see scripts/install-deps.sh)";
  Rendered out;
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, png_path.string().c_str())) {
    ADD_FAILURE() << "cannot read " << png_path << ": " << image.message;
    return out;
  }
  image.format = PNG_FORMAT_RGB;
  std::vector<png_byte> pixels(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, pixels.data(), 0, nullptr)) {
    ADD_FAILURE() << "cannot decode " << png_path << ": " << image.message;
    return out;
  }
  out.width = static_cast<int>(image.width);
  out.height = static_cast<int>(image.height);
  for (size_t i = 0; i + 2 < pixels.size(); i += 3)
    out.colours.insert({pixels[i], pixels[i + 1], pixels[i + 2]});
  return out;
}

Rgb Colour(const std::string& hex) {
  return {std::stoi(hex.substr(1, 2), nullptr, 16), std::stoi(hex.substr(3, 2), nullptr, 16),
          std::stoi(hex.substr(5, 2), nullptr, 16)};
}

// The colours the pictures give the sample's GPU types (first asked, first served).
std::string ColourOf(const std::string& gpu, const std::vector<std::string>& order) {
  svg::TypeColours colours;
  for (const std::string& g : order) colours.Of(g);
  return colours.Of(gpu);
}

TEST(PlanPicture, HoldsLayerRangesAndEscapedNodeIdsAndRenders) {
  const pb::PlanResponse plan = SamplePlan();
  const std::string svg = svg::DrawPlanSvg(plan);
  for (const char* range : {"[0,10)", "[10,24)", "[24,30)", "[0,30)"}) {
    EXPECT_THAT(svg, HasSubstr(range));
  }
  for (const char* id : {"v100-0", "v100-1", "h100-0"}) EXPECT_THAT(svg, HasSubstr(id));
  EXPECT_THAT(svg, HasSubstr(svg::EscapeXml(kHostileId)));
  EXPECT_THAT(svg, Not(HasSubstr(kHostileId)));
  EXPECT_THAT(svg, HasSubstr("&lt;with&gt; this node &amp; the others"));  // the idle reason
  EXPECT_THAT(svg, HasSubstr("batch split (micro-batches per pipeline): 13 + 11"));
  EXPECT_THAT(svg, HasSubstr("all-reduce 12.50 ms"));
  EXPECT_THAT(svg, HasSubstr("v100 (derived)"));
  EXPECT_THAT(svg, Not(HasSubstr("<script")));
  EXPECT_THAT(svg, Not(HasSubstr("href")));  // nothing external

  const Rendered png = Render(svg, "plan");
  EXPECT_GT(png.width, 600);
  EXPECT_GT(png.height, 150);
  EXPECT_GE(png.colours.size(), 8u) << "a blank or nearly blank picture";
  // Stages are drawn in their GPU type's colour.
  EXPECT_TRUE(png.colours.count(Colour(ColourOf("v100", {"v100", "h100"}))));
  EXPECT_TRUE(png.colours.count(Colour(ColourOf("h100", {"v100", "h100"}))));
}

TEST(PlanPicture, AggregatesIdenticalPipelinesOfALargePlan) {
  const std::string svg = svg::DrawPlanSvg(ManyPipelinesPlan(150));
  EXPECT_THAT(svg, HasSubstr("150 x pipeline 0"));
  for (int i = 0; i < 150; ++i) EXPECT_THAT(svg, HasSubstr(absl::StrFormat("n-%03d", i)));
  const Rendered png = Render(svg, "many");
  EXPECT_LT(png.height, 400) << "150 identical pipelines should share one row";
  EXPECT_GE(png.colours.size(), 4u);

  // Below the threshold every pipeline has its row.
  const std::string small = svg::DrawPlanSvg(ManyPipelinesPlan(5));
  EXPECT_THAT(small, HasSubstr("pipeline 4"));
  EXPECT_THAT(small, Not(HasSubstr(" x pipeline")));
}

TEST(ReplanPicture, ShowsBeforeAfterFailedNodeAndCopies) {
  const pb::PlanResponse before = SamplePlan();
  const std::string svg = svg::DrawReplanSvg(before.request(), before.plan(), SampleReplan());
  EXPECT_THAT(svg, HasSubstr("FAILED"));
  EXPECT_THAT(svg, HasSubstr("failed: h100-0"));
  EXPECT_THAT(svg, HasSubstr("[10,30) 1.50 GB"));
  EXPECT_THAT(svg, HasSubstr(absl::StrCat(svg::EscapeXml(kHostileId), " sends layers [10, 30)")));
  EXPECT_THAT(svg, Not(HasSubstr(kHostileId)));
  EXPECT_THAT(svg, HasSubstr("marker-end=\"url(#arrow0)\""));
  EXPECT_THAT(svg, HasSubstr("before: 2 pipelines on 4 nodes"));
  EXPECT_THAT(svg, HasSubstr("after: 2 pipelines on 3 nodes"));
  EXPECT_THAT(svg, HasSubstr("pipeline 1 (kept)"));  // kHostileId's pipeline is unchanged
  EXPECT_THAT(svg, HasSubstr("downtime"));
  for (const char* range : {"[0,10)", "[10,30)", "[10,24)"}) EXPECT_THAT(svg, HasSubstr(range));

  const Rendered png = Render(svg, "replan");
  EXPECT_GE(png.colours.size(), 8u);
  EXPECT_TRUE(png.colours.count(Colour(ColourOf("v100", {"v100", "h100"}))));
}

TEST(ReplanPicture, AggregatesKeptPipelinesOfALargeReplan) {
  // n-000 fails; the other 149 one-node pipelines are kept as they were.
  const pb::PlanResponse before = ManyPipelinesPlan(150);
  pb::PlanResponse after = ManyPipelinesPlan(150);
  pb::ReplanResponse replan;
  after.mutable_request()->mutable_nodes()->erase(after.request().nodes().begin());
  after.mutable_plan()->mutable_pipelines()->erase(after.plan().pipelines().begin());
  *replan.mutable_request() = after.request();
  *replan.mutable_plan() = after.plan();
  replan.set_strategy("keep-pipelines");
  const std::string svg = svg::DrawReplanSvg(before.request(), before.plan(), replan);
  EXPECT_THAT(svg, HasSubstr("149 x pipeline 0 (kept)"));
  EXPECT_THAT(svg, HasSubstr("failed: n-000"));
  const Rendered png = Render(svg, "many-replan");
  EXPECT_LT(png.height, 500) << "kept pipelines should share a row";
}

TEST(ReplanPicture, MarksJoinedNodes) {
  // The replan read backwards: h100-0 joins.
  const pb::ReplanResponse failed = SampleReplan();
  const pb::PlanResponse plan = SamplePlan();
  pb::ReplanResponse joined;
  *joined.mutable_request() = plan.request();
  *joined.mutable_plan() = plan.plan();
  joined.set_strategy("optimal");
  const std::string svg = svg::DrawReplanSvg(failed.request(), failed.plan(), joined);
  EXPECT_THAT(svg, HasSubstr("JOINED"));
  EXPECT_THAT(svg, HasSubstr("joined: h100-0"));
  EXPECT_THAT(svg, Not(HasSubstr("FAILED")));
  Render(svg, "joined");
}

TEST(TemplatesPicture, DrawsEveryFeasibleScheduleAndTheInfeasibleReasons) {
  svg::ScheduleOptions options;
  options.microbatches = 6;
  const std::string svg = svg::DrawTemplatesSvg(SampleTemplates(6), options).value();
  EXPECT_THAT(svg, HasSubstr("1xv100*+1xh100"));  // the derived type marked where it stands
  EXPECT_THAT(svg, HasSubstr("1xh100:"));
  for (const char* range : {"[0,10)", "[10,24)", "[24,30)", "[0,30)"})
    EXPECT_THAT(svg, HasSubstr(range));
  EXPECT_THAT(svg, HasSubstr("infeasible: the mix has 32.00 GiB of GPU memory &amp; needs"));
  EXPECT_THAT(svg, HasSubstr("M = 6 micro-batches (from the request)"));
  EXPECT_THAT(svg, HasSubstr("p2p 5.0 ms"));
  EXPECT_THAT(svg, HasSubstr("T(M)"));
  EXPECT_THAT(svg, HasSubstr("stage 2, micro-batch 5, backward"));

  const Rendered png = Render(svg, "templates");
  EXPECT_GE(png.colours.size(), 8u);
  svg::TypeColours colours;
  colours.Of("h100");  // the first template drawn is the 1xh100 one
  EXPECT_TRUE(png.colours.count(Colour(colours.Of("h100"))));       // backward passes
  EXPECT_TRUE(png.colours.count(Colour(colours.LightOf("h100"))));  // forward passes
}

TEST(TemplatesPicture, TakesMFromTheAnswerWhenNotGivenAndBoundsHugeM) {
  const std::string inferred = svg::DrawTemplatesSvg(SampleTemplates(7), {}).value();
  EXPECT_THAT(inferred, HasSubstr("M = 7 micro-batches (from the answer)"));
  svg::ScheduleOptions huge;
  huge.microbatches = 1 << 20;
  const std::string bounded = svg::DrawTemplatesSvg(SampleTemplates(1 << 20), huge).value();
  EXPECT_THAT(bounded, HasSubstr("drawn for the first"));
  EXPECT_LT(bounded.size(), 20u << 20) << "the picture of a huge M must stay bounded";
}

TEST(TemplatesPicture, BoundsThePictureOfManyLargeTemplates) {
  pb::PlanTemplatesResponse response;
  response.set_cost_model("1f1b");
  for (int i = 0; i < 100; ++i) {
    pb::MixTemplate* m = response.add_results();
    m->set_mix_label("1xv100+1xh100");
    m->set_feasible(true);
    *m->mutable_template_() = MixedTemplate(5000);
  }
  svg::ScheduleOptions options;
  options.microbatches = 5000;
  const std::string svg = svg::DrawTemplatesSvg(response, options).value();
  // 3 stages: 1666 micro-batches (9996 passes) per schedule; four schedules and a fifth of
  // two micro-batches fill the picture.
  EXPECT_THAT(svg, HasSubstr("95 more feasible templates not drawn"));
  EXPECT_THAT(svg, HasSubstr("drawn for the first 1666 micro-batches only"));
  EXPECT_THAT(svg, HasSubstr("drawn for the first 2 micro-batches only"));
  EXPECT_LT(svg.size(), 16u << 20);
}

TEST(TemplatesPicture, SurvivesInfiniteAndNanTimes) {
  // proto3 JSON accepts "Infinity" and "NaN" for doubles: a hand-edited answer may hold them.
  for (double bad : {std::numeric_limits<double>::infinity(), std::nan(""), 1e308}) {
    pb::PlanTemplatesResponse response = SampleTemplates(4);
    pb::PipelineTemplate* t = response.mutable_results(2)->mutable_template_();
    t->set_iteration_time_ms(bad);
    t->mutable_stages(0)->set_forward_ms(bad);
    t->mutable_stages(1)->set_cost_ms(bad);
    svg::ScheduleOptions options;
    options.microbatches = 4;
    const std::string svg = svg::DrawTemplatesSvg(response, options).value();
    // Coordinates stay numbers (the text may say "inf").
    EXPECT_THAT(svg, Not(HasSubstr("=\"nan")));
    EXPECT_THAT(svg, Not(HasSubstr("=\"-nan")));
    EXPECT_THAT(svg, Not(HasSubstr("=\"inf")));
    Render(svg, "bad-times");
  }
}

// The transfers and M come from the answer (Stage.p2p_out_ms, PipelineTemplate.microbatches),
// not recovered from the stage costs and the iteration time.
TEST(TemplatesPicture, DrawsTheAnswersTransfersAndM) {
  pb::PlanTemplatesResponse response = SampleTemplates(6);
  pb::PipelineTemplate* t = response.mutable_results(2)->mutable_template_();
  t->mutable_stages(0)->set_p2p_out_ms(7.5);  // cost_ms still holds 5
  t->set_microbatches(3);                     // iteration_time_ms is still T(6)
  const std::string svg = svg::DrawTemplatesSvg(response, {}).value();
  EXPECT_THAT(svg, HasSubstr("p2p 7.5 ms"));
  EXPECT_THAT(svg, HasSubstr("M = 3 micro-batches (from the answer)"));
  EXPECT_THAT(svg, HasSubstr("stage 1, micro-batch 0, forward: 47.50 .. 77.50"));  // not 45 .. 75
  EXPECT_THAT(svg, Not(HasSubstr("stage 2, micro-batch 3,")));  // M = 3 on the mixed one
}

// An answer saved from a server older than the stage timing cannot be drawn truthfully: a
// clear error naming the template, not a schedule without transfers.
TEST(TemplatesPicture, RefusesAnAnswerWithoutStageTiming) {
  pb::PlanTemplatesResponse response = SampleTemplates(6);
  response.mutable_results(2)->mutable_template_()->clear_microbatches();
  for (int m : {0, 6}) {
    svg::ScheduleOptions options;
    options.microbatches = m;
    const absl::StatusOr<std::string> svg = svg::DrawTemplatesSvg(response, options);
    EXPECT_EQ(svg.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(svg.status().message(), HasSubstr("results[2].template (1xv100+1xh100) has no "
                                                  "microbatches and stages[].p2p_out_ms"));
    EXPECT_THAT(svg.status().message(), HasSubstr("older than this client"));
  }
  // Infeasible results carry no template and need none.
  response.mutable_results(2)->set_feasible(false);
  EXPECT_TRUE(svg::DrawTemplatesSvg(response, {}).ok());
}

TEST(Escape, ReplacesWhatXmlCannotHold) {
  EXPECT_EQ(svg::EscapeXml("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(svg::EscapeXml("caf\xC3\xA9"), "caf\xC3\xA9");  // valid UTF-8 kept
  EXPECT_EQ(svg::EscapeXml("x\xFFy"), "x\xEF\xBF\xBDy");    // invalid byte
  EXPECT_EQ(svg::EscapeXml("x\xC3"), "x\xEF\xBF\xBD");      // cut sequence
  EXPECT_EQ(svg::EscapeXml("a\x01z"), "a\xEF\xBF\xBDz");    // control character
  EXPECT_EQ(svg::EscapeXml("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(svg::Abbreviate("abcdefghij", 6), "abc...");
  EXPECT_EQ(svg::Abbreviate("abcdef", 6), "abcdef");
}

TEST(Escape, HostileIdsStillMakeAValidDocument) {
  pb::PlanResponse plan = SamplePlan();
  const std::string nasty = "]]><!--\x01\xFF<svg onload=alert(1)>";
  plan.mutable_plan()->mutable_pipelines(1)->set_node_ids(0, nasty);
  plan.mutable_plan()->mutable_idle_nodes(0)->set_node_id(nasty);
  const std::string svg = svg::DrawPlanSvg(plan);
  EXPECT_THAT(svg, Not(HasSubstr("<svg onload")));
  Render(svg, "hostile");  // rsvg-convert rejects a malformed document
}

TEST(MixLabel, MarksEachDerivedTypeWhereItStands) {
  EXPECT_EQ(MarkDerivedTypes("2xv100+2xrtx3090+2xrtx4090", {"v100", "rtx3090"}),
            "2xv100*+2xrtx3090*+2xrtx4090");
  EXPECT_EQ(MarkDerivedTypes("2xv100+2xrtx3090", {}), "2xv100+2xrtx3090");
  const pb::PipelineTemplate t = MixedTemplate(4);
  EXPECT_EQ(DerivedNodeTypes(t, {}), std::set<std::string>{"v100"});
  // Node type names differ from GPU types: the request's mapping decides.
  EXPECT_EQ(DerivedNodeTypes(t, {{"v100", "h100"}, {"h100", "v100"}}),
            std::set<std::string>{"h100"});

  pb::PlanTemplatesResponse response = SampleTemplates(4);
  const std::string table = FormatTemplates(response);
  EXPECT_THAT(table, HasSubstr("1xv100*+1xh100 "));
  EXPECT_THAT(table, HasSubstr("* profile derived by relative speed, not measured: v100"));
}

}  // namespace
}  // namespace oobleck::client
