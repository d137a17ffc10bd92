#include "core/plan_search/node_count_dp.h"

#include <algorithm>
#include <bit>
#include <limits>

#include "absl/strings/str_format.h"
#include "core/plan_search/dp_rows.h"
#include "core/status_macros.h"
#include "tbb/blocked_range.h"
#include "tbb/parallel_for.h"

namespace oobleck::plan_search {
namespace {

// Sums of absorbed micro-batches saturate here (far above any global batch).
constexpr int kSaturated = 1 << 29;
// The search keeps two tables (the current one and the best one's): at most 64 MiB each
// as int32. 128 nodes of 3 types with up to 128 pipelines need 10.7M entries.
constexpr int64_t kMaxTableEntries = int64_t{1} << 24;
// The int16 table holds sums up to this (with room for one addition before clamping).
constexpr int kMaxInt16Need = (1 << 14) - 1;
// One-block tables up to this many entries (1 MiB as int16).
constexpr int64_t kMaxOneBlockEntries = int64_t{1} << 19;
// Table fills below this many row-element updates stay on one thread.
constexpr int64_t kParallelWork = int64_t{1} << 24;
// Table work between two polls of the interrupt: about 0.2 ms in a release build, and
// still well under the 100 ms a cancelled search may run on in the sanitizer and
// fuzzing builds, which are 20-50x slower. (A poll reads the clock.)
constexpr int64_t kPollWork = int64_t{1} << 18;

// Padding per node type of the DP's state space, so that u - mix never leaves the array.
std::vector<int> DpPadding(const PipelineSetProblem& problem) {
  std::vector<int> pad(problem.available.size(), 1);  // at least one: idle steps go to u - e_t
  for (const PipelineShape& s : problem.Shapes()) {
    for (size_t t = 0; t < pad.size(); ++t)
      pad[t] = std::max(pad[t], std::min(s.mix[t], problem.available[t] + 1));
  }
  return pad;
}

// The number of (state, shape) pairs where the shape fits within the state, or -1 when
// fit lists do not pay: they do when they are small and leave out a good part of the
// pairs, in small clusters (warm replans) where most states are too small for most shapes.
int64_t FitPairs(const PipelineSetProblem& problem) {
  constexpr int64_t kMaxFitPairs = int64_t{1} << 18;
  int64_t all = 1, fitting = 0;
  for (int count : problem.available) all *= count + 1;
  all *= static_cast<int64_t>(problem.Shapes().size());
  for (const PipelineShape& s : problem.Shapes()) {
    int64_t states = 1;  // u >= mix within the available counts
    for (size_t t = 0; t < problem.available.size(); ++t) {
      states *= std::max(0, problem.available[t] - s.mix[t] + 1);
    }
    fitting += states;
    if (fitting > kMaxFitPairs) return -1;
  }
  return fitting * 4 <= all * 3 ? fitting : -1;
}

template <typename V>
void MaxRow(V* __restrict dst, const V* __restrict src, int pmax) {
  for (int p = 1; p <= pmax; ++p) dst[p] = std::max(dst[p], src[p]);
}
// dst[p] = max(dst[p], min(src[p - 1] + k, cap)); src + k cannot overflow V because
// src >= kNeg and k <= cap <= max(V) / 2.
template <typename V>
void AddMaxRow(V* __restrict dst, const V* __restrict src, V k, V cap, int pmax) {
  for (int p = 1; p <= pmax; ++p) {
    dst[p] = std::max(dst[p], std::min(static_cast<V>(src[p - 1] + k), cap));
  }
}
// A sum built on an impossible entry stays below 0; reset it so it cannot grow back.
template <typename V>
void ClampRow(V* __restrict dst, V neg, int pmax) {
  for (int p = 1; p <= pmax; ++p) dst[p] = dst[p] < 0 ? neg : dst[p];
}

}  // namespace

int64_t DpStateCount(const PipelineSetProblem& problem) {
  const std::vector<int> pad = DpPadding(problem);
  int64_t states = 1;
  for (size_t t = 0; t < pad.size(); ++t) {
    states = std::min(states * (problem.available[t] + 1 + pad[t]), kMaxPlanStates + 1);
  }
  return states;
}

NodeCountDp::NodeCountDp(const SearchShapes& shapes, SearchProgress& progress)
    : shapes_(shapes), problem_(shapes.problem()), progress_(progress) {
  std::vector<int> row_digits;  // T per real state, for the fit lists
  const int64_t fit_pairs = FitPairs(problem_);
  BuildStates(fit_pairs >= 0 ? &row_digits : nullptr);
  offsets_.reserve(problem_.Shapes().size());
  for (const PipelineShape& s : problem_.Shapes()) offsets_.push_back(Offset(s.mix));
  if (fit_pairs >= 0) BuildFitLists(fit_pairs, row_digits);
}

// The DP's states, u_t in [-pad_t, available_t] per type (DpStateCount of them); with
// `row_digits`, the counts of every real state too.
void NodeCountDp::BuildStates(std::vector<int>* row_digits) {
  const PipelineSetProblem& problem = problem_;
  const int T = static_cast<int>(problem.available.size());
  const std::vector<int> pad = DpPadding(problem);
  strides_.assign(T, 1);
  num_states_ = 1;
  for (int t = 0; t < T; ++t) {
    strides_[t] = num_states_;
    num_states_ *= problem.available[t] + 1 + pad[t];
  }
  int64_t origin = 0;
  for (int t = 0; t < T; ++t) origin += pad[t] * strides_[t];
  full_ = origin + Offset(problem.available);
  // Real states in index order (odometer over u, first type fastest).
  int64_t num_real = 1;
  for (int t = 0; t < T; ++t) num_real *= problem.available[t] + 1;
  real_states_.reserve(num_real);
  real_sizes_.reserve(num_real);
  std::vector<int> digits(T, 0);
  if (row_digits != nullptr) row_digits->reserve(num_real * T);
  int64_t idx = origin;
  int size = 0;
  while (true) {
    real_states_.push_back(idx);
    real_sizes_.push_back(size);
    if (row_digits != nullptr) row_digits->insert(row_digits->end(), digits.begin(), digits.end());
    int t = 0;
    for (; t < T; ++t) {
      if (digits[t] < problem.available[t]) {
        ++digits[t];
        idx += strides_[t];
        ++size;
        break;
      }
      idx -= digits[t] * strides_[t];
      size -= digits[t];
      digits[t] = 0;
    }
    if (t == T) break;
  }
  // Real states grouped by size (number of nodes), for the wavefront of FillRows.
  const int max_size = MixSize(problem.available);
  level_starts_.assign(max_size + 2, 0);
  for (int size_of : real_sizes_) ++level_starts_[size_of + 1];
  for (int l = 1; l <= max_size + 1; ++l) level_starts_[l] += level_starts_[l - 1];
  by_size_.resize(real_states_.size());
  std::vector<size_t> next(level_starts_.begin(), level_starts_.end() - 1);
  for (size_t r = 0; r < real_states_.size(); ++r) by_size_[next[real_sizes_[r]]++] = r;
}

// Per real state, the shapes that fit within it (fit_shapes_, fit_starts_).
void NodeCountDp::BuildFitLists(int64_t fit_pairs, const std::vector<int>& row_digits) {
  const int T = static_cast<int>(problem_.available.size());
  const int num_shapes = static_cast<int>(problem_.Shapes().size());
  // (Up to the available counts: the states' counts index the sets.)
  const ShapesWithin within(problem_.Shapes(),
                            std::vector<int>(problem_.available.begin(), problem_.available.end()));
  const int W = within.words();
  std::vector<uint64_t> fitting(W, 0);
  for (int j = 0; j < num_shapes; ++j) {
    if (shapes_.fits(j)) fitting[j / 64] |= uint64_t{1} << (j % 64);
  }
  fit_shapes_.reserve(fit_pairs);
  fit_starts_.reserve(real_states_.size() + 1);
  fit_starts_.push_back(0);
  for (size_t r = 0; r < real_states_.size(); ++r) {
    for (int w = 0; w < W; ++w) {
      uint64_t bits = within.Word(&row_digits[r * T], w) & fitting[w];
      for (; bits != 0; bits &= bits - 1) fit_shapes_.push_back(w * 64 + std::countr_zero(bits));
    }
    fit_starts_.push_back(static_cast<int>(fit_shapes_.size()));
  }
}

int64_t NodeCountDp::Offset(const NodeMix& mix) const {
  int64_t off = 0;
  for (size_t t = 0; t < mix.size(); ++t) off += mix[t] * strides_[t];
  return off;
}

absl::Status NodeCountDp::CheckCapacity() {
  RETURN_IF_ERROR(shapes_.CheckBatch());
  int64_t capacity = 0;
  for (const LoadCurve& c : shapes_.fixed()) capacity += c.limit();
  ASSIGN_OR_RETURN(Unconstrained free, FreeAbsorbUnconstrained(shapes_.TopTau(), kSaturated));
  capacity += free.absorbed;
  if (capacity < shapes_.global_batch()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the available pipelines hold at most %d micro-batches per iteration within GPU "
        "memory, fewer than the global batch of %d",
        capacity, shapes_.global_batch()));
  }
  return absl::OkStatus();
}

