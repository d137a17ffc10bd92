#include "client/svg/schedule_picture.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/output.h"
#include "client/svg/canvas.h"

namespace oobleck::client::svg {
namespace {

constexpr double kLabelWidth = 250;
constexpr double kTimeWidth = 900;
constexpr double kRowHeight = 18;
constexpr double kRowGap = 4;
// Passes (blocks) one schedule may draw (a larger M is drawn for its first micro-batches),
// and all schedules of a picture together, so a picture of any answer stays small.
constexpr int kMaxPasses = 10000;
constexpr int kMaxPicturePasses = 40000;

const std::string& GpuTypeOf(const ScheduleOptions& options, const std::string& node_type) {
  auto it = options.gpu_type_of.find(node_type);
  return it == options.gpu_type_of.end() ? node_type : it->second;
}

// A row per stage, from `top`: its label (and p2p time) and the empty lane.
void DrawStageRows(Canvas& c, const pb::PipelineTemplate& tmpl, const std::vector<double>& transfer,
                   double top) {
  const int stages = tmpl.stages_size();
  for (int s = 0; s < stages; ++s) {
    const pb::Stage& stage = tmpl.stages(s);
    const double y = top + s * (kRowHeight + kRowGap);
    std::string label = absl::StrFormat("s%d %s", s, FormatStage(stage));
    if (s + 1 < stages && transfer[s] > 0)
      absl::StrAppendFormat(&label, "  p2p %.1f ms", transfer[s]);
    c.Text(0, y + kRowHeight * 0.72, label, {.font_px = 10.5, .monospace = true},
           absl::StrFormat("stage %d: layers [%d, %d) on pipeline node %d (%s), %d GPU(s); "
                           "forward %.2f ms, backward %.2f ms, stage cost %.2f ms",
                           s, stage.layer_begin(), stage.layer_end(), stage.node_index(),
                           stage.node_type(), stage.gpus(), stage.forward_ms(), stage.backward_ms(),
                           stage.cost_ms()));
    c.Rect(kLabelWidth, y, kTimeWidth, kRowHeight, {.fill = "#F4F4F4"});
  }
}

// Every pass as a block in its stage's lane, numbered when the number fits.
void DrawPasses(Canvas& c, const pb::PipelineTemplate& tmpl,
                const std::vector<ScheduledPass>& passes, const ScheduleOptions& options,
                TypeColours& colours, double top, double px_per_ms) {
  for (const ScheduledPass& p : passes) {
    const pb::Stage& stage = tmpl.stages(p.stage);
    const std::string& gpu = GpuTypeOf(options, stage.node_type());
    const double x = kLabelWidth + p.start_ms * px_per_ms;
    const double w = std::max((p.end_ms - p.start_ms) * px_per_ms, 0.5);
    const double y = top + p.stage * (kRowHeight + kRowGap);
    c.Rect(x, y, w, kRowHeight,
           {.fill = p.backward ? colours.Of(gpu) : colours.LightOf(gpu),
            .stroke = "#ffffff",
            .stroke_px = w > 3 ? 0.6 : 0},
           absl::StrFormat("stage %d, micro-batch %d, %s: %.2f .. %.2f ms", p.stage, p.microbatch,
                           p.backward ? "backward" : "forward", p.start_ms, p.end_ms));
    const std::string number = absl::StrCat(p.microbatch);
    if (w >= TextWidth(number, 9) + 3) {
      c.Text(x + w / 2, y + kRowHeight * 0.7, number,
             {.font_px = 9, .anchor = "middle", .fill = p.backward ? "#ffffff" : "#222"});
    }
  }
}

// Time axis along `bottom` with 1-2-5 steps, about eight ticks.
void DrawTimeAxis(Canvas& c, double axis_ms, double px_per_ms, double bottom) {
  const double raw_step = axis_ms / 8;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw_step)));
  double step = magnitude;
  for (double f : {1.0, 2.0, 5.0, 10.0}) {
    if (f * magnitude >= raw_step) {
      step = f * magnitude;
      break;
    }
  }
  c.Line(kLabelWidth, bottom, kLabelWidth + kTimeWidth, bottom, {.stroke = "#666"});
  // Counted, not summed: an infinite or NaN time from a hand-edited answer draws no ticks
  // instead of looping.
  for (int i = 0; i <= 20 && std::isfinite(step) && step > 0; ++i) {
    const double t = i * step;
    if (t > axis_ms * (1 + 1e-9)) break;
    const double x = kLabelWidth + t * px_per_ms;
    c.Line(x, bottom, x, bottom + 4, {.stroke = "#666"});
    c.Text(x, bottom + 15, absl::StrFormat("%g", t), {.font_px = 10, .anchor = "middle"});
  }
  c.Text(kLabelWidth + kTimeWidth, bottom + 28, "time (ms)",
         {.font_px = 10, .anchor = "end", .fill = "#444"});
}

