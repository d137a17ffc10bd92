// Replan: candidates (the exact optimum for the new cluster, the same with the untouched
// pipelines kept, Oobleck's fallback rule), each bound to concrete nodes so that the bytes
// to copy are minimal (an assignment problem per node type), then the one that moves the
// fewest bytes among those within the tolerance of the fastest and never slower than the
// fallback rule.
#include "core/replan.h"

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/plan/cluster_plan.h"
#include "core/plan/cluster_planner.h"
#include "core/plan/fault_tolerance.h"
#include "core/plan/node_set.h"
#include "core/plan/pipeline_set.h"
#include "core/plan/pipeline_shape.h"
#include "core/plan/template_set.h"
#include "core/plan_search/batch_split.h"
#include "core/plan_search/pipeline_set_search.h"
#include "core/replan/candidate.h"
#include "core/replan/context.h"
#include "core/replan/fallback.h"
#include "core/status_macros.h"

namespace oobleck {
namespace {

using replan_internal::Candidate;
using replan_internal::Draft;
using replan_internal::DraftPipeline;
using replan_internal::FallbackDraft;
using replan_internal::Finalize;
using replan_internal::IndexedCopy;
using replan_internal::LayerHolders;
using replan_internal::Materialize;
using replan_internal::Prepare;
using replan_internal::ReplanContext;

constexpr double kInf = std::numeric_limits<double>::infinity();

// The old pipelines that lost no node, in classes of SameShape, each in index order: a new
// pipeline takes the first free one of its shape (what a scan of every old pipeline would
// pick) without comparing every pair (thousands of each at fleet scale).
class IntactByShape {
 public:
  explicit IntactByShape(const ReplanContext& ctx) : ctx_(ctx) {
    for (size_t i = 0; i < ctx.old.pipelines.size(); ++i) {
      if (!ctx.intact[i]) continue;
      const int c = ClassOf(ctx.old.pipelines[i].tmpl, /*add=*/true);
      members_[c].push_back(static_cast<int>(i));
    }
    next_.assign(members_.size(), 0);
  }
  // The first old pipeline of tmpl's shape not yet taken, or -1.
  int Take(const PipelineTemplate& tmpl) {
    const int c = ClassOf(tmpl, /*add=*/false);
    if (c < 0 || next_[c] == members_[c].size()) return -1;
    return members_[c][next_[c]++];
  }