absl::Status NodeCountDp::CheckTableSize(int pcap) const {
  if (int64_t{num_states_} * (pcap + 1) <= kMaxTableEntries) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "the exact plan search over this cluster needs a table of %d node-count states x %d "
      "pipeline counts, more than the limit of %d entries; raise min_nodes_per_pipeline "
      "or plan fewer nodes or node types at once",
      num_states_, pcap + 1, kMaxTableEntries));
}

absl::StatusOr<int> NodeCountDp::MostPipelines(double tau, int pcap) {
  const int need = shapes_.Need(tau);
  if (need == kImpossibleNeed) return -1;
  const int none = need <= 0 ? 0 : -1;  // what zero free pipelines achieve
  pcap = std::min(pcap, shapes_.MaxFreePipelines());
  if (pcap < 1) return none;
  const int cap = std::max(need, 1);  // every free pipeline takes a micro-batch
  RETURN_IF_ERROR(FillTable(tau, pcap, cap));
  for (int p = pcap; p >= 1; --p) {
    if (table_.At(full_, p) >= cap) return p;
  }
  return none;
}

absl::StatusOr<int> NodeCountDp::MinPipelines(double tau, int pcap) {
  const int need = shapes_.Need(tau);
  if (need == kImpossibleNeed) return -1;
  if (need <= 0) return 0;
  pcap = std::min(pcap, shapes_.MaxFreePipelines());
  if (pcap < 1) return -1;
  RETURN_IF_ERROR(FillTable(tau, pcap, need));
  for (int p = 1; p <= pcap; ++p) {
    if (table_.At(full_, p) >= need) return p;
  }
  return -1;
}

