// Rows of the node-count DP's table (core/plan_search/pipeline_set_search.cc) held in
// registers: the operations of one table fill, in SSE2 for the int16 table.
#ifndef OOBLECK_CORE_PLAN_SEARCH_DP_ROWS_H_
#define OOBLECK_CORE_PLAN_SEARCH_DP_ROWS_H_

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace oobleck::plan_search {

// Entries of a one-block table row past p = 0 (see PlanSearch::FillRows): 16 int16 lanes are
// two SSE registers.
constexpr int kLanes = 16;

// kLanes consecutive table entries held in registers, with the row operations of the table
// fill: dst[p] = max(dst[p], src[p]) (a node left idle), max(dst[p], min(src[p - 1] + k,
// cap)) (one more pipeline; src + k cannot overflow V because src >= kNeg and k <= cap <=
// max(V) / 2), and the reset of sums built on impossible (negative) entries.
template <typename V>
class RowBlock {
 public:
  explicit RowBlock(const V* p) { std::memcpy(v_, p, sizeof v_); }
  void Store(V* p) const { std::memcpy(p, v_, sizeof v_); }
  void Max(const V* src) {
    for (int i = 0; i < kLanes; ++i) v_[i] = std::max(v_[i], src[i]);
  }
  void AddMax(const V* src, V k, V cap) {
    for (int i = 0; i < kLanes; ++i) {
      v_[i] = std::max(v_[i], std::min(static_cast<V>(src[i] + k), cap));
    }
  }
  void Clamp(V neg) {
    for (int i = 0; i < kLanes; ++i) v_[i] = v_[i] < 0 ? neg : v_[i];
  }

 private:
  V v_[kLanes];
};

#if defined(__SSE2__)
// The int16 table (every batch up to 16383 micro-batches) with SSE2 directly: compilers
// vectorise the loops above only sometimes, and they are the inner loop of warm replans.
template <>
class RowBlock<int16_t> {
 public:
  explicit RowBlock(const int16_t* p) : lo_(Load(p)), hi_(Load(p + 8)) {}
  void Store(int16_t* p) const {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), lo_);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 8), hi_);
  }
  void Max(const int16_t* src) {
    lo_ = _mm_max_epi16(lo_, Load(src));
    hi_ = _mm_max_epi16(hi_, Load(src + 8));
  }
  void AddMax(const int16_t* src, int16_t k, int16_t cap) {
    const __m128i kv = _mm_set1_epi16(k), capv = _mm_set1_epi16(cap);
    lo_ = _mm_max_epi16(lo_, _mm_min_epi16(_mm_add_epi16(Load(src), kv), capv));
    hi_ = _mm_max_epi16(hi_, _mm_min_epi16(_mm_add_epi16(Load(src + 8), kv), capv));
  }
  void Clamp(int16_t neg) {
    const __m128i negv = _mm_set1_epi16(neg), zero = _mm_setzero_si128();
    const __m128i lo_neg = _mm_cmplt_epi16(lo_, zero), hi_neg = _mm_cmplt_epi16(hi_, zero);
    lo_ = _mm_or_si128(_mm_and_si128(lo_neg, negv), _mm_andnot_si128(lo_neg, lo_));
    hi_ = _mm_or_si128(_mm_and_si128(hi_neg, negv), _mm_andnot_si128(hi_neg, hi_));
  }

 private:
  static __m128i Load(const int16_t* p) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  }
  __m128i lo_, hi_;
};
#endif

}  // namespace oobleck::plan_search

#endif  // OOBLECK_CORE_PLAN_SEARCH_DP_ROWS_H_