 private:
  int ClassOf(const PipelineTemplate& tmpl, bool add) {
    std::vector<int>& classes = by_hash_[ShapeHash(tmpl)];
    for (int c : classes) {
      if (SameShape(ctx_.old.pipelines[members_[c][0]].tmpl, tmpl)) return c;
    }
    if (!add) return -1;
    classes.push_back(static_cast<int>(members_.size()));
    members_.emplace_back();
    return classes.back();
  }
  const ReplanContext& ctx_;
  absl::flat_hash_map<uint64_t, std::vector<int>> by_hash_;  // hash -> classes
  std::vector<std::vector<int>> members_;                    // per class: old pipelines
  std::vector<size_t> next_;                                 // per class: first not taken
};

// Downtime of applying the candidate (docs/COST_MODEL.md#reconfiguration-downtime).
void PriceDowntime(const ReplanContext& ctx, const ReplanOptions& options, Candidate* c) {
  // CopyTransferSeconds over survivor indices (ids are unique, so the sums are the same).
  std::vector<double> sent(ctx.survivors.size(), 0), received(ctx.survivors.size(), 0);
  double busiest = 0;
  for (const IndexedCopy& x : c->copies) {
    busiest = std::max(busiest, sent[x.source] += x.param_bytes);
    busiest = std::max(busiest, received[x.dest] += x.param_bytes);
  }
  c->transfer_s = busiest > 0 ? busiest / ctx.model->problem().inter_node_bytes_per_s : 0;
  const size_t old_count = ctx.old.pipelines.size();
  const bool same_pipelines =
      static_cast<size_t>(c->kept) == old_count && c->draft.pipelines.size() == old_count;
  c->downtime_s = c->transfer_s + (same_pipelines ? 0 : options.restart_overhead_s);
}

// The candidates no other beats on both iteration time and downtime, fastest first; of
// equal ones the first.
std::vector<ReplanAlternative> ParetoFront(const std::vector<Candidate*>& candidates) {
  std::vector<const Candidate*> order(candidates.begin(), candidates.end());
  std::stable_sort(order.begin(), order.end(), [](const Candidate* a, const Candidate* b) {
    return std::make_pair(a->iteration_time_ms, a->downtime_s) <
           std::make_pair(b->iteration_time_ms, b->downtime_s);
  });
  std::vector<ReplanAlternative> front;
  double best_downtime = kInf;
  for (const Candidate* c : order) {
    if (!(c->downtime_s < best_downtime)) continue;  // a faster one is down no longer
    best_downtime = c->downtime_s;
    front.push_back({c->strategy, c->iteration_time_ms, c->downtime_s, c->bytes, c->kept,
                     c->fault_tolerance()});
  }
  return front;
}

// The nodes of a candidate's largest pipeline.
int LargestPipeline(const Candidate& c) {
  int largest = 0;
  for (const DraftPipeline& p : c.draft.pipelines) largest = std::max(largest, p.tmpl->num_nodes());
  return largest;
}

// Why a plan gives less than Oobleck's cap asks: a pipeline past the cap, or the f the
// survivors allow (ctx.size_cap_degraded); "" when neither.
std::string OverCapReason(const ReplanContext& ctx, const ClusterPlan& plan, const char* what) {
  int largest = 0;
  for (const PlannedPipeline& p : plan.pipelines) largest = std::max(largest, p.tmpl.num_nodes());
  if (largest <= ctx.size_cap) return ctx.size_cap_degraded;
  return absl::StrCat(what, " has a pipeline of ", largest, " nodes, more than Oobleck's cap ",
                      ctx.size_cap, " (N - f)");
}

// The answer when the event changes nothing (replayed or empty).
ReplanResult UnchangedResult(ReplanContext& ctx, const ReplanOptions& options,
                             ReplanResult result) {
  result.plan = ctx.old;
  result.strategy = ReplanStrategy::kUnchanged;
  result.pipelines_kept = static_cast<int>(ctx.old.pipelines.size());
  result.fastest_iteration_time_ms = ctx.old.iteration_time_ms;
  result.oobleck_fallback_ms = ctx.old.iteration_time_ms;
  result.alternatives.push_back({ReplanStrategy::kUnchanged, ctx.old.iteration_time_ms, 0, 0,
                                 result.pipelines_kept, ctx.old.fault_tolerance()});
  if (ctx.size_cap > 0) {
    result.degraded_reason = OverCapReason(ctx, ctx.old, "the unchanged plan");
  } else if (ctx.old.fault_tolerance() < options.fault_tolerance) {
    result.degraded_reason = absl::StrFormat(
        "the unchanged plan has %d pipeline(s): it tolerates %d failure(s), fewer than "
        "fault_tolerance = %d",
        ctx.old.pipelines.size(), ctx.old.fault_tolerance(), options.fault_tolerance);
  }
  result.old_plan = std::move(ctx.old);
  return result;
}

// One Replan after a changing event: the candidates (docs/architecture/replan.md), then
// the choice among them.
class CandidateRound {
 public:
  CandidateRound(const ClusterPlanner& planner, ReplanContext& ctx, const ReplanOptions& options,
                 ReplanResult* result)
      : planner_(planner),
        model_(*ctx.model),
        ctx_(ctx),
        options_(options),
        result_(*result),
        layer_holders_(ctx),
        fault_tolerance_(options.fault_tolerance_rule == FaultToleranceRule::kPipelines
                             ? options.fault_tolerance
                             : 0) {
    counts_.assign(model_.num_types(), 0);
    for (const ClusterNode& node : ctx.survivors) ++counts_[node.type];
    for (size_t i = 0; i < ctx.old.pipelines.size(); ++i) {
      if (ctx.intact[i]) intact_.push_back(i);
    }
  }