absl::StatusOr<NodeCountDp::Unconstrained> NodeCountDp::FreeAbsorbUnconstrained(double tau,
                                                                                int cap) {
  RETURN_IF_ERROR(progress_.Cancelled());
  ++progress_.evaluations;
  const std::vector<Usable> usable = shapes_.UsableShapes(tau);
  if (usable.empty()) return Unconstrained{};
  // One int64 per state orders (more absorbed, then fewer pipelines): absorbed << 21 |
  // (kMask - pipelines), so a plain max does both, branch-free. Impossible states are so
  // negative that no addition brings them above the all-idle key.
  constexpr int kShift = 21;
  constexpr int64_t kMask = (int64_t{1} << kShift) - 1;
  constexpr int64_t kImpossible = -(int64_t{1} << 60);
  Interrupt& interrupt = progress_.interrupt;
  std::vector<int64_t>& w = keys_;
  if (!AssignPolled(w, num_states_, kImpossible, interrupt)) {
    return Interrupt::Status("plan search");
  }
  const int T = static_cast<int>(strides_.size());
  const int64_t cap64 = cap;
  const size_t rows_per_poll = std::max<size_t>(1, kPollWork / (T + usable.size()));
  if (!fit_starts_.empty()) {
    std::vector<int32_t> kept_absorb(shapes_.shapes().size(), 0);  // 0: not in usable
    for (const Usable& a : usable) kept_absorb[a.shape] = a.absorb;
    for (size_t r = 0; r < real_states_.size(); ++r) {
      if (r % rows_per_poll == 0 && interrupt.Poll()) return Interrupt::Status("plan search");
      const int64_t u = real_states_[r];
      int64_t best = kMask;  // nothing absorbed, no pipeline
      for (int t = 0; t < T; ++t) best = std::max(best, w[u - strides_[t]]);
      for (int i = fit_starts_[r]; i < fit_starts_[r + 1]; ++i) {
        const int j = fit_shapes_[i];
        const int64_t absorb = kept_absorb[j];
        if (absorb == 0) continue;
        const int64_t src = w[u - offsets_[j]];
        const int64_t absorbed = std::min((src >> kShift) + absorb, cap64);
        best = std::max(best, (absorbed << kShift) | ((src & kMask) - 1));
      }
      w[u] = best;
    }
  } else {
    for (size_t r = 0; r < real_states_.size(); ++r) {
      if (r % rows_per_poll == 0 && interrupt.Poll()) return Interrupt::Status("plan search");
      const int64_t u = real_states_[r];
      int64_t best = kMask;  // nothing absorbed, no pipeline
      for (int t = 0; t < T; ++t) best = std::max(best, w[u - strides_[t]]);
      for (const Usable& s : usable) {
        const int64_t src = w[u - offsets_[s.shape]];
        const int64_t absorbed = std::min((src >> kShift) + s.absorb, cap64);
        best = std::max(best, (absorbed << kShift) | ((src & kMask) - 1));
      }
      w[u] = best;
    }
  }
  const int64_t at_full = w[full_];
  return Unconstrained{at_full >> kShift, static_cast<int>(kMask - (at_full & kMask))};
}

