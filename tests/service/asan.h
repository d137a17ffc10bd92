// Whether the test binary was built with AddressSanitizer. GCC defines __SANITIZE_ADDRESS__;
// clang (the sanitizer build, scripts/sanitize-build.sh) does not and answers
// __has_feature(address_sanitizer) instead.
#ifndef OOBLECK_TESTS_SERVICE_ASAN_H_
#define OOBLECK_TESTS_SERVICE_ASAN_H_

namespace oobleck::server {

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

}  // namespace oobleck::server

#endif  // OOBLECK_TESTS_SERVICE_ASAN_H_
