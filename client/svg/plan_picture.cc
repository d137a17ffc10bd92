#include "client/svg/plan_picture.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/output.h"
#include "client/svg/canvas.h"

namespace oobleck::client::svg {
namespace {

constexpr double kRowLabelWidth = 190;
constexpr double kGpuWidth = 46;  // width of one GPU's share of a node box
constexpr double kMinNodeWidth = 104;
constexpr double kNodeGap = 8;
constexpr double kNodeHeight = 50;
constexpr double kRowHeight = kNodeHeight + 14;
constexpr char kFailedColour[] = "#B2182B";
constexpr char kJoinedColour[] = "#1A9850";
// Copy arrows, one colour each in turn so crossing arrows can be told apart.
constexpr const char* kCopyColours[] = {"#B2182B", "#2C5AA0", "#6A3D9A",
                                        "#1B7837", "#B35806", "#4D4D4D"};

struct Box {
  double x = 0, y = 0, w = 0, h = 0;
};

// What a plan picture marks on its nodes.
struct NodeMarks {
  std::set<std::string> failed;
  std::set<std::string> joined;
  std::set<std::string> alone;   // never aggregated into a shared row (copy endpoints)
  std::set<int> kept_pipelines;  // pipelines unchanged by a replan
};

// Node ids of a pipeline row: one pipeline, or several identical ones.
struct PipelineRow {
  std::vector<int> pipelines;  // indices into ClusterPlan.pipelines
};

struct Panel {
  Canvas canvas;
  std::map<std::string, Box> node_boxes;  // in the panel's coordinates
  std::vector<PipelineRow> rows;
};

// Node type name -> (GPU type, GPUs per node) of a request's cluster.
struct ClusterTypes {
  std::map<std::string, std::string> gpu_type_of;
  std::map<std::string, int> gpus_of;

