#include "client/progress_bar.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace oobleck::client {

std::string FormatProgress(const ::oobleck::planner::v1::SearchProgress& progress, int bar_width) {
  const int64_t total = std::max<int64_t>(progress.total(), 1);
  const int64_t done = std::clamp<int64_t>(progress.done(), 0, total);
  const int filled = static_cast<int>(done * bar_width / total);
  return absl::StrFormat("%-26s [%s%s] %*d/%d  %.1f s", progress.phase(), std::string(filled, '#'),
                         std::string(bar_width - filled, '-'),
                         static_cast<int>(absl::StrCat(total).size()), done, total,
                         progress.elapsed_ms() / 1000);
}

void ProgressBar::Show(const ::oobleck::planner::v1::SearchProgress& progress) {
  // "\r" back to the line's start, "\033[K" erases what a longer earlier line left.
  *out_ << (redraw_ ? "\r\033[K" : "") << FormatProgress(progress) << (redraw_ ? "" : "\n");
  out_->flush();
  shown_ = true;
}

void ProgressBar::Clear() {
  if (!redraw_ || !shown_) return;
  *out_ << "\r\033[K";
  out_->flush();
  shown_ = false;
}

}  // namespace oobleck::client
