"""End to end: `oobleck-plan health` and the progress of `oobleck-plan templates`.

- health against the real server (plaintext, and TLS with a token through flags and the
  OOBLECK_PLAN_* variables), against a stand-in health service that answers NOT_SERVING,
  and with nothing listening;
- templates --progress (PlanTemplatesStream) against a server sending every update
  (--progress_interval_ms=0): progress on stderr, the same stdout as without it, and the
  redrawn bar when stderr is a terminal.

Run by ctest (e2e_health_progress_cli) with /usr/bin/python3.
"""

import json
import os
import pty
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest
from concurrent import futures

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_support  # noqa: E402
from e2e_support import RPC_TIMEOUT_S, RunningServer, run_cli, stubs, wait_until_serving  # noqa: E402

TOKEN = "health-and-progress-token"


def templates_args(microbatches):
    """GPT-2 XL on 1-4 nodes of 2 GPUs; each micro-batch count is a fresh cache key, so a
    test that wants a search uses its own."""
    return ["templates", "--model", "gpt2-xl", "--nodes", "1-4", "--cost-model", "1f1b",
            "--microbatches", str(microbatches), "--gpus-per-node", "2"]

PROGRESS_LINE = re.compile(r"^(guessed exact|incumbent|exact) search \(layers\) +"
                           r"\[[#-]{30}\] +(\d+)/50  \d+\.\d s$")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def without_call_details(output):
    """templates --json output without what depends on the call (time, cache hits)."""
    data = json.loads(output)
    data.pop("planning_time_ms")
    for result in data["results"]:
        result.pop("cache_hit")
    return data


class HealthTest(e2e_support.ExampleServerTestCase):

    def test_serving_server(self):
        self.assertEqual(self.cli("health").stdout, "SERVING\n")
        self.assertEqual(json.loads(self.cli("health", "--json").stdout), {"status": "SERVING"})

    def test_nothing_listening_is_an_error(self):
        address = f"127.0.0.1:{free_port()}"
        result = run_cli("--server", address, "--timeout_s", "5", "health")
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertEqual(result.stdout, "")
        self.assertIn(f"error: UNAVAILABLE: health check of {address} failed:", result.stderr)

    def test_not_serving_is_printed_and_an_error(self):
        import grpc
        s = stubs()

        class NotServing(s.health_pb2_grpc.HealthServicer):
            def Check(self, request, context):
                return s.health_pb2.HealthCheckResponse(
                    status=s.health_pb2.HealthCheckResponse.NOT_SERVING)

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        s.health_pb2_grpc.add_HealthServicer_to_server(NotServing(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        try:
            result = run_cli("--server", f"127.0.0.1:{port}", "health")
        finally:
            server.stop(None)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertEqual(result.stdout, "NOT_SERVING\n")
        self.assertIn(f"error: UNAVAILABLE: the server at 127.0.0.1:{port} is NOT_SERVING, "
                      "not SERVING", result.stderr)

    def test_usage_errors(self):
        wrong_flag = self.cli("health", "--model", "gpt2-xl", expect_code=2)
        self.assertIn("flag --model does not apply to health", wrong_flag.stderr)
        name_without_ca = self.cli("health", "--tls-server-name", "planner.internal",
                                   expect_code=2)
        self.assertIn("--tls-server-name (or OOBLECK_PLAN_TLS_SERVER_NAME) needs --tls-ca",
                      name_without_ca.stderr)

    def test_named_planner_service_is_serving(self):
        # What the README's grpcurl example asks; the CLI asks about the server as a whole.
        import grpc
        s = stubs()
        with grpc.insecure_channel(self.server.address) as channel:
            response = s.health_pb2_grpc.HealthStub(channel).Check(
                s.health_pb2.HealthCheckRequest(service="oobleck.planner.v1.Planner"),
                timeout=RPC_TIMEOUT_S)
        self.assertEqual(response.status, s.health_pb2.HealthCheckResponse.SERVING)


class HealthOverTlsTest(unittest.TestCase):
    """A server whose certificate names planner.internal only, with a token."""

    @classmethod
    def setUpClass(cls):
        import grpc
        cls.dir = tempfile.mkdtemp(prefix="oobleck-health-tls-")
        cls.cert = os.path.join(cls.dir, "cert.pem")
        key = os.path.join(cls.dir, "key.pem")
        token_file = os.path.join(cls.dir, "token")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=planner.internal",
                        "-addext", "subjectAltName=DNS:planner.internal",
                        "-keyout", key, "-out", cls.cert],
                       check=True, capture_output=True, timeout=60)
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        cls.server = RunningServer(
            profile_dir=e2e_support.example_profiles_dir(),
            extra_args=["--tls_cert", cls.cert, "--tls_key", key,
                        "--auth_token_file", token_file])
        try:
            with open(cls.cert, "rb") as f:
                credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
            with grpc.secure_channel(cls.server.address, credentials, options=(
                    ("grpc.ssl_target_name_override", "planner.internal"),)) as channel:
                wait_until_serving(channel)
        except BaseException:
            cls.server.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def health(self, *args, **env):
        clean = {k: v for k, v in os.environ.items() if not k.startswith("OOBLECK_PLAN_")}
        return subprocess.run([e2e_support.ARGS.cli_bin, "--server", self.server.address,
                               *args, "health"], capture_output=True, text=True,
                              timeout=RPC_TIMEOUT_S, env={**clean, **env})

    def test_flags_need_no_token(self):
        result = self.health("--tls-ca", self.cert, "--tls-server-name", "planner.internal")
        self.assertEqual((result.returncode, result.stdout), (0, "SERVING\n"), result.stderr)

    def test_environment_stands_in_for_the_flags(self):
        result = self.health(OOBLECK_PLAN_TLS_CA=self.cert,
                             OOBLECK_PLAN_TLS_SERVER_NAME="planner.internal")
        self.assertEqual((result.returncode, result.stdout), (0, "SERVING\n"), result.stderr)
        # A flag wins over its variable.
        overridden = self.health("--tls-server-name", "elsewhere.internal",
                                 OOBLECK_PLAN_TLS_CA=self.cert,
                                 OOBLECK_PLAN_TLS_SERVER_NAME="planner.internal")
        self.assertEqual(overridden.returncode, 1)
        # Empty variables (the image's defaults) mean plaintext.
        plaintext = self.health(OOBLECK_PLAN_TLS_CA="", OOBLECK_PLAN_TLS_SERVER_NAME="")
        self.assertEqual(plaintext.returncode, 1)
        self.assertIn("error: UNAVAILABLE: health check of", plaintext.stderr)

    def test_certificate_is_checked_against_the_name(self):
        result = self.health("--tls-ca", self.cert)  # checks 127.0.0.1
        self.assertEqual(result.returncode, 1)
        self.assertIn("error: UNAVAILABLE: health check of", result.stderr)
        self.assertEqual(result.stdout, "")

    def test_templates_with_progress_over_tls_with_the_token(self):
        token_file = os.path.join(self.dir, "token")
        result = subprocess.run(
            [e2e_support.ARGS.cli_bin, "--server", self.server.address, "--tls-ca", self.cert,
             "--tls-server-name", "planner.internal", "--auth-token-file", token_file,
             *templates_args(8), "--progress", "--json"],
            capture_output=True, text=True, timeout=RPC_TIMEOUT_S)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(len(json.loads(result.stdout)["results"]), 4)


