#include "core/cluster.h"

#include <cmath>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "core/field_path.h"
#include "core/shown_value.h"

namespace oobleck {

int MixSize(const NodeMix& mix) {
  int n = 0;
  for (int c : mix) n += c;
  return n;
}

std::string MixLabel(const NodeMix& mix, const std::vector<NodeType>& types) {
  std::string label;
  for (size_t i = 0; i < mix.size(); ++i) {
    if (mix[i] == 0) continue;
    absl::StrAppend(&label, label.empty() ? "" : "+", mix[i], "x",
                    i < types.size() ? types[i].name : absl::StrCat("type", i));
  }
  return label.empty() ? "empty" : label;
}

std::vector<NodeMix> EnumerateMixes(const NodeMix& available, int min_nodes, int max_nodes) {
  std::vector<NodeMix> mixes;
  min_nodes = std::max(min_nodes, 1);
  NodeMix current(available.size(), 0);
  // rest[i]: the nodes of types i.. . A count that leaves more than they hold leads to no
  // mix: without this bound N one-node types with min = max = N walked all 2^N branches
  // for the one mix there is (seconds at N = 28), and 2 types of 2^19 nodes 2^37.
  std::vector<int64_t> rest(available.size() + 1, 0);
  for (size_t i = available.size(); i-- > 0;) rest[i] = rest[i + 1] + available[i];
  for (int size = min_nodes; size <= max_nodes; ++size) {
    // Lexicographic (descending first count) enumeration of compositions of `size`.
    std::function<void(size_t, int)> rec = [&](size_t i, int left) {
      if (i == available.size()) {
        if (left == 0) mixes.push_back(current);
        return;
      }
      const int least = static_cast<int>(std::max<int64_t>(0, left - rest[i + 1]));
      for (int c = std::min(left, available[i]); c >= least; --c) {
        current[i] = c;
        rec(i + 1, left - c);
      }
      current[i] = 0;
    };
    rec(0, size);
  }
  return mixes;
}

int FindNodeType(const std::vector<NodeType>& types, absl::string_view name) {
  for (size_t t = 0; t < types.size(); ++t) {
    if (types[t].name == name) return static_cast<int>(t);
  }
  return -1;
}

absl::Status ValidateNodeTypes(const std::vector<NodeType>& types, absl::string_view path) {
  if (types.empty()) return InvalidField(path, " must not be empty");
  std::map<std::string, size_t> index_by_name;
  for (size_t i = 0; i < types.size(); ++i) {
    const NodeType& t = types[i];
    const std::string field = absl::StrCat(path, "[", i, "]");
    if (t.name.empty()) return InvalidField(absl::StrCat(field, ".name"), " is required");
    if (auto [it, inserted] = index_by_name.emplace(t.name, i); !inserted) {
      return InvalidField(
          absl::StrCat(field, ".name"),
          absl::StrCat(" ", Quote(t.name), " repeats ", path, "[", it->second, "].name"));
    }
    if (t.gpus_per_node < 1) {
      return InvalidValue(absl::StrCat(field, ".gpus_per_node"), ">= 1", t.gpus_per_node);
    }
    if (t.gpus_per_node > kMaxGpusPerNode) {
      return InvalidValue(absl::StrCat(field, ".gpus_per_node"),
                          absl::StrCat("<= ", kMaxGpusPerNode), t.gpus_per_node);
    }
    // Both cost models divide by the memory and the bandwidth somewhere (1f1b's memory
    // check, the ring all-reduce estimate, transfers inside a node).
    if (!std::isfinite(t.gpu_memory_bytes) || t.gpu_memory_bytes <= 0) {
      return InvalidValue(absl::StrCat(field, ".gpu_memory_bytes"), "> 0", t.gpu_memory_bytes);
    }
    if (!std::isfinite(t.intra_node_bytes_per_s) || t.intra_node_bytes_per_s <= 0) {
      return InvalidValue(absl::StrCat(field, ".intra_node_bytes_per_s"), "> 0",
                          t.intra_node_bytes_per_s);
    }
  }
  return absl::OkStatus();
}

// Every branch visited leads to at least one counted mix, so the work is O(limit * types).
int64_t CountMixes(const NodeMix& available, int64_t min_nodes, int64_t max_nodes, int64_t limit) {
  const size_t n = available.size();
  std::vector<int64_t> rest(n + 1, 0);  // nodes available in types i..n-1
  for (size_t i = n; i-- > 0;) rest[i] = rest[i + 1] + available[i];
  int64_t count = 0;
  std::function<void(size_t, int64_t)> visit = [&](size_t i, int64_t size) {
    if (i == n) {
      ++count;
      return;
    }
    const int64_t lo = std::max<int64_t>(0, min_nodes - size - rest[i + 1]);
    const int64_t hi = std::min<int64_t>(available[i], max_nodes - size);
    for (int64_t c = lo; c <= hi && count < limit; ++c) visit(i + 1, size + c);
  };
  visit(0, 0);
  return count;
}

}  // namespace oobleck
