// Node event traces (examples/traces/README.md): `time_ms,add|remove,node` CSV, one
// event a line, read into one time-ordered list for trace_replay. Several traces merge into
// one mixed cluster: each trace's nodes get a node type and ids "<file stem>/<node>".
// Every error names the file and line; nothing is skipped silently. A trace is read like
// every other input file (core/file_reader.h): a regular file of at most 64 MiB.
#ifndef OOBLECK_BENCH_TRACE_EVENTS_H_
#define OOBLECK_BENCH_TRACE_EVENTS_H_

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/file_reader.h"

namespace oobleck::bench {

struct TraceEvent {
  int64_t time_ms = 0;
  bool add = false;       // else: the node was removed (preempted)
  std::string node_id;    // "<file stem>/<node>"
  std::string node_type;  // the trace's node type
  std::string where;      // "FILE:LINE", for messages
};

// "FILE:NODE_TYPE" (split at the last ':').
struct TraceSpec {
  std::string path;
  std::string node_type;
};
inline absl::StatusOr<TraceSpec> ParseTraceSpec(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--trace must be FILE:NODE_TYPE (got \"", text, "\")"));
  }
  return TraceSpec{text.substr(0, colon), text.substr(colon + 1)};
}

// The events of every trace, merged by time (ties keep file order, then line order), after
// checking that each file's times never decrease and that every node is added before it is
// removed and not added twice while present.
inline absl::StatusOr<std::vector<TraceEvent>> ReadTraces(const std::vector<TraceSpec>& specs) {
  std::vector<TraceEvent> all;
  std::set<std::string> stems;
  for (const TraceSpec& spec : specs) {
    // Only a regular file of at most kMaxInputFileBytes: --trace /dev/zero or a FIFO is
    // refused at once instead of read until memory runs out (or forever).
    absl::StatusOr<std::string> text =
        ReadRegularFile(spec.path, absl::StrCat("trace ", spec.path));
    if (!text.ok()) return text.status();
    std::istringstream in(*std::move(text));
    const std::string stem = std::filesystem::path(spec.path).stem().string();
    if (!stems.insert(stem).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--trace ", spec.path, ": a trace named \"", stem, "\" is listed twice"));
    }
    std::set<std::string> present;
    std::string line;
    int64_t last_ms = 0;
    for (int number = 1; std::getline(in, line); ++number) {
      const std::string where = absl::StrCat(spec.path, ":", number);
      const std::string text(absl::StripAsciiWhitespace(line));
      if (text.empty()) continue;  // e.g. a newline at the end
      const std::vector<std::string> fields = absl::StrSplit(text, ',');
      TraceEvent event;
      const bool parsed = fields.size() == 3 && absl::SimpleAtoi(fields[0], &event.time_ms) &&
                          event.time_ms >= 0 && (fields[1] == "add" || fields[1] == "remove") &&
                          !fields[2].empty();
      if (!parsed) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": expected time_ms,add|remove,node with time_ms >= 0 (got \"", text, "\")"));
      }
      if (event.time_ms < last_ms) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": time ", event.time_ms, " ms is before the previous line's ", last_ms, " ms"));
      }
      last_ms = event.time_ms;
      event.add = fields[1] == "add";
      event.node_id = absl::StrCat(stem, "/", fields[2]);
      event.node_type = spec.node_type;
      event.where = where;
      if (event.add && !present.insert(fields[2]).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": node ", fields[2], " is added but is already in the cluster"));
      }
      if (!event.add && present.erase(fields[2]) == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": node ", fields[2], " is removed but is not in the cluster"));
      }
      all.push_back(std::move(event));
    }
  }
  if (all.empty()) return absl::InvalidArgumentError("the traces have no events");
  std::stable_sort(all.begin(), all.end(),
                   [](const TraceEvent& a, const TraceEvent& b) { return a.time_ms < b.time_ms; });
  return all;
}

}  // namespace oobleck::bench

#endif  // OOBLECK_BENCH_TRACE_EVENTS_H_