  absl::Status Run() {
    set_ = PlanTemplateSet(*planner_.templates(), model_, counts_, ctx_.limits, options_.search);
    if (!set_.ok()) return set_.status();
    shapes_ = FeasibleShapes(model_, *set_, ctx_.limits);
    type_reasons_ = UnusedTypeReasons(model_, shapes_, counts_, ctx_.limits);
    RETURN_IF_ERROR(ReachFaultTolerance());
    if (ctx_.size_cap > 0) result_.degraded_reason = ctx_.size_cap_degraded;
    // The two searches and the drop-broken split are independent (the searches share
    // shapes_ read-only) but run one after the other: run together (tbb::parallel_invoke
    // in an arena of the planner's threads) they cost the server about 1.3 ms more CPU
    // per fleet call (workers waking and spinning) and shortened no call on the 2 shared
    // cores measured (bench/README.md#fleet-replan-through-the-server).
    absl::StatusOr<PipelineSetSolution> optimal = SolvePipelineSet(ProblemFor(false));
    // Unread when no pipeline is intact.
    absl::StatusOr<PipelineSetSolution> keep = absl::CancelledError("not run");
    absl::StatusOr<std::vector<int>> drop_split = absl::CancelledError("not run");
    if (!intact_.empty()) {
      keep = SolvePipelineSet(ProblemFor(true));
      drop_split = DropBrokenSplit();
    }
    // Each step in turn; the first error ends the round.
    RETURN_IF_ERROR(AddOptimal(std::move(optimal)));
    RETURN_IF_ERROR(AddKeepPipelines(std::move(keep)));
    RETURN_IF_ERROR(AddDropBroken(drop_split));
    RETURN_IF_ERROR(AddFallback());
    ASSIGN_OR_RETURN(Candidate * chosen, Choose());
    Materialize(ctx_, *chosen, type_reasons_, &result_.plan, &result_.copies);
    result_.copy_bytes = chosen->bytes;
    result_.strategy = chosen->strategy;
    result_.pipelines_kept = chosen->kept;
    result_.transfer_s = chosen->transfer_s;
    result_.downtime_s = chosen->downtime_s;
    return absl::OkStatus();
  }

 private:
  PipelineSetProblem ProblemFor(bool keep_intact) {
    PipelineSetProblem problem;
    problem.model = &model_;
    problem.available = counts_;
    if (keep_intact) {
      for (size_t i : intact_) {
        const PipelineTemplate& tmpl = ctx_.old.pipelines[i].tmpl;
        problem.fixed.push_back({tmpl.mix, &tmpl, StageCosts(tmpl), model_.MaxMicrobatches(tmpl)});
        for (int t = 0; t < model_.num_types(); ++t) problem.available[t] -= tmpl.mix[t];
      }
    }
    problem.shared_shapes = &shapes_;
    problem.global_batch = ctx_.old.global_batch;
    problem.allreduce_ms = &ctx_.allreduce_ms;
    problem.search = options_.search;
    problem.makespan_hint_ms = ctx_.old.pipeline_time_ms;
    problem.min_pipelines = fault_tolerance_ + 1;
    problem.min_pipelines_reason = absl::StrCat("fault_tolerance = ", fault_tolerance_);
    return problem;
  }

  // The f-failure guarantee: f + 1 pipelines when the survivors allow it, else the most
  // they allow (any plan of the survivors has at least one).
  absl::Status ReachFaultTolerance() {
    if (fault_tolerance_ == 0) return absl::OkStatus();
    PipelineSetProblem problem = ProblemFor(false);
    absl::StatusOr<int> most = MaxPipelineCount(problem, fault_tolerance_ + 1);
    if (!most.ok()) return most.status();
    if (*most >= 1 && *most < fault_tolerance_ + 1) {
      fault_tolerance_ = *most - 1;
      result_.degraded_reason = absl::StrFormat(
          "fault_tolerance = %d needs %d pipelines; the %d surviving node(s) fit at most %d, "
          "so the plan tolerates %d failure(s)",
          options_.fault_tolerance, options_.fault_tolerance + 1, ctx_.survivors.size(), *most,
          fault_tolerance_);
    }
    return absl::OkStatus();
  }

  absl::Status Add(Draft draft) {
    ASSIGN_OR_RETURN(Candidate c, Finalize(ctx_, layer_holders_, std::move(draft)));
    PriceDowntime(ctx_, options_, &c);
    candidates_.push_back(std::move(c));
    return absl::OkStatus();
  }