  explicit ClusterTypes(const pb::PlanRequest& request)
      : gpu_type_of(GpuTypesOf(request.cluster())) {
    for (const pb::NodeType& t : request.cluster().node_types())
      gpus_of[t.name()] = t.gpus_per_node();
  }
  const std::string& Gpu(const std::string& node_type) const {
    auto it = gpu_type_of.find(node_type);
    return it == gpu_type_of.end() ? node_type : it->second;
  }
  int Gpus(const std::string& node_type) const {
    auto it = gpus_of.find(node_type);
    return it == gpus_of.end() ? 1 : std::max(1, it->second);
  }
};

std::string Ms(double ms) { return absl::StrFormat("%.2f ms", ms); }

// Everything drawn of a template: node types in order and the stages.
std::string TemplateKey(const pb::PipelineTemplate& tmpl) {
  std::string key;
  for (const std::string& t : tmpl.node_order()) absl::StrAppend(&key, t, ",");
  for (const pb::Stage& s : tmpl.stages()) {
    absl::StrAppend(&key, "|", s.layer_begin(), ",", s.layer_end(), ",", s.node_index(), ",",
                    s.gpus());
  }
  return key;
}

// Two pipelines share a row when everything drawn for them but the node ids is equal.
std::string RowKey(const pb::PlannedPipeline& p) {
  return absl::StrCat(p.microbatches(), "|", absl::StrFormat("%.6f", p.time_ms()), "|",
                      TemplateKey(p.template_()));
}

std::vector<PipelineRow> GroupPipelines(const pb::ClusterPlan& plan, const NodeMarks& marks,
                                        int aggregate_above) {
  std::vector<PipelineRow> rows;
  std::map<std::string, size_t> row_of_key;
  const bool aggregate = plan.pipelines_size() > aggregate_above;
  for (int i = 0; i < plan.pipelines_size(); ++i) {
    const pb::PlannedPipeline& p = plan.pipelines(i);
    bool alone = !aggregate;
    for (const std::string& id : p.node_ids()) {
      alone = alone || marks.failed.count(id) || marks.joined.count(id) || marks.alone.count(id);
    }
    if (!alone) {
      // Kept and re-formed pipelines do not share a row.
      const bool kept = marks.kept_pipelines.count(i) > 0;
      auto [it, inserted] = row_of_key.emplace(RowKey(p) + (kept ? "|kept" : ""), rows.size());
      if (!inserted) {
        rows[it->second].pipelines.push_back(i);
        continue;
      }
    }
    rows.push_back({{i}});
  }
  return rows;
}

ShapeStyle NodeOutline(const std::string& id, const NodeMarks& marks) {
  if (marks.failed.count(id))
    return {.fill = "#FDE0DD", .stroke = kFailedColour, .stroke_px = 2.5, .dash = "5 3"};
  if (marks.joined.count(id)) return {.fill = "#E5F5E0", .stroke = kJoinedColour, .stroke_px = 2.5};
  return {.fill = "#FAFAFA", .stroke = "#888", .stroke_px = 1};
}

// A small tag ("failed", "joined") at the top right of a node box.
void Tag(Canvas& c, const Box& b, const std::string& id, const NodeMarks& marks) {
  if (marks.failed.count(id)) {
    c.Text(b.x + b.w - 3, b.y + 11, "FAILED",
           {.font_px = 9, .anchor = "end", .fill = kFailedColour, .bold = true});
  } else if (marks.joined.count(id)) {
    c.Text(b.x + b.w - 3, b.y + 11, "JOINED",
           {.font_px = 9, .anchor = "end", .fill = kJoinedColour, .bold = true});
  }
}

double NodeWidth(int gpus) { return std::max(kMinNodeWidth, gpus * kGpuWidth); }

void DrawIdleNodes(Canvas& c, double& y, const pb::ClusterPlan& plan, const ClusterTypes& types,
                   const NodeMarks& marks, TypeColours& colours, const PlanPictureOptions& options,
                   std::map<std::string, Box>& boxes, double width) {
  if (plan.idle_nodes().empty()) return;
  c.Text(0, y + 14, absl::StrCat("idle nodes (", plan.idle_nodes_size(), ")"),
         {.font_px = 12, .bold = true});
  y += 22;
  // Each (type, reason) once, with its nodes.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> groups;
  for (const pb::IdleNode& n : plan.idle_nodes())
    groups[{n.node_type(), n.reason()}].push_back(n.node_id());
  const bool one_box_each = plan.idle_nodes_size() <= options.max_idle_boxes;
  struct IdleBox {
    std::string label, title, id, type;
  };
  std::vector<IdleBox> items;
  for (const pb::IdleNode& n : plan.idle_nodes()) {
    const bool marked = marks.failed.count(n.node_id()) || marks.joined.count(n.node_id());
    if (one_box_each || marked) {
      items.push_back({n.node_id(),
                       absl::StrCat(n.node_id(), " (", n.node_type(), "): ", n.reason()),
                       n.node_id(), n.node_type()});
    }
  }
  if (!one_box_each) {
    for (const auto& [key, ids] : groups) {
      items.push_back({absl::StrCat(ids.size(), " x ", key.first),
                       absl::StrCat(key.first, " (", key.second, "): ", absl::StrJoin(ids, ", ")),
                       "", key.first});
    }
  }
  constexpr double kW = 120, kH = 24;
  double x = 0;
  for (const IdleBox& item : items) {
    if (x + kW > std::max(width, kW)) {
      x = 0;
      y += kH + 6;
    }
    const Box b{x, y, kW, kH};
    c.Rect(b.x, b.y, b.w, b.h, NodeOutline(item.id, marks), item.title, 3);
    c.Rect(b.x + 1, b.y + 1, 6, b.h - 2, {.fill = colours.Of(types.Gpu(item.type))});
    c.Text(b.x + 11, b.y + 16, Abbreviate(item.label, 15), {.font_px = 10.5}, item.title);
    if (!item.id.empty()) {
      boxes[item.id] = b;
      Tag(c, {b.x, b.y - 6, b.w, b.h}, item.id, marks);
    }
    x += kW + 6;
  }
  y += kH + 8;
  for (const auto& [key, ids] : groups) {
    c.Text(0, y + 11, Abbreviate(absl::StrCat(ids.size(), " x ", key.first, ": ", key.second), 140),
           {.font_px = 10.5, .fill = "#555"},
           absl::StrCat(key.second, " (", absl::StrJoin(ids, ", "), ")"));
    y += 15;
  }
}

// The label lines left of a row: its name, M and time, and its mix (or its nodes' ids).
void DrawRowLabel(Canvas& c, double y, const pb::ClusterPlan& plan, const PipelineRow& row,
                  const NodeMarks& marks, const ClusterTypes& types) {
  const pb::PlannedPipeline& p = plan.pipelines(row.pipelines[0]);
  const pb::PipelineTemplate& tmpl = p.template_();
  const int count = static_cast<int>(row.pipelines.size());
  std::string name = count == 1 ? absl::StrCat("pipeline ", row.pipelines[0])
                                : absl::StrCat(count, " x pipeline ", row.pipelines[0]);
  if (marks.kept_pipelines.count(row.pipelines[0])) absl::StrAppend(&name, " (kept)");
  std::vector<std::string> row_ids;
  for (int i : row.pipelines) {
    row_ids.push_back(absl::StrJoin(plan.pipelines(i).node_ids(), ","));
  }
  const std::string row_title =
      absl::StrCat(count == 1 ? "pipeline " : "identical pipelines ",
                   absl::StrJoin(row.pipelines, ", "), " on nodes ", absl::StrJoin(row_ids, "; "));
  c.Text(0, y + 20, name, {.font_px = 12, .bold = true}, row_title);
  c.Text(0, y + 36, absl::StrFormat("M = %d, %s", p.microbatches(), Ms(p.time_ms())),
         {.font_px = 11, .fill = "#444"});
  const std::string mix =
      MarkDerivedTypes(tmpl.mix_label(), DerivedNodeTypes(tmpl, types.gpu_type_of));
  const std::string third_line =
      count > 1 ? absl::StrCat("nodes ", absl::StrJoin(row_ids, "; ")) : mix;
  c.Text(0, y + 50, Abbreviate(third_line, 29), {.font_px = 10, .fill = "#777"},
         count > 1 ? row_title : mix);
}

// The stages of `tmpl` on its node k (`where`: the node's id, or its type for a shared
// row), left to right in GPU order inside `box`.
void DrawStages(Canvas& c, const Box& box, const pb::PipelineTemplate& tmpl, int k, int gpus,
                const std::string& where, const ClusterTypes& types, TypeColours& colours) {
  double gx = box.x + 3;
  const double slot = (box.w - 6) / gpus;
  for (const pb::Stage& s : tmpl.stages()) {
    if (s.node_index() != k) continue;
    const double w = slot * s.gpus();
    const std::string gpu = types.Gpu(s.node_type());
    const std::string stage_title = absl::StrFormat(
        "layers [%d, %d) on %d GPU(s) of %s (%s): forward %.2f ms, backward %.2f ms, "
        "%.2f GiB per GPU",
        s.layer_begin(), s.layer_end(), s.gpus(), where, gpu, s.forward_ms(), s.backward_ms(),
        s.memory_bytes_per_gpu() / (1024.0 * 1024.0 * 1024.0));
    c.Rect(gx + 1, box.y + 16, w - 2, kNodeHeight - 20, {.fill = colours.Of(gpu)}, stage_title, 2);
    const std::string range = absl::StrFormat("[%d,%d)", s.layer_begin(), s.layer_end());
    const std::string gpus_label = absl::StrCat(s.gpus(), "g");
    if (TextWidth(range, 10.5) <= w - 4) {
      c.Text(gx + w / 2, box.y + 29, range,
             {.font_px = 10.5, .anchor = "middle", .fill = "#fff", .bold = true}, stage_title);
      c.Text(gx + w / 2, box.y + 42, gpus_label,
             {.font_px = 10, .anchor = "middle", .fill = "#fff"});
    } else {
      c.Text(gx + w / 2, box.y + 36, range, {.font_px = 8, .anchor = "middle", .fill = "#fff"},
             stage_title);
    }
    gx += w;
  }
}

// Position k of a row's pipelines at (x, y + 4): its box, heading and stages. Returns the box.
Box DrawNode(Panel& panel, double x, double y, const pb::ClusterPlan& plan, const PipelineRow& row,
             int k, const NodeMarks& marks, const ClusterTypes& types, TypeColours& colours) {
  Canvas& c = panel.canvas;
  const pb::PlannedPipeline& p = plan.pipelines(row.pipelines[0]);
  const pb::PipelineTemplate& tmpl = p.template_();
  const int count = static_cast<int>(row.pipelines.size());
  const std::string& node_type = tmpl.node_order(k);
  const int gpus = types.Gpus(node_type);
  const Box box{x, y + 4, NodeWidth(gpus), kNodeHeight};
  const std::string id = k < p.node_ids_size() ? p.node_ids(k) : "";
  std::vector<std::string> position_ids;
  for (int i : row.pipelines) {
    if (k < plan.pipelines(i).node_ids_size())
      position_ids.push_back(plan.pipelines(i).node_ids(k));
  }
  const std::string box_title =
      count == 1 ? absl::StrCat(id, " (", node_type, ", ", gpus, " GPUs)")
                 : absl::StrCat("position ", k, " (", node_type, ") of ", count,
                                " pipelines: ", absl::StrJoin(position_ids, ", "));
  c.Rect(box.x, box.y, box.w, box.h, NodeOutline(count == 1 ? id : "", marks), box_title, 4);
  const std::string head = count == 1 ? id : absl::StrCat(count, " x ", node_type);
  c.Text(box.x + 4, box.y + 11, Abbreviate(head, static_cast<size_t>((box.w - 8) / 6.2)),
         {.font_px = 10, .fill = "#333"}, box_title);
  if (count == 1) {
    panel.node_boxes[id] = box;
    Tag(c, box, id, marks);
  }
  DrawStages(c, box, tmpl, k, gpus, count == 1 ? id : node_type, types, colours);
  return box;
}

Panel DrawPanel(const pb::PlanRequest& request, const pb::ClusterPlan& plan, const NodeMarks& marks,
                TypeColours& colours, const PlanPictureOptions& options) {
  Panel panel;
  const ClusterTypes types(request);
  panel.rows = GroupPipelines(plan, marks, options.aggregate_above);
  double y = 0;
  double width = 0;
  for (const PipelineRow& row : panel.rows) {
    DrawRowLabel(panel.canvas, y, plan, row, marks, types);
    const pb::PipelineTemplate& tmpl = plan.pipelines(row.pipelines[0]).template_();
    double x = kRowLabelWidth;
    for (int k = 0; k < tmpl.node_order_size(); ++k) {
      x += DrawNode(panel, x, y, plan, row, k, marks, types, colours).w + kNodeGap;
    }
    width = std::max(width, x);
    y += kRowHeight + (row.pipelines.size() > 1 ? 4 : 0);
  }
  DrawIdleNodes(panel.canvas, y, plan, types, marks, colours, options, panel.node_boxes,
                std::max(width, 500.0));
  return panel;
}

void Legend(Canvas& c, double y, TypeColours& colours, const std::set<std::string>& derived_gpus) {
  double x = 0;
  for (const std::string& gpu : colours.Types()) {
    const std::string label = derived_gpus.count(gpu) ? absl::StrCat(gpu, " (derived)") : gpu;
    c.Rect(x, y, 14, 14, {.fill = colours.Of(gpu)}, "", 2);
    c.Text(x + 19, y + 11.5, label, {.font_px = 11.5});
    x += 19 + TextWidth(label, 11.5) + 18;
  }
  c.Text(x, y + 11.5, "block = a stage: [first layer, end layer) and its GPUs",
         {.font_px = 11, .fill = "#555"});
}

// "3 x 22 + 21" micro-batches of every pipeline, largest share first.
std::string BatchSplit(const pb::ClusterPlan& plan) {
  std::map<int, int, std::greater<int>> count_of_share;
  for (const pb::PlannedPipeline& p : plan.pipelines()) ++count_of_share[p.microbatches()];
  std::vector<std::string> parts;
  for (const auto& [share, count] : count_of_share) {
    parts.push_back(count == 1 ? absl::StrCat(share) : absl::StrCat(count, " x ", share));
  }
  return absl::StrJoin(parts, " + ");
}

std::set<std::string> NodeIds(const pb::PlanRequest& request) {
  std::set<std::string> ids;
  for (const pb::Node& n : request.nodes()) ids.insert(n.id());
  return ids;
}

std::set<std::string> AllDerived(const pb::PlanResponse& response) {
  return {response.derived_gpu_types().begin(), response.derived_gpu_types().end()};
}

std::set<std::string> DerivedGpus(const pb::ClusterPlan& plan) {
  std::set<std::string> out;
  for (const pb::PlannedPipeline& p : plan.pipelines()) {
    out.insert(p.template_().derived_gpu_types().begin(), p.template_().derived_gpu_types().end());
  }
  return out;
}

// ReplanResponse.downtime_s comes with downtime-aware replanning (issue 11); read by name
// so this picture shows it from servers that report it and says so from those that do not.
std::string Downtime(const pb::ReplanResponse& response) {
  const google::protobuf::FieldDescriptor* field =
      response.GetDescriptor()->FindFieldByName("downtime_s");
  if (field == nullptr || field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE) {
    return "downtime: not reported by this planner";
  }
  return absl::StrFormat("downtime %.2f s", response.GetReflection()->GetDouble(response, field));
}

// What a replan picture marks: before, the failed nodes and the copies' senders; after, the
// joined nodes, the copies' receivers and the kept pipelines.
struct ReplanMarks {
  NodeMarks old_marks, new_marks;
};
ReplanMarks MarkReplan(const std::set<std::string>& before, const std::set<std::string>& after,
                       const pb::ClusterPlan& old_plan, const pb::ReplanResponse& response) {
  const pb::ClusterPlan& plan = response.plan();
  ReplanMarks marks;
  for (const std::string& id : before) {
    if (!after.count(id)) marks.old_marks.failed.insert(id);
  }
  for (const std::string& id : after) {
    if (!before.count(id)) marks.new_marks.joined.insert(id);
  }
  for (const pb::LayerCopy& copy : response.copies()) {
    marks.old_marks.alone.insert(copy.source_node_id());
    marks.new_marks.alone.insert(copy.dest_node_id());
  }
  // Kept: the same nodes running the same template as before (its share may change).
  std::map<std::string, std::string> old_template_of_nodes;
  for (const pb::PlannedPipeline& p : old_plan.pipelines()) {
    old_template_of_nodes[absl::StrJoin(p.node_ids(), ",")] = TemplateKey(p.template_());
  }
  for (int i = 0; i < plan.pipelines_size(); ++i) {
    const pb::PlannedPipeline& p = plan.pipelines(i);
    auto it = old_template_of_nodes.find(absl::StrJoin(p.node_ids(), ","));
    if (it != old_template_of_nodes.end() && it->second == TemplateKey(p.template_())) {
      marks.new_marks.kept_pipelines.insert(i);
    }
  }
  return marks;
}

// The replan's title, its iteration time and copy lines, the nodes that failed or joined,
// and the legend.
void DrawReplanHeader(Canvas& doc, const pb::ReplanResponse& response, const ReplanMarks& marks,
                      TypeColours& colours) {
  const pb::ClusterPlan& plan = response.plan();
  const double change =
      response.old_iteration_time_ms() > 0
          ? 100.0 * (plan.iteration_time_ms() / response.old_iteration_time_ms() - 1)
          : 0;
  doc.Text(0, 16,
           absl::StrFormat("Replan (%s): %d failed, %d joined; %d pipelines kept",
                           response.strategy(), marks.old_marks.failed.size(),
                           marks.new_marks.joined.size(), response.pipelines_kept()),
           {.font_px = 17, .bold = true});
  doc.Text(0, 36,
           absl::StrFormat(
               "iteration %s before -> %s after (%+.1f%%); %d copies, %s before training "
               "resumes; %s",
               Ms(response.old_iteration_time_ms()), Ms(plan.iteration_time_ms()), change,
               response.copies_size(), FormatBytes(response.copy_bytes()), Downtime(response)),
           {.font_px = 12});
  std::vector<std::string> events;
  if (!marks.old_marks.failed.empty())
    events.push_back(absl::StrCat("failed: ", absl::StrJoin(marks.old_marks.failed, ", ")));
  if (!marks.new_marks.joined.empty())
    events.push_back(absl::StrCat("joined: ", absl::StrJoin(marks.new_marks.joined, ", ")));
  const std::string event_line = absl::StrJoin(events, "; ");
  doc.Text(0, 54, Abbreviate(event_line.empty() ? "no node failed or joined" : event_line, 170),
           {.font_px = 12, .fill = kFailedColour}, event_line);
  Legend(doc, 66, colours, DerivedGpus(plan));
}

// The gap between the panels: wide enough for the copy labels (abbreviated to 44
// characters).
double GutterWidth(const pb::ReplanResponse& response) {
  double gutter = 190;
  for (const pb::LayerCopy& copy : response.copies()) {
    const std::string route =
        Abbreviate(absl::StrCat(copy.source_node_id(), " -> ", copy.dest_node_id()), 44);
    gutter = std::max(gutter, TextWidth(route, 9.5) + 40);
  }
  return gutter;
}

// A copy's arrow from the sender (before) to the receiver (after), in the document's
// coordinates, with its label's height in the gutter.
struct Arrow {
  double from_x, from_y, to_x, to_y, label_y;
  std::string label, route, title, colour;
};

// The arrows of the copies whose nodes both panels drew, their labels in order of height
// at least a line apart.
std::vector<Arrow> CopyArrows(const pb::ReplanResponse& response, const Panel& left,
                              const Panel& right, double panel_top, double right_x) {
  std::vector<Arrow> arrows;
  for (const pb::LayerCopy& copy : response.copies()) {
    auto from = left.node_boxes.find(copy.source_node_id());
    auto to = right.node_boxes.find(copy.dest_node_id());
    if (from == left.node_boxes.end() || to == right.node_boxes.end()) continue;
    const Box& a = from->second;
    const Box& b = to->second;
    const int k = static_cast<int>(arrows.size());
    Arrow arrow;
    arrow.from_x = a.x + a.w / 2 + (k % 5 - 2) * 6;
    arrow.from_y = panel_top + a.y + a.h;
    arrow.to_x = right_x + b.x + b.w / 2 + (k % 5 - 2) * 6;
    arrow.to_y = panel_top + b.y;
    arrow.label_y = (arrow.from_y + arrow.to_y) / 2;
    arrow.label = absl::StrFormat("[%d,%d) %s", copy.layer_begin(), copy.layer_end(),
                                  FormatBytes(copy.param_bytes()));
    arrow.colour = kCopyColours[k % std::size(kCopyColours)];
    arrow.route = absl::StrCat(copy.source_node_id(), " \u2192 ", copy.dest_node_id());
    arrow.title = absl::StrFormat("%s sends layers [%d, %d) (%s) to %s", copy.source_node_id(),
                                  copy.layer_begin(), copy.layer_end(),
                                  FormatBytes(copy.param_bytes()), copy.dest_node_id());
    arrows.push_back(std::move(arrow));
  }
  std::vector<Arrow*> by_height;
  for (Arrow& arrow : arrows) by_height.push_back(&arrow);
  std::stable_sort(by_height.begin(), by_height.end(),
                   [](const Arrow* x, const Arrow* y) { return x->label_y < y->label_y; });
  constexpr double kLabelPitch = 30;
  for (size_t i = 1; i < by_height.size(); ++i) {
    by_height[i]->label_y =
        std::max(by_height[i]->label_y, by_height[i - 1]->label_y + kLabelPitch);
  }
  return arrows;
}

// Each arrow leaves the sender along the gap under its row, crosses the gutter (from
// gutter_in to gutter_out, its label centred at gutter_x), and enters the receiver from the
// gap above its row, so it never runs over a stage. Labels only when `labelled`.
void DrawArrows(Canvas& doc, const std::vector<Arrow>& arrows, double gutter_in, double gutter_x,
                double gutter_out, bool labelled) {
  for (const Arrow& arrow : arrows) {
    const double under = arrow.from_y + 5;  // the gap under the sender's row
    const double over = arrow.to_y - 5;     // the gap over the receiver's row
    doc.Path(absl::StrFormat("M%.1f,%.1f L%.1f,%.1f L%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f "
                             "C%.1f,%.1f %.1f,%.1f %.1f,%.1f L%.1f,%.1f L%.1f,%.1f",
                             arrow.from_x, arrow.from_y - 4, arrow.from_x, under, gutter_in, under,
                             gutter_x - 20, under, gutter_x - 40, arrow.label_y, gutter_x,
                             arrow.label_y, gutter_x + 40, arrow.label_y, gutter_x + 20, over,
                             gutter_out, over, arrow.to_x, over, arrow.to_x, arrow.to_y + 2),
             {.stroke = arrow.colour, .stroke_px = 1.6, .opacity = 0.8}, true, arrow.title);
    doc.Rect(arrow.from_x - 3, arrow.from_y - 7, 6, 6, {.fill = arrow.colour}, arrow.title, 3);
  }
  if (!labelled) return;
  for (const Arrow& arrow : arrows) {
    const double w = std::max(TextWidth(arrow.label, 10.5), TextWidth(arrow.route, 9.5)) + 8;
    doc.Rect(gutter_x - w / 2, arrow.label_y - 8, w, 27,
             {.fill = "#ffffff", .stroke = arrow.colour, .stroke_px = 0.8}, arrow.title, 3);
    doc.Text(gutter_x, arrow.label_y + 3.5, arrow.label,
             {.font_px = 10.5, .anchor = "middle", .fill = arrow.colour, .bold = true},
             arrow.title);
    doc.Text(gutter_x, arrow.label_y + 15, Abbreviate(arrow.route, 44),
             {.font_px = 9.5, .anchor = "middle", .fill = "#555"}, arrow.title);
  }
}

// The copy plan as text from y down (arrows of a large replan are many).
void ListCopies(Canvas& doc, double y, const pb::ReplanResponse& response,
                const PlanPictureOptions& options) {
  if (response.copies_size() == 0) return;
  doc.Text(0, y,
           absl::StrCat("copies before training resumes (", response.copies_size(), ", ",
                        FormatBytes(response.copy_bytes()), "):"),
           {.font_px = 12, .bold = true});
  y += 16;
  int listed = 0;
  for (const pb::LayerCopy& copy : response.copies()) {
    if (listed++ == options.max_copies_listed) {
      doc.Text(12, y,
               absl::StrCat("... and ", response.copies_size() - options.max_copies_listed,
                            " more (every arrow's tooltip names its copy)"),
               {.font_px = 11, .fill = "#555"});
      y += 15;
      break;
    }
    doc.Text(
        12, y,
        absl::StrFormat("%s <- %s: layers [%d,%d), %s", copy.dest_node_id(), copy.source_node_id(),
                        copy.layer_begin(), copy.layer_end(), FormatBytes(copy.param_bytes())),
        {.font_px = 11, .monospace = true});
    y += 15;
  }
}

}  // namespace

std::string DrawPlanSvg(const pb::PlanResponse& response, const PlanPictureOptions& options) {
  const pb::ClusterPlan& plan = response.plan();
  const pb::PlanRequest& request = response.request();
  TypeColours colours;
  for (const pb::NodeType& t : request.cluster().node_types()) colours.Of(GpuTypeOf(t));
  Canvas doc;
  doc.Text(0, 16,
           absl::StrFormat("%s on %d nodes: %d pipelines, global batch %d micro-batches",
                           request.model(), request.nodes_size(), plan.pipelines_size(),
                           plan.global_batch()),
           {.font_px = 17, .bold = true});
  std::string line =
      absl::StrFormat("iteration %s = slowest pipeline %s + all-reduce %s; cost model %s",
                      Ms(plan.iteration_time_ms()), Ms(plan.pipeline_time_ms()),
                      Ms(plan.allreduce_ms()), response.cost_model());
  if (!response.sweep().empty() && response.sweep(0).data_parallel_iteration_time_ms() > 0) {
    absl::StrAppendFormat(&line, "; data parallel %s (speed-up %.2fx)",
                          Ms(response.sweep(0).data_parallel_iteration_time_ms()),
                          response.sweep(0).speedup());
  }
  doc.Text(0, 36, line, {.font_px = 12});
  doc.Text(0, 54, absl::StrCat("batch split (micro-batches per pipeline): ", BatchSplit(plan)),
           {.font_px = 12});
  Panel panel = DrawPanel(request, plan, NodeMarks(), colours, options);
  Legend(doc, 66, colours, AllDerived(response));
  doc.Embed(panel.canvas, 0, 92);
  return doc.Document(absl::StrCat("oobleck-planner plan: ", request.model(), " on ",
                                   request.nodes_size(), " nodes"));
}

std::string DrawReplanSvg(const pb::PlanRequest& old_request, const pb::ClusterPlan& old_plan,
                          const pb::ReplanResponse& response, const PlanPictureOptions& options) {
  const pb::ClusterPlan& plan = response.plan();
  const std::set<std::string> before = NodeIds(old_request);
  const std::set<std::string> after = NodeIds(response.request());
  const ReplanMarks marks = MarkReplan(before, after, old_plan, response);

  TypeColours colours;
  for (const pb::NodeType& t : old_request.cluster().node_types()) colours.Of(GpuTypeOf(t));
  for (const pb::NodeType& t : response.request().cluster().node_types()) colours.Of(GpuTypeOf(t));
  Panel left = DrawPanel(old_request, old_plan, marks.old_marks, colours, options);
  Panel right = DrawPanel(response.request(), plan, marks.new_marks, colours, options);

  Canvas doc;
  DrawReplanHeader(doc, response, marks, colours);
  const double panel_top = 122;
  const double gutter = GutterWidth(response);
  const double right_x = left.canvas.width() + gutter;
  doc.Text(
      0, panel_top - 12,
      absl::StrFormat("before: %d pipelines on %d nodes, iteration %s", old_plan.pipelines_size(),
                      before.size(), Ms(response.old_iteration_time_ms())),
      {.font_px = 13, .bold = true});
  doc.Text(right_x, panel_top - 12,
           absl::StrFormat("after: %d pipelines on %d nodes, iteration %s", plan.pipelines_size(),
                           after.size(), Ms(plan.iteration_time_ms())),
           {.font_px = 13, .bold = true});
  doc.Embed(left.canvas, 0, panel_top);
  doc.Embed(right.canvas, right_x, panel_top);
  const double divider_x = left.canvas.width() + gutter / 2;
  doc.Line(divider_x, panel_top - 26, divider_x,
           panel_top + std::max(left.canvas.height(), right.canvas.height()),
           {.stroke = "#CCC", .dash = "2 4"});

  DrawArrows(doc, CopyArrows(response, left, right, panel_top, right_x), left.canvas.width() + 8,
             left.canvas.width() + gutter / 2, right_x - 8, response.copies_size() <= 30);
  ListCopies(doc, panel_top + std::max(left.canvas.height(), right.canvas.height()) + 24, response,
             options);
  return doc.Document(absl::StrCat("oobleck-planner replan (", response.strategy(), ")"));
}

}  // namespace oobleck::client::svg
