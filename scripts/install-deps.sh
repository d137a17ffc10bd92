#!/usr/bin/env bash
# Installs every build, test and benchmark dependency of oobleck-planner from Debian 12
# packages. Used verbatim by the README, .ci/run and the Dockerfile, so all three agree.
# librsvg2-bin (rsvg-convert), libpng-dev and python3-pil let the tests render the CLI's
# SVG pictures and read the pixels back. gnuplot-nox draws bench/README.md's fleet-scale
# plot (bench/plot_fleet.gp). universal-ctags parses core/ for the function-length test
# (scripts/check-function-length.py); clang-format-14 checks the C++ layout
# (scripts/check-format.sh). python3-venv and python3-pip let the tests and users
# `pip install ./client/python` into a virtual environment (client/python/README.md).
# python3-pytest, -pytest-mock and -pytest-order run Oobleck's own planning tests against us
# (scripts/run-oobleck-tests.sh; its test files use pytest fixtures, mocker and order marks).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libtbb-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-grpcio python3-protobuf grpc-proto python3-venv python3-pip
  openssl prometheus-cpp-dev
  etcd-server
  librsvg2-bin libpng-dev python3-pil
  python3-pytest python3-pytest-mock python3-pytest-order
  libglpk-dev
  gnuplot-nox
  universal-ctags
  clang-format-14
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
