// Oobleck's instantiation (core/oobleck_instantiation.h) against brute force: every instance
// set that covers the nodes and every micro-batch vector of it.
#include "core/oobleck_instantiation.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/field_path.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oobleck {
namespace {

using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

Interrupt& NoInterrupt() {
  static Interrupt* interrupt = new Interrupt({});
  return *interrupt;
}

// --- brute force ------------------------------------------------------------------------

struct OracleSplit {
  double pipeline_ms = kInf;
  std::vector<int> microbatches;  // lexicographically largest among the least, per template
};

// Every b (b_t in [1, B] for used templates, 0 otherwise) with sum x_t b_t = B.
OracleSplit BruteForceSplit(const InstantiationProblem& problem, const std::vector<int>& x) {
  const int m = static_cast<int>(x.size());
  OracleSplit best;
  std::vector<int> b(m, 0);
  std::function<void(int, int)> rec = [&](int t, int left) {
    if (t == m) {
      if (left != 0) return;
      double ms = 0;
      for (int s = 0; s < m; ++s) {
        if (x[s] > 0) ms = std::max(ms, problem.templates[s].iteration_time_ms * b[s]);
      }
      if (ms < best.pipeline_ms || (ms == best.pipeline_ms && b > best.microbatches)) {
        best.pipeline_ms = ms;
        best.microbatches = b;
      }
      return;
    }
    if (x[t] == 0) {
      b[t] = 0;
      rec(t + 1, left);
      return;
    }
    for (int bt = 1; bt * x[t] <= left; ++bt) {
      b[t] = bt;
      rec(t + 1, left - bt * x[t]);
    }
  };
  rec(0, problem.global_batch);
  return best;
}

// The least iteration time over every instance set (kInf: none).
double BruteForceInstantiate(const InstantiationProblem& problem) {
  const int m = static_cast<int>(problem.templates.size());
  double best = kInf;
  std::vector<int> x(m, 0);
  std::function<void(int, int)> rec = [&](int t, int left) {
    if (t == m) {
      if (left != 0) return;
      int pipelines = 0;
      for (int c : x) pipelines += c;
      const auto allreduce = problem.allreduce_ms.find(pipelines);
      if (pipelines > problem.global_batch || allreduce == problem.allreduce_ms.end()) return;
      const double ms = BruteForceSplit(problem, x).pipeline_ms;
      if (ms < kInf) best = std::min(best, ms + allreduce->second);
      return;
    }
    for (int c = 0; c * problem.templates[t].num_nodes <= left; ++c) {
      x[t] = c;
      rec(t + 1, left - c * problem.templates[t].num_nodes);
    }
    x[t] = 0;
  };
  rec(0, problem.num_nodes);
  return best;
}

// The answer is a valid plan for `problem` and its figures follow from its counts.
void ExpectConsistent(const InstantiationProblem& problem, const Instantiation& answer) {
  const size_t m = problem.templates.size();
  ASSERT_EQ(answer.instances.size(), m);
  ASSERT_EQ(answer.microbatches.size(), m);
  int nodes = 0, pipelines = 0, batch = 0;
  double pipeline_ms = 0;
  for (size_t t = 0; t < m; ++t) {
    nodes += answer.instances[t] * problem.templates[t].num_nodes;
    pipelines += answer.instances[t];
    batch += answer.instances[t] * answer.microbatches[t];
    if (answer.instances[t] == 0) {
      EXPECT_EQ(answer.microbatches[t], 0);
    } else {
      EXPECT_GE(answer.microbatches[t], 1);
      pipeline_ms =
          std::max(pipeline_ms, problem.templates[t].iteration_time_ms * answer.microbatches[t]);
    }
  }
  EXPECT_EQ(nodes, problem.num_nodes);
  EXPECT_EQ(batch, problem.global_batch);
  EXPECT_EQ(pipelines, answer.num_pipelines);
  EXPECT_EQ(answer.pipeline_time_ms, pipeline_ms);
  ASSERT_TRUE(problem.allreduce_ms.contains(pipelines));
  EXPECT_EQ(answer.allreduce_ms, problem.allreduce_ms.at(pipelines));
  EXPECT_EQ(answer.iteration_time_ms, pipeline_ms + answer.allreduce_ms);
}

// Small random problems: up to 5 templates of 1..4 nodes (sizes may repeat), 1..12 nodes,
// batches 1..30, iteration times on a coarse grid (ties) or arbitrary, all-reduce entries
// for some pipeline counts only.
InstantiationProblem RandomProblem(std::mt19937& rng) {
  auto uniform = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  InstantiationProblem problem;
  const int m = uniform(1, 5);
  const bool grid = uniform(0, 1) == 0;
  for (int t = 0; t < m; ++t) {
    const double time =
        grid ? 0.5 * uniform(1, 8) : std::uniform_real_distribution<double>(0.1, 5.0)(rng);
    problem.templates.push_back({uniform(1, 4), uniform(1, 4), time});
  }
  problem.num_nodes = uniform(1, 12);
  problem.global_batch = uniform(1, 30);
  for (int p = 1; p <= problem.num_nodes; ++p) {
    if (uniform(0, 5) > 0) problem.allreduce_ms[p] = 0.25 * uniform(0, 12);
  }
  return problem;
}

TEST(OobleckInstantiationTest, InstantiateMatchesBruteForce) {
  std::mt19937 rng(20261127);
  int feasible = 0;
  for (int i = 0; i < 2000; ++i) {
    const InstantiationProblem problem = RandomProblem(rng);
    SCOPED_TRACE(absl::StrCat("instance ", i));
    const double expected = BruteForceInstantiate(problem);
    const absl::StatusOr<Instantiation> answer = InstantiateOobleck(problem, NoInterrupt());
    if (expected == kInf) {
      EXPECT_EQ(answer.status().code(), absl::StatusCode::kFailedPrecondition) << answer.status();
      continue;
    }
    ++feasible;
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->iteration_time_ms, expected);
    ExpectConsistent(problem, *answer);
  }
  EXPECT_GE(feasible, 800);  // the suite exercises both outcomes
}

