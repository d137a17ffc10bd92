// RETURN_IF_ERROR / ASSIGN_OR_RETURN, as in codebases built on absl::Status: a fallible
// step in one line, the error returned unchanged (code, message and payloads).
//
//   RETURN_IF_ERROR(ValidateProfile(profile));
//   ASSIGN_OR_RETURN(std::string text, ReadRegularFile(path));
//
// Both work in any function returning absl::Status or absl::StatusOr<T>. ASSIGN_OR_RETURN
// declares or assigns its left side; it expands to several statements, so it cannot be the
// body of an unbraced if.
#ifndef OOBLECK_CORE_STATUS_MACROS_H_
#define OOBLECK_CORE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define RETURN_IF_ERROR(expr)                                                       \
  do {                                                                              \
    if (::absl::Status oobleck_status_macro_ = (expr); !oobleck_status_macro_.ok()) \
      return oobleck_status_macro_;                                                 \
  } while (false)

#define OOBLECK_STATUS_MACROS_CONCAT_INNER_(a, b) a##b
#define OOBLECK_STATUS_MACROS_CONCAT_(a, b) OOBLECK_STATUS_MACROS_CONCAT_INNER_(a, b)

#define ASSIGN_OR_RETURN(lhs, rexpr)                                                              \
  OOBLECK_ASSIGN_OR_RETURN_IMPL_(OOBLECK_STATUS_MACROS_CONCAT_(oobleck_statusor_, __LINE__), lhs, \
                                 rexpr)

#define OOBLECK_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                   \
  if (!statusor.ok()) return std::move(statusor).status();   \
  lhs = *std::move(statusor)

#endif  // OOBLECK_CORE_STATUS_MACROS_H_