class TemplatesProgressTest(unittest.TestCase):
    """A server that sends an update for every layer step."""

    @classmethod
    def setUpClass(cls):
        cls.server = RunningServer(profile_dir=e2e_support.example_profiles_dir(),
                                   extra_args=["--progress_interval_ms=0"])

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def templates(self, microbatches, *args):
        result = run_cli("--server", self.server.address, *templates_args(microbatches), *args)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result

    def test_progress_on_stderr_and_the_same_answer_on_stdout(self):
        with_progress = self.templates(10, "--progress", "--json")
        lines = with_progress.stderr.splitlines()
        self.assertTrue(lines, "no progress shown")
        for line in lines:
            self.assertRegex(line, PROGRESS_LINE)
        # 50 layers: the guessed exact rounds first; they settle every mix or leave some
        # to the incumbent and exact passes.
        self.assertRegex(lines[0], r"^guessed exact search \(layers\) +\[-+\]  1/50 ")
        self.assertRegex(lines[-1], r"^(guessed )?exact search \(layers\) +\[#+\] 50/50 ")

        # The unary call (no progress asked for, stderr not a terminal) answers the same.
        plain = self.templates(10, "--json")
        self.assertEqual(plain.stderr, "")
        self.assertEqual(without_call_details(with_progress.stdout),
                         without_call_details(plain.stdout))
        self.assertTrue(all(r["cache_hit"] for r in json.loads(plain.stdout)["results"]))

    def test_progress_false_shows_none(self):
        result = self.templates(11, "--progress=false")
        self.assertEqual(result.stderr, "")
        self.assertIn("4 mixes, 4 feasible", result.stdout)

    def test_terminal_gets_a_bar_redrawn_in_place_and_erased(self):
        primary, secondary = pty.openpty()
        try:
            process = subprocess.Popen(
                [e2e_support.ARGS.cli_bin, "--server", self.server.address, *templates_args(12)],
                stdout=subprocess.PIPE, stderr=secondary)
            os.close(secondary)
            secondary = None
            terminal = b""
            while True:
                try:
                    chunk = os.read(primary, 65536)
                except OSError:  # EIO: the CLI closed the terminal
                    break
                if not chunk:
                    break
                terminal += chunk
            stdout, _ = process.communicate(timeout=RPC_TIMEOUT_S)
        finally:
            os.close(primary)
            if secondary is not None:
                os.close(secondary)
        self.assertEqual(process.returncode, 0, terminal)
        self.assertIn(b"4 mixes, 4 feasible", stdout)
        text = terminal.decode()
        self.assertIn("\r\x1b[K", text)
        self.assertNotIn("\n", text, "the bar stays on one line")
        self.assertTrue(text.endswith("\r\x1b[K"), "the bar is erased at the end")
        updates = [u for u in text.split("\r\x1b[K") if u]
        self.assertTrue(updates)
        for update in updates:
            self.assertRegex(update, PROGRESS_LINE)


if __name__ == "__main__":
    e2e_support.main()