TEST(OobleckInstantiationTest, SplitMatchesBruteForceAndItsTieBreak) {
  std::mt19937 rng(7);
  int feasible = 0;
  for (int i = 0; i < 400; ++i) {
    InstantiationProblem problem = RandomProblem(rng);
    std::vector<int> x(problem.templates.size(), 0);
    int nodes = 0, pipelines = 0;
    for (int& c : x) c = std::uniform_int_distribution<int>(0, 3)(rng);
    if (std::all_of(x.begin(), x.end(), [](int c) { return c == 0; })) x[0] = 1;
    for (size_t t = 0; t < x.size(); ++t) {
      nodes += x[t] * problem.templates[t].num_nodes;
      pipelines += x[t];
    }
    problem.num_nodes = i % 2 == 0 ? 0 : nodes;  // 0: taken from the instances
    problem.allreduce_ms[pipelines] = 1.5;
    SCOPED_TRACE(absl::StrCat("instance ", i));
    const OracleSplit expected = BruteForceSplit(problem, x);
    const absl::StatusOr<Instantiation> answer = SplitOobleckBatch(problem, x, NoInterrupt());
    if (expected.pipeline_ms == kInf) {
      EXPECT_EQ(answer.status().code(), absl::StatusCode::kFailedPrecondition) << answer.status();
      continue;
    }
    ++feasible;
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->pipeline_time_ms, expected.pipeline_ms);
    EXPECT_EQ(answer->microbatches, expected.microbatches);
    EXPECT_EQ(answer->instances, x);
    problem.num_nodes = nodes;
    ExpectConsistent(problem, *answer);
  }
  EXPECT_GE(feasible, 150);
}

