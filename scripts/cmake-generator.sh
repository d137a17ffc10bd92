# Sourced by scripts/build.sh and sanitize-build.sh: Ninja when installed
# (scripts/install-deps.sh installs it). It starts a target's compiles while the libraries it
# links are still being built, which keeps both cores of a small machine busy, and it has no
# per-directory make overhead. A build directory made before keeps its generator: CMake reads
# CMAKE_GENERATOR only when it creates one. Set CMAKE_GENERATOR yourself to choose another.
if [ -z "${CMAKE_GENERATOR:-}" ] && command -v ninja >/dev/null; then
  export CMAKE_GENERATOR=Ninja
fi