// One template's schedule: a header line, a row per stage, a time axis.
Canvas DrawSchedule(const pb::MixTemplate& result, const std::string& cost_model, int microbatches,
                    const std::string& microbatches_source, const ScheduleOptions& options,
                    int max_passes, TypeColours& colours, int* passes_drawn) {
  const pb::PipelineTemplate& tmpl = result.template_();
  const int stages = tmpl.stages_size();
  const std::vector<double> transfer = TransferMs(tmpl);
  const int drawn_microbatches =
      std::min(microbatches, std::max(1, max_passes / (2 * std::max(stages, 1))));
  const bool all_drawn = drawn_microbatches == microbatches;
  const std::vector<ScheduledPass> passes = Schedule1F1B(tmpl, transfer, drawn_microbatches);
  *passes_drawn = static_cast<int>(passes.size());
  double makespan_ms = 0;
  for (const ScheduledPass& p : passes) makespan_ms = std::max(makespan_ms, p.end_ms);
  const double model_ms = all_drawn ? tmpl.iteration_time_ms() : 0;
  const double axis_ms = std::max({makespan_ms, model_ms, 1e-9});
  const double px_per_ms = kTimeWidth / axis_ms;

  Canvas c;
  const std::set<std::string> derived = DerivedNodeTypes(tmpl, options.gpu_type_of);
  c.Text(0, 14,
         absl::StrFormat("%s: %d nodes, %d GPUs, %d stages",
                         MarkDerivedTypes(result.mix_label(), derived), tmpl.num_nodes(),
                         tmpl.num_gpus(), stages),
         {.font_px = 14, .bold = true});
  std::string line =
      absl::StrFormat("M = %d micro-batches (%s); cost model %s: T(M) = %.2f ms; ", microbatches,
                      microbatches_source, cost_model, tmpl.iteration_time_ms());
  if (all_drawn) {
    absl::StrAppendFormat(&line, "this 1F1B schedule ends at %.2f ms", makespan_ms);
  } else {
    absl::StrAppendFormat(&line, "drawn for the first %d micro-batches only", drawn_microbatches);
  }
  c.Text(0, 32, line, {.font_px = 11, .fill = "#444"});
  const double top = 44;
  DrawStageRows(c, tmpl, transfer, top);
  DrawPasses(c, tmpl, passes, options, colours, top, px_per_ms);
  const double bottom = top + stages * (kRowHeight + kRowGap);
  // The model's T(M): 1f1b charges transfers to stage costs, so it may end after the
  // simulated schedule.
  if (all_drawn) {
    const double model_x = kLabelWidth + model_ms * px_per_ms;
    c.Line(model_x, top - 4, model_x, bottom,
           {.stroke = "#B2182B", .stroke_px = 1.2, .dash = "4 3"});
    c.Text(model_x - 3, top - 6, "T(M)", {.font_px = 10, .anchor = "end", .fill = "#B2182B"});
  }
  DrawTimeAxis(c, axis_ms, px_per_ms, bottom);
  return c;
}