TEST(OobleckInstantiationTest, EqualityThatCannotHoldIsFailedPrecondition) {
  // Two pipelines of one template share b: 2b = 3 has no solution.
  InstantiationProblem problem{{{1, 1, 1.0}}, 2, 3, {{2, 0.0}}};
  const absl::StatusOr<Instantiation> split = SplitOobleckBatch(problem, {2}, NoInterrupt());
  EXPECT_EQ(split.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(split.status().message(), HasSubstr("one micro-batch count"));
  EXPECT_EQ(FieldPathOf(split.status()), "global_batch");
  // Free: the only set covering 2 nodes is that one.
  const absl::StatusOr<Instantiation> free = InstantiateOobleck(problem, NoInterrupt());
  EXPECT_EQ(free.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(free.status().message(), HasSubstr("one micro-batch count per template"));
}

TEST(OobleckInstantiationTest, MissingAllreduceEntryIsFailedPrecondition) {
  InstantiationProblem problem{{{1, 1, 1.0}}, 2, 4, {{1, 0.0}}};
  const absl::StatusOr<Instantiation> split = SplitOobleckBatch(problem, {2}, NoInterrupt());
  EXPECT_EQ(split.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(split.status().message(), HasSubstr("no entry for 2 pipelines"));
  const absl::StatusOr<Instantiation> free = InstantiateOobleck(problem, NoInterrupt());
  EXPECT_EQ(free.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(free.status().message(), HasSubstr("allreduce_across_pipelines_ms has no entry"));
  // With a second template the count 1 is reachable: a 2-node pipeline.
  problem.templates.push_back({2, 2, 1.5});
  const absl::StatusOr<Instantiation> answer = InstantiateOobleck(problem, NoInterrupt());
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->instances, (std::vector<int>{0, 1}));
  EXPECT_EQ(answer->iteration_time_ms, 6.0);
}

TEST(OobleckInstantiationTest, OneTemplateUsesEveryNode) {
  // Oobleck's own test: one template, 4 nodes, 512 micro-batches.
  const InstantiationProblem problem{{{1, 1, 2.0}}, 4, 512, {{1, 0.0}, {2, 1.0}, {4, 3.0}}};
  const absl::StatusOr<Instantiation> answer = InstantiateOobleck(problem, NoInterrupt());
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->instances, std::vector<int>{4});
  EXPECT_EQ(answer->microbatches, std::vector<int>{128});
  EXPECT_EQ(answer->iteration_time_ms, 256.0 + 3.0);
}

TEST(OobleckInstantiationTest, TemplatesOfEqualSize) {
  // Same node count, different speeds: 2 x fast (b = 2) beats fast + slow (3 + 1 x 3).
  const InstantiationProblem problem{{{2, 1, 1.0}, {2, 2, 3.0}}, 4, 4, {{2, 0.5}}};
  const absl::StatusOr<Instantiation> answer = InstantiateOobleck(problem, NoInterrupt());
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->instances, (std::vector<int>{2, 0}));
  EXPECT_EQ(answer->microbatches, (std::vector<int>{2, 0}));
  EXPECT_EQ(answer->iteration_time_ms, 2.5);
  const absl::StatusOr<Instantiation> mixed = SplitOobleckBatch(problem, {1, 1}, NoInterrupt());
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(mixed->microbatches, (std::vector<int>{3, 1}));
  EXPECT_EQ(mixed->pipeline_time_ms, 3.0);
}

TEST(OobleckInstantiationTest, BatchEqualToPipelineCount) {
  const InstantiationProblem problem{{{1, 1, 2.0}, {2, 1, 1.0}}, 4, 4, {{4, 0.0}, {2, 9.0}}};
  const absl::StatusOr<Instantiation> answer = InstantiateOobleck(problem, NoInterrupt());
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->instances, (std::vector<int>{4, 0}));
  EXPECT_EQ(answer->microbatches, (std::vector<int>{1, 0}));
  EXPECT_EQ(answer->iteration_time_ms, 2.0);
}

TEST(OobleckInstantiationTest, NodesNoSetCoversAndBatchesTooSmallSayWhy) {
  const InstantiationProblem odd{{{2, 1, 1.0}, {4, 1, 1.0}}, 7, 8, {{1, 0.0}, {2, 0.0}}};
  absl::StatusOr<Instantiation> answer = InstantiateOobleck(odd, NoInterrupt());
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(FieldPathOf(answer.status()), "num_nodes");
  EXPECT_THAT(answer.status().message(), HasSubstr("of 2, 4 nodes"));
  const InstantiationProblem small{{{1, 1, 1.0}}, 4, 3, {{4, 0.0}}};
  answer = InstantiateOobleck(small, NoInterrupt());
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(answer.status().message(), HasSubstr("global_batch = 3"));
  answer = SplitOobleckBatch(small, {4}, NoInterrupt());
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(answer.status().message(), HasSubstr("smaller than the 4 pipelines"));
}

