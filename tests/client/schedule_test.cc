// The 1F1B schedule the template pictures draw: checked against the cost model where the
// two must agree, and against the rules of 1F1B on random stage times.
#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "client/svg/schedule_picture.h"
#include "gtest/gtest.h"
#include "tests/client/answers.h"

namespace oobleck::client {
namespace {

using namespace ::oobleck::client::testing;  // NOLINT: the sample answers

double Makespan(const std::vector<svg::ScheduledPass>& passes) {
  double end = 0;
  for (const svg::ScheduledPass& p : passes) end = std::max(end, p.end_ms);
  return end;
}

pb::PipelineTemplate Uniform(int stages, double forward_ms, double backward_ms) {
  pb::PipelineTemplate t;
  for (int s = 0; s < stages; ++s) {
    *t.add_stages() =
        MakeStage(s, s + 1, s, "gpu", 1, forward_ms, backward_ms, forward_ms + backward_ms);
  }
  return t;
}

TEST(Schedule1F1B, EqualStagesWithoutTransfersTakeTheCostModelsTime) {
  // (M + S - 1)(F + B) = Σc + (M - 1)·max c when every stage costs the same.
  for (int stages = 1; stages <= 5; ++stages) {
    for (int m = 1; m <= 8; ++m) {
      const pb::PipelineTemplate t = Uniform(stages, 3, 7);
      const auto passes = svg::Schedule1F1B(t, std::vector<double>(stages, 0.0), m);
      EXPECT_EQ(passes.size(), static_cast<size_t>(2 * stages * m));
      EXPECT_DOUBLE_EQ(Makespan(passes), PipelineMs(t, m)) << stages << " stages, M " << m;
    }
  }
}

TEST(Schedule1F1B, FollowsTheRulesOf1F1BOnRandomStages) {
  std::mt19937 rng(15);
  std::uniform_real_distribution<double> ms(0.5, 20);
  for (int trial = 0; trial < 200; ++trial) {
    const int stages = 1 + trial % 6;
    const int m = 1 + (trial / 6) % 9;
    pb::PipelineTemplate t;
    std::vector<double> transfer(stages, 0.0);
    for (int s = 0; s < stages; ++s) {
      *t.add_stages() = MakeStage(s, s + 1, s, "gpu", 1, ms(rng), ms(rng), 0);
      if (s + 1 < stages) transfer[s] = ms(rng) / 4;
    }
    const auto passes = svg::Schedule1F1B(t, transfer, m);
    ASSERT_EQ(passes.size(), static_cast<size_t>(2 * stages * m));
    std::map<std::tuple<int, int, bool>, svg::ScheduledPass> by_key;
    std::vector<std::vector<svg::ScheduledPass>> by_stage(stages);
    for (const svg::ScheduledPass& p : passes) {
      ASSERT_TRUE(by_key.emplace(std::make_tuple(p.stage, p.microbatch, p.backward), p).second);
      by_stage[p.stage].push_back(p);
      const pb::Stage& st = t.stages(p.stage);
      EXPECT_NEAR(p.end_ms - p.start_ms, p.backward ? st.backward_ms() : st.forward_ms(), 1e-9);
    }
    for (const svg::ScheduledPass& p : passes) {
      if (!p.backward && p.stage > 0) {
        const auto& prev = by_key.at({p.stage - 1, p.microbatch, false});
        EXPECT_GE(p.start_ms, prev.end_ms + transfer[p.stage - 1] - 1e-9);
      }
      if (p.backward && p.stage + 1 < stages) {
        const auto& next = by_key.at({p.stage + 1, p.microbatch, true});
        EXPECT_GE(p.start_ms, next.end_ms + transfer[p.stage] - 1e-9);
      }
      if (p.backward) {
        EXPECT_GE(p.start_ms, by_key.at({p.stage, p.microbatch, false}).end_ms - 1e-9);
      }
    }
    for (int s = 0; s < stages; ++s) {
      // One pass at a time per stage, and at most S - s micro-batches in flight (the
      // activations the memory model counts).
      std::sort(by_stage[s].begin(), by_stage[s].end(),
                [](const auto& a, const auto& b) { return a.start_ms < b.start_ms; });
      int in_flight = 0;
      for (size_t i = 0; i < by_stage[s].size(); ++i) {
        if (i > 0) {
          EXPECT_GE(by_stage[s][i].start_ms, by_stage[s][i - 1].end_ms - 1e-9);
        }
        in_flight += by_stage[s][i].backward ? -1 : 1;
        EXPECT_LE(in_flight, std::min(m, stages - s));
      }
      EXPECT_EQ(in_flight, 0);
    }
  }
}

TEST(Schedule1F1B, ReadsTransfersFromTheAnswer) {
  pb::PipelineTemplate t = MixedTemplate(7);
  EXPECT_EQ(svg::TransferMs(t), (std::vector<double>{5, 5, 0}));
  // The answer's figure, not one recovered from cost_ms (which still says 5).
  t.mutable_stages(0)->set_p2p_out_ms(7);
  EXPECT_EQ(svg::TransferMs(t), (std::vector<double>{7, 5, 0}));
  EXPECT_TRUE(svg::Schedule1F1B(t, svg::TransferMs(t), 0).empty());
}

}  // namespace
}  // namespace oobleck::client