  // 1. The fastest plan of the new cluster (`solution`: the search of ProblemFor(false));
  // old pipelines it rebuilds identically keep their nodes.
  absl::Status AddOptimal(absl::StatusOr<PipelineSetSolution> solution) {
    if (!solution.ok()) {
      if (solution.status().code() != absl::StatusCode::kFailedPrecondition) {
        return solution.status();
      }
      optimal_status_ = solution.status();
      return absl::OkStatus();
    }
    Draft draft;
    draft.strategy = ReplanStrategy::kOptimal;
    IntactByShape intact_by_shape(ctx_);
    for (size_t k : ChosenOrder(shapes_, *solution)) {
      DraftPipeline p;
      p.tmpl = shapes_[solution->chosen[k]].tmpl;
      p.microbatches = solution->chosen_microbatches[k];
      if (const int i = intact_by_shape.Take(*p.tmpl); i >= 0) {
        p.nodes = ctx_.old_positions[i];
        p.bound = true;
      }
      draft.pipelines.push_back(std::move(p));
    }
    return Add(std::move(draft));
  }

  Draft IntactDraft(ReplanStrategy strategy, const std::vector<int>& microbatches) const {
    Draft draft;
    draft.strategy = strategy;
    for (size_t f = 0; f < intact_.size(); ++f) {
      DraftPipeline p;
      p.tmpl = &ctx_.old.pipelines[intact_[f]].tmpl;
      p.nodes = ctx_.old_positions[intact_[f]];
      p.bound = true;
      p.microbatches = microbatches[f];
      draft.pipelines.push_back(std::move(p));
    }
    return draft;
  }

  // 2. Untouched pipelines kept, the other nodes planned exactly around them (`solution`:
  // the search of ProblemFor(true)).
  absl::Status AddKeepPipelines(absl::StatusOr<PipelineSetSolution> solution) {
    if (intact_.empty()) return absl::OkStatus();
    if (!solution.ok()) {
      return solution.status().code() == absl::StatusCode::kFailedPrecondition ? absl::OkStatus()
                                                                               : solution.status();
    }
    Draft draft = IntactDraft(ReplanStrategy::kKeepPipelines, solution->fixed_microbatches);
    for (size_t k : ChosenOrder(shapes_, *solution)) {
      DraftPipeline p;
      p.tmpl = shapes_[solution->chosen[k]].tmpl;
      p.microbatches = solution->chosen_microbatches[k];
      draft.pipelines.push_back(std::move(p));
    }
    return Add(std::move(draft));
  }

  // 3. Only the untouched pipelines, the batch split over them: nothing to copy.
  absl::StatusOr<std::vector<int>> DropBrokenSplit() const {
    std::vector<std::vector<double>> costs;
    std::vector<PipelineLoad> loads;
    for (size_t i : intact_) costs.push_back(StageCosts(ctx_.old.pipelines[i].tmpl));
    for (size_t f = 0; f < intact_.size(); ++f) {
      loads.push_back({&costs[f], model_.MaxMicrobatches(ctx_.old.pipelines[intact_[f]].tmpl)});
    }
    return SplitBatch(model_, loads, ctx_.old.global_batch);
  }
  // `split`: DropBrokenSplit().
  // FAILED_PRECONDITION from SplitBatch means the intact pipelines cannot run the batch:
  // no such candidate. Any other error ends the round.
  absl::Status AddDropBroken(const absl::StatusOr<std::vector<int>>& split) {
    if (intact_.empty()) return absl::OkStatus();
    if (!split.ok()) {
      return split.status().code() == absl::StatusCode::kFailedPrecondition ? absl::OkStatus()
                                                                            : split.status();
    }
    return Add(IntactDraft(ReplanStrategy::kDropBroken, *split));
  }

