"""Shared pieces of the end-to-end tests: arguments, a real server process, stubs.

The tests run on /usr/bin/python3 (Debian's python3-grpcio). Paths come from ctest as
arguments (see tests/e2e/CMakeLists.txt):
  --server-bin  build/bin/oobleck-planner      --cli-bin  build/bin/oobleck-plan
  --stub-dir    generated planner/health/reflection Python stubs
  --source-dir  the repository root             --example-data  examples/ (clusters, profiles)
"""

import argparse
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import unittest

ARGS = None  # argparse.Namespace, set by main()

STARTUP_TIMEOUT_S = 30
SHUTDOWN_TIMEOUT_S = 10
RPC_TIMEOUT_S = 60


def main():
    """Parses our arguments, makes the stubs importable, and runs unittest on the rest."""
    global ARGS
    parser = argparse.ArgumentParser()
    for flag in ("--server-bin", "--cli-bin", "--stub-dir", "--source-dir", "--example-data"):
        parser.add_argument(flag, required=True)
    ARGS, rest = parser.parse_known_args()
    # Absolute, because tests write files elsewhere (temp cluster files) that name these paths.
    for name, value in vars(ARGS).items():
        setattr(ARGS, name, os.path.abspath(value))
    sys.path.insert(0, ARGS.stub_dir)
    program = unittest.main(module="__main__", argv=[sys.argv[0]] + rest, exit=False,
                            verbosity=2)
    sys.exit(0 if program.result.wasSuccessful() else 1)


def stubs():
    """The generated modules, imported lazily (after main() set sys.path)."""
    import grpc  # noqa: F401  (fails clearly here if python3-grpcio is missing)
    import health_pb2
    import health_pb2_grpc
    import reflection_pb2
    import reflection_pb2_grpc
    from oobleck.planner.v1 import planner_pb2, planner_pb2_grpc
    return argparse.Namespace(planner_pb2=planner_pb2, planner_pb2_grpc=planner_pb2_grpc,
                              health_pb2=health_pb2, health_pb2_grpc=health_pb2_grpc,
                              reflection_pb2=reflection_pb2,
                              reflection_pb2_grpc=reflection_pb2_grpc)


class RunningServer:
    """The real oobleck-planner on a free port (it binds 127.0.0.1:0 and prints
    "listening on HOST:PORT"). Use as a context manager, or call stop() in a finally."""

    def __init__(self, profile_dir=None, extra_args=()):
        self.stderr_file = tempfile.TemporaryFile()
        command = [ARGS.server_bin, "--address", "127.0.0.1:0", *extra_args]
        if profile_dir:
            command += ["--profile_dir", profile_dir]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE,
                                        stderr=self.stderr_file)
        try:
            self.address = self._read_address()
        except BaseException:
            self.stop()
            raise

    def _read_address(self):
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        output = b""
        while time.monotonic() < deadline:
            match = re.search(rb"listening on (\S+:\d+)", output)
            if match:
                return match.group(1).decode()
            if self.process.poll() is not None:
                break
            ready, _, _ = select.select([self.process.stdout], [], [], 0.2)
            if ready:
                chunk = os.read(self.process.stdout.fileno(), 4096)
                if not chunk:
                    break
                output += chunk
        raise RuntimeError(f"server did not report its address within {STARTUP_TIMEOUT_S} s "
                           f"(exit code {self.process.poll()}); stdout: {output!r}; "
                           f"stderr: {self.stderr()!r}")

    def stderr(self):
        self.stderr_file.seek(0)
        return self.stderr_file.read().decode(errors="replace")

    def terminate(self, timeout_s=SHUTDOWN_TIMEOUT_S):
        """SIGTERM and wait; returns the exit code (None if it did not exit in time)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        """Always leaves no process behind."""
        if self.terminate() is None:
            self.process.kill()
            self.process.wait(timeout=SHUTDOWN_TIMEOUT_S)
        self.process.stdout.close()
        self.stderr_file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def wait_until_serving(channel, timeout_s=STARTUP_TIMEOUT_S):
    """Polls grpc.health.v1.Health/Check("") until SERVING; returns the last status."""
    import grpc
    s = stubs()
    health = s.health_pb2_grpc.HealthStub(channel)
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = health.Check(s.health_pb2.HealthCheckRequest(service=""), timeout=2).status
            if last == s.health_pb2.HealthCheckResponse.SERVING:
                return last
        except grpc.RpcError as error:
            last = error.code()
        time.sleep(0.1)
    raise AssertionError(f"server not SERVING within {timeout_s} s (last: {last})")


def example_profiles_dir():
    return os.path.join(ARGS.source_dir, "examples", "profiles")


def run_cli(*args, timeout_s=RPC_TIMEOUT_S):
    """Runs build/bin/oobleck-plan; returns the CompletedProcess (text output)."""
    return subprocess.run([ARGS.cli_bin, *args], capture_output=True, text=True,
                          timeout=timeout_s)


class ExampleServerTestCase(unittest.TestCase):
    """A test class sharing one real server with the bundled example profiles, and a
    temporary directory for the files its tests write (path(), save())."""

    @classmethod
    def setUpClass(cls):
        import grpc
        stubs()
        cls.server = RunningServer(profile_dir=example_profiles_dir())
        try:
            with grpc.insecure_channel(cls.server.address) as channel:
                wait_until_serving(channel)
        except BaseException:
            cls.server.stop()
            raise
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()
        cls.server.stop()

    def path(self, name):
        """A path in the class's temporary directory."""
        return os.path.join(self.tmp.name, name)

    def save(self, name, text):
        """Writes `text` to path(name) and returns that path."""
        with open(self.path(name), "w") as f:
            f.write(text)
        return self.path(name)

    def cli(self, *args, expect_code=0):
        """Runs oobleck-plan against the server; checks its exit code."""
        result = run_cli("--server", self.server.address, *args)
        self.assertEqual(result.returncode, expect_code,
                         f"oobleck-plan {' '.join(args)}\nstdout:\n{result.stdout}\n"
                         f"stderr:\n{result.stderr}")
        return result
