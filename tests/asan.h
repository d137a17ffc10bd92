// Whether the test binary was built with AddressSanitizer. GCC defines __SANITIZE_ADDRESS__;
// clang (the sanitizer build, scripts/sanitize-build.sh) does not and answers
// __has_feature(address_sanitizer) instead.
#ifndef OOBLECK_TESTS_ASAN_H_
#define OOBLECK_TESTS_ASAN_H_

namespace oobleck {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

// The seeds an oracle suite runs: all of them in the release build, a third (at least one)
// under the sanitizers. The sanitized build runs the same searches several times slower and
// looks for memory and undefined-behaviour errors, which the first seeds' searches reach as
// the others' do; the release build (scripts/test.sh, the same CI run) checks every seed's
// optimum.
constexpr int OracleSeeds(int seeds) { return kAddressSanitizer ? (seeds + 2) / 3 : seeds; }

}  // namespace oobleck

#endif  // OOBLECK_TESTS_ASAN_H_