absl::Status NodeCountDp::FillTable(double tau, int pcap, int cap) {
  RETURN_IF_ERROR(progress_.Cancelled());
  ++progress_.evaluations;
  const std::vector<Usable> usable = shapes_.UsableShapes(tau);
  table_.int16 = cap <= kMaxInt16Need;
  // One block per row when pcap allows and the wider table stays small (a table with
  // many states and few pipelines keeps its narrow rows).
  const bool one_block = pcap <= kLanes && num_states_ * (1 + kLanes) <= kMaxOneBlockEntries;
  table_.width = one_block ? 1 + kLanes : pcap + 1;
  const bool filled = table_.int16 ? FillRows(table_.v16, usable, pcap, table_.width, cap)
                                   : FillRows(table_.v32, usable, pcap, table_.width, cap);
  return filled ? absl::OkStatus() : Interrupt::Status("plan search");
}

// table[u][p] = most micro-batches (saturated at `cap`) exactly p free pipelines within u
// absorb at tau; kNeg when p pipelines do not fit. Rows are `width` entries (at least
// pcap + 1) and computed with straight loops over p so that they vectorise (int16 lanes
// when cap allows).
//
// Rows of 1 + kLanes entries (pcap <= kLanes: warm replans of small clusters) are one
// block: every row is computed in full, past its pmax, with fixed trip counts over a copy
// in registers, where a vector loop's scalar tail would be most of the work. Entries past
// pmax are impossible and come out as kNeg all the same (they are built on kNeg entries
// only and clamped), entries past pcap are never read, and entry p depends on entries
// <= p only, so the entries up to pcap are exactly those of the narrow table.
// False when the search was interrupted before every row was filled.
template <typename V>
bool NodeCountDp::FillRows(std::vector<V>& table, const std::vector<Usable>& usable, int pcap,
                           int width, int cap) {
  constexpr V kNegV = std::numeric_limits<V>::min() / 2;
  if (!AssignPolled(table, num_states_ * width, kNegV, progress_.interrupt)) return false;
  const int T = static_cast<int>(strides_.size());
  const int min_nodes = std::max(1, shapes_.min_shape_nodes());
  const V capv = static_cast<V>(cap);
  const bool one_block = width == 1 + kLanes;
  // Per shape for one-block rows: the distance from a row to its source row, and what the
  // shape adds (0: not usable at this tau).
  std::vector<int64_t>& block_delta = block_delta_;
  std::vector<int32_t>& block_k = block_k_;
  if (one_block) {
    const size_t num_shapes = shapes_.shapes().size();
    block_delta.resize(num_shapes);
    for (size_t j = 0; j < num_shapes; ++j) block_delta[j] = offsets_[j] * width;
    block_k.assign(num_shapes, 0);
    for (const Usable& s : usable) block_k[s.shape] = std::min(s.absorb, cap);
  }
  auto row = [&](size_t r) {
    const int64_t u = real_states_[r];
    V* __restrict dst = &table[u * width];
    dst[0] = 0;
    const int pmax = std::min(pcap, real_sizes_[r] / min_nodes);
    for (int t = 0; t < T; ++t) {
      const V* __restrict src = &table[(u - strides_[t]) * width];
      MaxRow(dst, src, pmax);
    }
    for (const Usable& s : usable) {
      const V* __restrict src = &table[(u - offsets_[s.shape]) * width];
      AddMaxRow(dst, src, static_cast<V>(std::min(s.absorb, cap)), capv, pmax);
    }
    ClampRow(dst, kNegV, pmax);
  };
  auto block_row = [&](size_t r) {
    const int64_t u = real_states_[r];
    V* __restrict dst = &table[u * width];
    dst[0] = 0;
    if (real_sizes_[r] < min_nodes) return;  // pmax = 0
    RowBlock<V> acc(dst + 1);
    for (int t = 0; t < T; ++t) acc.Max(dst - strides_[t] * width + 1);
    if (!fit_starts_.empty()) {
      for (int i = fit_starts_[r]; i < fit_starts_[r + 1]; ++i) {
        const int j = fit_shapes_[i];
        if (block_k[j] == 0) continue;
        acc.AddMax(dst - block_delta[j], static_cast<V>(block_k[j]), capv);
      }
    } else {
      for (const Usable& s : usable) {
        acc.AddMax(dst - block_delta[s.shape], static_cast<V>(block_k[s.shape]), capv);
      }
    }
    acc.Clamp(kNegV);
    acc.Store(dst + 1);
  };
  const int64_t work =
      static_cast<int64_t>(real_states_.size()) * width * static_cast<int64_t>(usable.size() + T);
  return one_block ? ForEachRow(block_row, work) : ForEachRow(row, work);
}

