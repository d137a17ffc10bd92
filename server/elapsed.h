// Wall time of a handler, reported in responses as planning_time_ms.
#ifndef OOBLECK_SERVER_ELAPSED_H_
#define OOBLECK_SERVER_ELAPSED_H_

#include <chrono>

namespace oobleck::server {

inline double MillisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_ELAPSED_H_