// OK when every feasible template carries the stage timing the schedule is drawn from.
absl::Status CheckStageTiming(const pb::PlanTemplatesResponse& response) {
  for (int i = 0; i < response.results_size(); ++i) {
    const pb::MixTemplate& r = response.results(i);
    if (!r.feasible() || r.template_().has_microbatches()) continue;
    return absl::FailedPreconditionError(absl::StrFormat(
        "results[%d].template (%s) has no microbatches and stages[].p2p_out_ms, which its "
        "schedule is drawn from: the answer comes from a server older than this client; ask "
        "for the templates again",
        i, r.mix_label()));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<double> TransferMs(const pb::PipelineTemplate& tmpl) {
  std::vector<double> x;
  x.reserve(tmpl.stages_size());
  for (const pb::Stage& s : tmpl.stages()) x.push_back(s.p2p_out_ms());
  return x;
}

std::vector<ScheduledPass> Schedule1F1B(const pb::PipelineTemplate& tmpl,
                                        const std::vector<double>& transfer_ms, int microbatches) {
  const int stages = tmpl.stages_size();
  const int m = std::max(microbatches, 0);
  if (stages == 0 || m == 0) return {};
  // Each stage's passes in 1F1B order: (micro-batch, backward?).
  std::vector<std::vector<std::pair<int, bool>>> order(stages);
  for (int s = 0; s < stages; ++s) {
    const int warmup = std::min(stages - 1 - s, m);
    for (int k = 0; k < warmup; ++k) order[s].push_back({k, false});
    for (int k = 0; k < m - warmup; ++k) {
      order[s].push_back({warmup + k, false});
      order[s].push_back({k, true});
    }
    for (int k = m - warmup; k < m; ++k) order[s].push_back({k, true});
  }
  constexpr double kNotYet = -1;
  std::vector<std::vector<double>> forward_end(stages, std::vector<double>(m, kNotYet));
  std::vector<std::vector<double>> backward_end(stages, std::vector<double>(m, kNotYet));
  std::vector<size_t> next(stages, 0);
  std::vector<double> free_at(stages, 0.0);
  std::vector<ScheduledPass> passes;
  passes.reserve(static_cast<size_t>(2) * stages * m);
  // Sweep the stages until every pass is placed; each sweep places at least one pass
  // (1F1B never deadlocks), so at most 2·S·M sweeps.
  while (passes.size() < static_cast<size_t>(2) * stages * m) {
    bool placed = false;
    for (int s = 0; s < stages; ++s) {
      while (next[s] < order[s].size()) {
        const auto [k, backward] = order[s][next[s]];
        double ready = 0;
        if (!backward) {
          if (s > 0) {
            if (forward_end[s - 1][k] == kNotYet) break;
            ready = forward_end[s - 1][k] + transfer_ms[s - 1];
          }
        } else if (s + 1 < stages) {
          if (backward_end[s + 1][k] == kNotYet) break;
          ready = backward_end[s + 1][k] + transfer_ms[s];
        } else {
          if (forward_end[s][k] == kNotYet) break;
          ready = forward_end[s][k];
        }
        const pb::Stage& stage = tmpl.stages(s);
        const double start = std::max(ready, free_at[s]);
        const double end = start + (backward ? stage.backward_ms() : stage.forward_ms());
        (backward ? backward_end : forward_end)[s][k] = end;
        free_at[s] = end;
        passes.push_back({s, k, backward, start, end});
        ++next[s];
        placed = true;
      }
    }
    if (!placed) break;  // cannot happen for the order above; never loop forever
  }
  return passes;
}

absl::StatusOr<std::string> DrawTemplatesSvg(const pb::PlanTemplatesResponse& response,
                                             const ScheduleOptions& options) {
  if (absl::Status timing = CheckStageTiming(response); !timing.ok()) return timing;
  TypeColours colours;
  for (const std::string& gpu : options.gpu_types) colours.Of(gpu);
  Canvas doc;
  int feasible = 0;
  for (const pb::MixTemplate& r : response.results()) feasible += r.feasible();
  doc.Text(0, 16,
           absl::StrFormat("Pipeline templates (cost model %s): %d %s, %d feasible",
                           response.cost_model(), response.results_size(),
                           response.results_size() == 1 ? "mix" : "mixes", feasible),
           {.font_px = 17, .bold = true});
  doc.Text(0, 36,
           "Each template's 1F1B schedule: light blocks are forward passes, dark blocks "
           "backward passes, numbered by micro-batch; white space is a bubble or a "
           "point-to-point transfer.",
           {.font_px = 11, .fill = "#444"});
  double y = 52;
  int drawn = 0;
  int passes_left = kMaxPicturePasses;
  std::set<std::string> derived_types;
  for (const pb::MixTemplate& result : response.results()) {
    if (!result.feasible()) {
      doc.Text(0, y + 12,
               absl::StrCat(result.mix_label(),
                            ": infeasible: ", Abbreviate(result.infeasible_reason(), 160)),
               {.font_px = 11, .fill = "#B2182B"}, result.infeasible_reason());
      y += 22;
      continue;
    }
    const pb::PipelineTemplate& tmpl = result.template_();
    const int fewest_passes = 2 * std::max(tmpl.stages_size(), 1);  // M = 1
    if (drawn == options.max_templates || passes_left < fewest_passes) continue;
    ++drawn;
    derived_types.insert(tmpl.derived_gpu_types().begin(), tmpl.derived_gpu_types().end());
    int m = options.microbatches;
    std::string source = "from the request";
    if (m <= 0) {
      m = tmpl.microbatches();
      source = "from the answer";
    }
    if (m <= 0) {
      m = 2 * tmpl.stages_size();
      source = "not known: drawn for 2 x stages";
    }
    int passes = 0;
    const Canvas panel = DrawSchedule(result, response.cost_model(), m, source, options,
                                      std::min(kMaxPasses, passes_left), colours, &passes);
    passes_left -= passes;
    doc.Embed(panel, 0, y + 10);
    y += 10 + panel.height() + 18;
  }
  if (feasible > drawn) {
    doc.Text(0, y + 12,
             absl::StrFormat("%d more feasible templates not drawn (at most %d templates and "
                             "%d passes per picture); plan fewer mixes to see them",
                             feasible - drawn, options.max_templates, kMaxPicturePasses),
             {.font_px = 12, .fill = "#B2182B"});
    y += 22;
  }
  if (!derived_types.empty()) {
    doc.Text(0, y + 12,
             absl::StrCat("* profile derived by relative speed, not measured: ",
                          absl::StrJoin(derived_types, ", ")),
             {.font_px = 11, .fill = "#444"});
  }
  return doc.Document(absl::StrCat("oobleck-planner templates (", response.cost_model(), ")"));
}

}  // namespace oobleck::client::svg