// Runs `row` on every real state, each after the states it is built from, polling the
// interrupt every kPollWork of work; false if it stopped early.
template <typename Row>
bool NodeCountDp::ForEachRow(const Row& row, int64_t work) const {
  Interrupt& interrupt = progress_.interrupt;
  const size_t rows = real_states_.size();
  const int64_t per_row = std::max<int64_t>(1, work / std::max<size_t>(1, rows));
  const size_t rows_per_poll = static_cast<size_t>(std::max<int64_t>(1, kPollWork / per_row));
  if (work < kParallelWork) {
    for (size_t r = 0; r < rows; ++r) {
      if (r % rows_per_poll == 0 && interrupt.Poll()) return false;
      row(by_size_[r]);
    }
    return true;
  }
  // Every state is built from states with fewer nodes: one size level at a time, the
  // states of a level in parallel (each row written by one thread: deterministic).
  const size_t grain = std::min<size_t>(64, rows_per_poll);
  for (size_t level = 0; level + 1 < level_starts_.size(); ++level) {
    if (interrupt.Poll()) return false;
    tbb::parallel_for(
        tbb::blocked_range<size_t>(level_starts_[level], level_starts_[level + 1], grain),
        [&](const tbb::blocked_range<size_t>& range) {
          // (The partitioner may hand one body far more than `grain` rows.)
          for (size_t i = range.begin(); i != range.end(); ++i) {
            if ((i - range.begin()) % rows_per_poll == 0 && interrupt.Poll()) return;
            row(by_size_[i]);
          }
        });
  }
  return !interrupt.stopped();
}

absl::StatusOr<std::vector<int>> NodeCountDp::Trace(double tau, int p) const {
  const int need = shapes_.Need(tau);
  const std::vector<Usable> usable = shapes_.UsableShapes(tau);
  const Table& table = best_table_;
  if (table.width <= p || table.At(full_, p) < need) {
    return absl::InternalError("plan search: the optimum does not reconstruct");
  }
  std::vector<int> chosen;
  const int T = static_cast<int>(strides_.size());
  int64_t u = full_;
  int q = p;
  while (q > 0) {
    const int32_t value = table.At(u, q);
    bool stepped = false;
    for (const Usable& s : usable) {
      const int32_t src = table.At(u - offsets_[s.shape], q - 1);
      if (src < 0 || std::min(src + std::min(s.absorb, need), need) != value) continue;
      chosen.push_back(s.shape);
      u -= offsets_[s.shape];
      --q;
      stepped = true;
      break;
    }
    for (int t = 0; t < T && !stepped; ++t) {
      if (table.At(u - strides_[t], q) == value) {
        u -= strides_[t];
        stepped = true;
      }
    }
    if (!stepped) return absl::InternalError("plan search: broken DP trace");
  }
  return chosen;
}

}  // namespace oobleck::plan_search