  // 4. Oobleck's fallback rule: a candidate, and the bar of the deprecated tolerance rule.
  absl::Status AddFallback() {
    absl::StatusOr<Draft> fallback =
        FallbackDraft(ctx_, &*set_, *planner_.templates(), options_.search, &keepalive_);
    if (!fallback.ok()) {
      if (fallback.status().code() != absl::StatusCode::kFailedPrecondition) {
        return fallback.status();
      }
      result_.oobleck_fallback_failure = std::string(fallback.status().message());
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(Add(*std::move(fallback)));
    result_.oobleck_fallback_ms = candidates_.back().iteration_time_ms;
    return absl::OkStatus();
  }

  // The plans Replan may answer with: the forced strategy's, else those that keep the
  // fault tolerance reached above.
  absl::StatusOr<std::vector<Candidate*>> Eligible() {
    std::vector<Candidate*> eligible;
    for (Candidate& c : candidates_) {
      const bool ok = options_.force_strategy.has_value() ? c.strategy == *options_.force_strategy
                                                          : c.fault_tolerance() >= fault_tolerance_;
      // Oobleck's cap binds every candidate (the kept pipelines may be larger).
      const bool capped = ctx_.size_cap == 0 || LargestPipeline(c) <= ctx_.size_cap;
      if (ok && capped) eligible.push_back(&c);
    }
    if (!eligible.empty()) return eligible;
    if (options_.force_strategy.has_value()) {
      const std::string why = *options_.force_strategy == ReplanStrategy::kOobleckFallback
                                  ? result_.oobleck_fallback_failure
                              : *options_.force_strategy == ReplanStrategy::kOptimal
                                  ? std::string(optimal_status_.message())
                                  : "no pipeline survived intact, or those that did cannot "
                                    "run the batch";
      const std::string cap = ctx_.size_cap > 0
                                  ? absl::StrCat(" (or its plan has a pipeline of more than ",
                                                 ctx_.size_cap, " nodes, Oobleck's cap N - f)")
                                  : "";
      return absl::FailedPreconditionError(absl::StrCat(
          "strategy \"", std::string(ReplanStrategyName(*options_.force_strategy)),
          "\" finds no plan for the ", ctx_.survivors.size(), " remaining node(s): ", why, cap));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("no plan exists for the ", ctx_.survivors.size(),
                     " remaining node(s): ", optimal_status_.message()));
  }

  absl::StatusOr<Candidate*> Choose() {
    ASSIGN_OR_RETURN(std::vector<Candidate*> eligible, Eligible());
    double fastest = kInf;
    for (const Candidate* c : eligible) fastest = std::min(fastest, c->iteration_time_ms);
    Candidate* chosen = nullptr;
    if (options_.tolerance.has_value()) {
      double threshold = fastest * (1 + *options_.tolerance);
      for (const Candidate* c : eligible) {
        if (c->strategy == ReplanStrategy::kOobleckFallback) {
          threshold = std::min(threshold, c->iteration_time_ms);
        }
      }
      for (Candidate* c : eligible) {
        if (c->iteration_time_ms > threshold) continue;
        if (chosen == nullptr ||
            std::make_tuple(c->bytes, -c->kept, c->iteration_time_ms) <
                std::make_tuple(chosen->bytes, -chosen->kept, chosen->iteration_time_ms)) {
          chosen = c;
        }
      }
    } else {
      // downtime + horizon x iteration time; ties: fewer bytes, more pipelines kept, faster.
      auto key = [&](const Candidate* c) {
        return std::make_tuple(
            c->downtime_s + options_.horizon_iterations * c->iteration_time_ms / 1e3, c->bytes,
            -c->kept, c->iteration_time_ms);
      };
      for (Candidate* c : eligible) {
        if (chosen == nullptr || key(c) < key(chosen)) chosen = c;
      }
    }
    result_.alternatives = ParetoFront(eligible);
    result_.fastest_iteration_time_ms = fastest;
    if (result_.degraded_reason.empty() && ctx_.size_cap == 0 &&
        chosen->fault_tolerance() < options_.fault_tolerance) {
      result_.degraded_reason = absl::StrFormat(
          "strategy \"%s\" leaves %d pipeline(s): the plan tolerates %d failure(s), fewer than "
          "fault_tolerance = %d",
          std::string(ReplanStrategyName(chosen->strategy)), chosen->draft.pipelines.size(),
          chosen->fault_tolerance(), options_.fault_tolerance);
    }
    return chosen;
  }

  const ClusterPlanner& planner_;
  const CostModel& model_;
  ReplanContext& ctx_;
  const ReplanOptions& options_;
  ReplanResult& result_;
  LayerHolders layer_holders_;
  int fault_tolerance_;  // what the survivors allow of options_.fault_tolerance
  NodeMix counts_;
  std::vector<size_t> intact_;  // old pipelines that lost no node
  absl::StatusOr<TemplateSet> set_;
  std::vector<PipelineShape> shapes_;  // shared read-only by each search's problem
  std::vector<std::string> type_reasons_;
  std::vector<Candidate> candidates_;
  absl::Status optimal_status_;
  std::vector<std::shared_ptr<const MixResult>> keepalive_;  // templates FallbackDraft planned
};

}  // namespace

std::string_view ReplanStrategyName(ReplanStrategy strategy) {
  switch (strategy) {
    case ReplanStrategy::kUnchanged:
      return "unchanged";
    case ReplanStrategy::kOptimal:
      return "optimal";
    case ReplanStrategy::kKeepPipelines:
      return "keep-pipelines";
    case ReplanStrategy::kDropBroken:
      return "drop-broken";
    case ReplanStrategy::kOobleckFallback:
      return "oobleck-fallback";
  }
  return "unknown";
}

std::optional<ReplanStrategy> ParseReplanStrategy(std::string_view name) {
  for (ReplanStrategy s : {ReplanStrategy::kOptimal, ReplanStrategy::kKeepPipelines,
                           ReplanStrategy::kDropBroken, ReplanStrategy::kOobleckFallback}) {
    if (ReplanStrategyName(s) == name) return s;
  }
  return std::nullopt;
}

double CopyTransferSeconds(const std::vector<LayerCopy>& copies, double link_bytes_per_s) {
  // Each node's link carries what it sends and, independently, what it receives (full
  // duplex); every copy running at bytes / D for D = the busiest direction's bytes / link
  // keeps every link within its bandwidth and ends all copies at D, and no schedule ends
  // before the busiest link has carried its bytes.
  std::map<std::string, double> sent, received;
  double busiest = 0;
  for (const LayerCopy& c : copies) {
    busiest = std::max(busiest, sent[c.source_node_id] += c.param_bytes);
    busiest = std::max(busiest, received[c.dest_node_id] += c.param_bytes);
  }
  return busiest > 0 ? busiest / link_bytes_per_s : 0;
}

absl::StatusOr<ReplanResult> Replan(const ClusterPlanner& planner, const CostModel& model,
                                    const std::vector<ClusterNode>& nodes, ClusterPlan current,
                                    const ClusterEvent& event, const ReplanOptions& options) {
  ASSIGN_OR_RETURN(const NodeSet set, NodeSet::Create(nodes, model.num_types()));
  return Replan(planner, model, set, std::move(current), event, options);
}

absl::StatusOr<ReplanResult> Replan(const ClusterPlanner& planner, const CostModel& model,
                                    const NodeSet& nodes, ClusterPlan current,
                                    const ClusterEvent& event, const ReplanOptions& options) {
  // ctx.old moves into the result at the end.
  ASSIGN_OR_RETURN(ReplanContext ctx, Prepare(model, nodes, std::move(current), event, options));
  ReplanResult result;
  result.ignored_failed_node_ids = std::move(ctx.ignored_failed);
  result.ignored_joined_node_ids = std::move(ctx.ignored_joined);
  if (!ctx.changed) {
    result.nodes = std::move(ctx.survivors);
    return UnchangedResult(ctx, options, std::move(result));
  }
  {
    CandidateRound round(planner, ctx, options, &result);
    RETURN_IF_ERROR(round.Run());
    RETURN_IF_ERROR(CheckPlanTimes(result.plan));
  }  // the drafts that point into ctx.old, and the ids of ctx.survivors, are done with
  result.nodes = std::move(ctx.survivors);
  result.old_plan = std::move(ctx.old);
  return result;
}

absl::StatusOr<ClusterPlan> OobleckFallbackPlan(
    const ClusterPlanner& planner, const CostModel& model, const std::vector<ClusterNode>& nodes,
    const ClusterPlan& current, const ClusterEvent& event, const ReplanOptions& options) {
  ASSIGN_OR_RETURN(const NodeSet set, NodeSet::Create(nodes, model.num_types()));
  ASSIGN_OR_RETURN(ReplanContext ctx, Prepare(model, set, current, event, options));
  if (!ctx.changed) return ctx.old;
  std::vector<std::shared_ptr<const MixResult>> keepalive;
  ASSIGN_OR_RETURN(Draft draft,
                   FallbackDraft(ctx, nullptr, *planner.templates(), options.search, &keepalive));
  LayerHolders layer_holders(ctx);
  ASSIGN_OR_RETURN(Candidate c, Finalize(ctx, layer_holders, std::move(draft)));
  ClusterPlan plan;
  std::vector<LayerCopy> copies;
  Materialize(ctx, c, std::vector<std::string>(model.num_types()), &plan, &copies);
  RETURN_IF_ERROR(CheckPlanTimes(plan));
  return plan;
}

}  // namespace oobleck
