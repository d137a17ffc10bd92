// Predicts every run of a folder in Sailor's format (plan_config_*.json with the measured
// `real` seconds and `max_mem` bytes) and prints, per run, the measured and predicted
// iteration time and peak GPU memory with the error, then the median and max absolute
// errors (bench/README.md#fidelity).
//
//   fidelity --data data/sailor --runs data/sailor/validation/clariden-opt-350
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "core/fidelity/evaluate.h"
#include "core/fidelity/sailor_data.h"

ABSL_FLAG(std::string, data, "data/sailor", "Sailor's inputs (profiles_tmp.json, ...)");
ABSL_FLAG(std::string, runs, "data/sailor/validation/clariden-opt-350",
          "folder of plan_config_*.json runs to predict");
ABSL_FLAG(std::string, model, "", "model of the runs, if their plans do not name it");

namespace {

using oobleck::fidelity::EvaluateSailorPlan;
using oobleck::fidelity::LoadSailorData;
using oobleck::fidelity::LoadSailorPlan;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::vector<std::filesystem::path> RunFiles(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("plan_config_") && name.ends_with(".json")) files.push_back(entry);
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto data = LoadSailorData(absl::GetFlag(FLAGS_data));
  if (!data.ok()) {
    std::fprintf(stderr, "fidelity: %s\n", data.status().ToString().c_str());
    return 1;
  }
  const auto files = RunFiles(absl::GetFlag(FLAGS_runs));
  if (files.empty()) {
    std::fprintf(stderr, "fidelity: no plan_config_*.json in %s\n",
                 absl::GetFlag(FLAGS_runs).c_str());
    return 1;
  }
  std::printf("%-24s %9s %9s %7s %9s %9s %7s\n", "run", "real_s", "pred_s", "err%", "real_GiB",
              "pred_GiB", "err%");
  std::vector<double> time_errors, memory_errors;
  size_t refused = 0;
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  for (const auto& file : files) {
    std::string row = absl::StrFormat("%-24s", file.stem().string().substr(12));
    // A run the model cannot or must not predict (a plan that is not a partition of the
    // model's layers, a GPU type the profiles lack) is its row's answer, not the table's end.
    auto plan = LoadSailorPlan(file);
    absl::Status refusal = plan.status();
    absl::StatusOr<oobleck::fidelity::Evaluation> e;
    if (plan.ok()) {
      e = EvaluateSailorPlan(*data, *plan, absl::GetFlag(FLAGS_model));
      refusal = e.status();
    }
    if (!refusal.ok()) {
      std::printf("%s refused: %s\n", row.c_str(), refusal.ToString().c_str());
      ++refused;
      continue;
    }
    // Sailor's files write 0 for what was not measured (mit/N1_D1's time).
    if (plan->real_iteration_s.value_or(0) > 0) {
      const double err = 100 * (e->iteration_s - *plan->real_iteration_s) / *plan->real_iteration_s;
      time_errors.push_back(std::abs(err));
      absl::StrAppendFormat(&row, " %9.3f %9.3f %+7.1f", *plan->real_iteration_s, e->iteration_s,
                            err);
    } else {
      absl::StrAppendFormat(&row, " %9s %9.3f %7s", "-", e->iteration_s, "-");
    }
    if (plan->real_max_memory_bytes.value_or(0) > 0) {
      const double real = *plan->real_max_memory_bytes;
      const double err = 100 * (e->peak_memory_bytes - real) / real;
      memory_errors.push_back(std::abs(err));
      absl::StrAppendFormat(&row, " %9.2f %9.2f %+7.1f", real / kGiB, e->peak_memory_bytes / kGiB,
                            err);
    } else {
      absl::StrAppendFormat(&row, " %9s %9.2f %7s", "-", e->peak_memory_bytes / kGiB, "-");
    }
    std::printf("%s\n", row.c_str());
  }
  for (const auto& [name, errors] :
       {std::pair{"time", &time_errors}, std::pair{"memory", &memory_errors}}) {
    if (errors->empty()) continue;
    std::printf("%s: median |error| %.1f %%, max |error| %.1f %% over %zu runs\n", name,
                Median(*errors), *std::max_element(errors->begin(), errors->end()), errors->size());
  }
  if (refused > 0) std::printf("refused: %zu of %zu runs\n", refused, files.size());
  // Exit 1 only when no run could be predicted: refusals are rows of the table.
  return refused == files.size() ? 1 : 0;
}
