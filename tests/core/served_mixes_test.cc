// LowerBoundNear (core/template_search/served_mixes.h) must find exactly what
// std::lower_bound finds from any hint: the 1f1b sum-limit cache decides which labels the
// search keeps by that position.
#include "core/template_search/served_mixes.h"

#include <algorithm>
#include <cstddef>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace oobleck {
namespace {

using template_search::LowerBoundNear;

TEST(LowerBoundNear, MatchesStdLowerBoundFromEveryHint) {
  std::mt19937 rng(12);
  std::uniform_int_distribution<int> size(0, 40);
  std::uniform_int_distribution<int> key(0, 30);  // small range: duplicates and exact hits
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::pair<double, double>> keyed(size(rng));
    for (auto& [k, v] : keyed) {
      k = key(rng);
      v = -k;
    }
    std::sort(keyed.begin(), keyed.end());
    for (int probe = -1; probe <= 31; ++probe) {
      const double k = probe + (trial % 2 == 0 ? 0.0 : 0.5);
      const size_t expected =
          static_cast<size_t>(std::lower_bound(keyed.begin(), keyed.end(), k,
                                               [](const std::pair<double, double>& p, double x) {
                                                 return p.first < x;
                                               }) -
                              keyed.begin());
      for (size_t hint = 0; hint <= keyed.size() + 2; ++hint) {
        ASSERT_EQ(LowerBoundNear(keyed, hint, k), expected)
            << "size " << keyed.size() << " key " << k << " hint " << hint;
      }
    }
  }
}

}  // namespace
}  // namespace oobleck