TEST(OobleckInstantiationTest, InvalidInputNamesTheField) {
  const InstantiationProblem good{{{1, 1, 1.0}, {2, 1, 1.0}}, 4, 8, {{2, 0.0}}};
  auto field_of = [](const InstantiationProblem& problem, const std::vector<int>* instances) {
    const absl::Status status = ValidateInstantiationProblem(problem, instances);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    return FieldPathOf(status).value_or("");
  };
  InstantiationProblem p = good;
  p.templates[1].iteration_time_ms = 0;
  EXPECT_EQ(field_of(p, nullptr), "templates[1].iteration_time_ms");
  p = good;
  p.templates[0].num_nodes = 0;
  EXPECT_EQ(field_of(p, nullptr), "templates[0].num_nodes");
  p = good;
  p.templates[0].num_stages = 0;
  EXPECT_EQ(field_of(p, nullptr), "templates[0].num_stages");
  p = good;
  p.templates.clear();
  EXPECT_EQ(field_of(p, nullptr), "templates");
  p = good;
  p.num_nodes = 0;
  EXPECT_EQ(field_of(p, nullptr), "num_nodes");
  p = good;
  p.global_batch = (1 << 20) + 1;
  EXPECT_EQ(field_of(p, nullptr), "global_batch");
  p = good;
  p.allreduce_ms[0] = 1;
  EXPECT_EQ(field_of(p, nullptr), "allreduce_across_pipelines_ms[0]");
  p = good;
  p.allreduce_ms[3] = -1;
  EXPECT_EQ(field_of(p, nullptr), "allreduce_across_pipelines_ms[3]");
  const std::vector<int> short_list{1};
  EXPECT_EQ(field_of(good, &short_list), "instances");
  const std::vector<int> negative{1, -1};
  EXPECT_EQ(field_of(good, &negative), "instances[1]");
  const std::vector<int> none{0, 0};
  EXPECT_EQ(field_of(good, &none), "instances");
  const std::vector<int> wrong_nodes{1, 0};  // 1 node, num_nodes 4
  EXPECT_EQ(field_of(good, &wrong_nodes), "num_nodes");
  p = good;
  p.templates.resize(kMaxInstantiationTemplates + 1, good.templates[0]);
  EXPECT_EQ(ValidateInstantiationProblem(p, nullptr).code(), absl::StatusCode::kResourceExhausted);
  p = good;
  p.num_nodes = kMaxInstantiationNodes + 1;
  EXPECT_EQ(ValidateInstantiationProblem(p, nullptr).code(), absl::StatusCode::kResourceExhausted);
  const std::vector<int> fits{2, 1};
  EXPECT_TRUE(ValidateInstantiationProblem(good, &fits).ok());
}

TEST(OobleckInstantiationTest, WorkLimitAndInterruptStopTheSearch) {
  InstantiationProblem problem;
  for (int t = 0; t < 12; ++t) problem.templates.push_back({1 + t % 4, 1, 1.0 + 0.01 * t});
  problem.num_nodes = 200;
  problem.global_batch = 4096;
  for (int p = 1; p <= 200; ++p) problem.allreduce_ms[p] = 0;
  absl::StatusOr<Instantiation> answer = InstantiateOobleck(problem, NoInterrupt(), 1000);
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(answer.status().message(), HasSubstr("kMaxInstantiationWork"));
  Interrupt cancelled([] { return true; });
  answer = InstantiateOobleck(problem, cancelled);
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kCancelled);
  Interrupt cancelled_split([] { return true; });
  problem.num_nodes = 0;
  answer = SplitOobleckBatch(problem, std::vector<int>(12, 3), cancelled_split);
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kCancelled);
}

TEST(OobleckInstantiationTest, LargeBatchSplitIsExactAndQuick) {
  // 32 templates, B = 2^20: the split must stay well under a second.
  InstantiationProblem problem;
  std::vector<int> x;
  int nodes = 0, pipelines = 0;
  for (int t = 0; t < 32; ++t) {
    problem.templates.push_back({1 + t % 8, 1, 10.0 + 0.37 * t});
    x.push_back(1 + (t % 3));
    nodes += x.back() * problem.templates.back().num_nodes;
    pipelines += x.back();
  }
  problem.global_batch = 1 << 20;
  problem.allreduce_ms[pipelines] = 5;
  const auto start = std::chrono::steady_clock::now();
  const absl::StatusOr<Instantiation> answer = SplitOobleckBatch(problem, x, NoInterrupt());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(answer.ok()) << answer.status();
  problem.num_nodes = nodes;
  ExpectConsistent(problem, *answer);
  EXPECT_LT(seconds, 5.0);
  RecordProperty("split_seconds", absl::StrCat(seconds));
}

}  // namespace
}  // namespace oobleck
