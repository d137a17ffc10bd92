// The template search's progress on stderr while `templates` waits for its answer:
//   exact search (layers)       [##########----------]  25/50  4.2 s
// On a terminal the line is redrawn in place and erased once the answer is there, so the
// table or JSON on stdout is all that stays; elsewhere each update is a line of its own.
#ifndef OOBLECK_CLIENT_PROGRESS_BAR_H_
#define OOBLECK_CLIENT_PROGRESS_BAR_H_

#include <ostream>
#include <string>

#include "oobleck/planner/v1/planner.pb.h"

namespace oobleck::client {

// One progress line (without newline), with a bar of `bar_width` cells.
std::string FormatProgress(const ::oobleck::planner::v1::SearchProgress& progress,
                           int bar_width = 30);

class ProgressBar {
 public:
  // `out` must outlive the bar; `redraw`: overwrite one line (a terminal).
  ProgressBar(std::ostream* out, bool redraw) : out_(out), redraw_(redraw) {}
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  ~ProgressBar() { Clear(); }

  void Show(const ::oobleck::planner::v1::SearchProgress& progress);
  // Erases a redrawn line (no-op otherwise).
  void Clear();

 private:
  std::ostream* out_;
  const bool redraw_;
  bool shown_ = false;
};

}  // namespace oobleck::client

#endif  // OOBLECK_CLIENT_PROGRESS_BAR_H_
