// Synthetic model profiles in Oobleck's layout (the three JSON files of a profile
// directory, as LoadProfile's `files` carries them), for the service benchmarks that need
// many distinct models (bench/README.md#cache-budget, #soak). Every value is drawn from a
// generator seeded by `seed`, so different seeds give different content (and fingerprints)
// and the same seed gives the same files.
#ifndef OOBLECK_BENCH_SYNTHETIC_PROFILE_H_
#define OOBLECK_BENCH_SYNTHETIC_PROFILE_H_

#include <cstdint>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace oobleck::bench {

struct OobleckFiles {
  std::string mb_json;                      // mb1.json
  std::string allreduce_in_node_json;       // allreduce_in_node.json
  std::string allreduce_across_nodes_json;  // allreduce_across_nodes.json
};

// A model of `layers` layers whose totals do not depend on the depth: about 600 ms of
// forward+backward compute, 3 GB of parameters and 0.4 GB of retained activations per
// micro-batch, so that it fits on one or two 24 GiB GPUs whatever `layers` is and the
// search has real memory limits to respect. Each layer's values vary by +-50% around the
// mean. In-node all-reduce times for 1, 2, 4 and 8 GPUs; across nodes for 1 to 8 nodes.
inline OobleckFiles SyntheticOobleckProfile(int layers, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  const double forward_ms = 200.0 / layers, param_bytes = 3e9 / layers,
               activation_bytes = 4e8 / layers;
  OobleckFiles files;
  files.mb_json = "[";
  files.allreduce_in_node_json = "[";
  files.allreduce_across_nodes_json = "[";
  for (int l = 0; l < layers; ++l) {
    const char* sep = l == 0 ? "" : ", ";
    const double forward = forward_ms * jitter(random);
    const double params = param_bytes * jitter(random);
    absl::StrAppendFormat(&files.mb_json,
                          "%s{\"forward\": %.9g, \"backward\": %.9g, \"mem_required\": [%.1f, "
                          "%.1f]}",
                          sep, forward, 2 * forward * jitter(random), params,
                          activation_bytes * jitter(random));
    // All-reduce time of this layer's gradients: bytes over ~10 GB/s, a ring's 2(g-1)/g.
    const double base_ms = params / 1e7;
    absl::StrAppend(&files.allreduce_in_node_json, sep, "{\"1\": 0.0");
    for (int g : {2, 4, 8}) {
      absl::StrAppendFormat(&files.allreduce_in_node_json, ", \"%d\": %.9g", g,
                            base_ms * 2 * (g - 1) / g / 2.5);
    }
    absl::StrAppend(&files.allreduce_in_node_json, "}");
    absl::StrAppend(&files.allreduce_across_nodes_json, sep, "{\"1\": 0.0");
    for (int n = 2; n <= 8; ++n) {
      absl::StrAppendFormat(&files.allreduce_across_nodes_json, ", \"%d\": %.9g", n,
                            base_ms * 2 * (n - 1) / n);
    }
    absl::StrAppend(&files.allreduce_across_nodes_json, "}");
  }
  absl::StrAppend(&files.mb_json, "]");
  absl::StrAppend(&files.allreduce_in_node_json, "]");
  absl::StrAppend(&files.allreduce_across_nodes_json, "]");
  return files;
}

}  // namespace oobleck::bench

#endif  // OOBLECK_BENCH_SYNTHETIC_PROFILE_H_
