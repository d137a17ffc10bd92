# oobleck-planner image. Build:  docker build -t oobleck-planner .
# Run:    docker run --rm -p 50051:50051 oobleck-planner
#
# Stage 1 builds with the same scripts the README and CI use; stage 2 carries only the two
# binaries, the bundled example profiles and the shared libraries they link.

# ---- build ------------------------------------------------------------------------------
FROM debian:12 AS build
WORKDIR /src
# The dependency layer depends on the install script alone, so source edits reuse it.
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh
COPY . .
# The image needs the server and CLI only; tests and benchmarks run in CI.
RUN scripts/build.sh -DOOBLECK_BUILD_TESTS=OFF -DOOBLECK_BUILD_BENCH=OFF

# ---- runtime ----------------------------------------------------------------------------
FROM debian:12-slim AS runtime
# Runtime halves of the -dev packages install-deps.sh installs (apt pulls their own
# dependencies: libgrpc29, libre2-9, libc-ares2, libssl3, libtbbmalloc2, ...).
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libabsl20220623 libtbb12 libglpk40 \
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/bin/oobleck-planner /src/build/bin/oobleck-plan /usr/local/bin/
COPY --from=build /src/examples/profiles /opt/oobleck-planner/profiles
# Fail the image build, not the first start, when a shared library is missing.
RUN ! ldd /usr/local/bin/oobleck-planner /usr/local/bin/oobleck-plan | grep "not found"
RUN groupadd --system --gid 10001 oobleck \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin oobleck
USER 10001:10001

EXPOSE 50051
# No grpc_health_probe is packaged for Debian, so the check is our own CLI: `health` calls
# grpc.health.v1.Health/Check (exempt from --auth_token_file) and exits 0 only on SERVING.
# With --tls_cert, set OOBLECK_PLAN_TLS_CA to a CA file in the container and, unless the
# certificate names 127.0.0.1, OOBLECK_PLAN_TLS_SERVER_NAME to a name it does carry
# (docker run -e ..., or the orchestrator's environment); empty means plaintext.
ENV OOBLECK_PLAN_TLS_CA="" OOBLECK_PLAN_TLS_SERVER_NAME=""
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
  CMD ["oobleck-plan", "--server=127.0.0.1:50051", "--timeout_s=3", "health"]
# 0.0.0.0 inside the container (the binary defaults to 127.0.0.1); publish the port to
# choose who can reach it. Flags after `docker run IMAGE` replace CMD.
ENTRYPOINT ["oobleck-planner"]
CMD ["--address=0.0.0.0:50051", "--profile_dir=/opt/oobleck-planner/profiles"]
