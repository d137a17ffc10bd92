"""End to end: `pip install ./client/python` into a fresh virtual environment, then the
installed `oobleck_planner` package against the real oobleck-planner binary.

The environment is made as client/python/README.md says: Debian's /usr/bin/python3 -m venv
--system-site-packages (so python3-grpcio and python3-protobuf are seen) and pip with
--no-build-isolation (no package index here). The package is copied to a temporary
directory first, so the in-tree build leaves nothing in the checkout. Run by ctest
(e2e_python_package) with /usr/bin/python3.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_support  # noqa: E402

PIP_TIMEOUT_S = 240

# Runs inside the venv: only the installed package, never the checkout, is importable.
CLIENT = textwrap.dedent("""
    import os, sys
    import oobleck_planner
    from oobleck_planner.health import health_pb2
    from oobleck_planner.v1 import planner_pb2
    assert "site-packages" in oobleck_planner.__file__, oobleck_planner.__file__
    with oobleck_planner.connect() as channel:   # address from OOBLECK_PLANNER_ADDRESS
        health = oobleck_planner.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service="oobleck.planner.v1.Planner"), timeout=30)
        print("health", health_pb2.HealthCheckResponse.ServingStatus.Name(health.status))
        listed = oobleck_planner.PlannerStub(channel).ListProfiles(
            planner_pb2.ListProfilesRequest(), timeout=30)
        for p in listed.profiles:
            print("profile", p.model, p.gpu_type, p.num_layers)
    # The drop-in for Oobleck's planner modules ships in the package too (issue 26).
    from oobleck_planner.oobleck import pipeline_template as pt
    layers = [pt.LayerExecutionResult(i, 1.0, 2.0, {}, {1: 0.1}, (1, 1)) for i in range(3)]
    templates = pt.PipelineTemplateGenerator().create_pipeline_templates(
        pt.LayerExecutionResults(layers), (1, 3), 1)
    print("dropin templates", [t._num_nodes for t in templates])
""")


class PythonPackageTest(e2e_support.ExampleServerTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.work = tempfile.TemporaryDirectory()
        source = os.path.join(cls.work.name, "python")
        shutil.copytree(os.path.join(e2e_support.ARGS.source_dir, "client", "python"), source,
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        cls.venv = os.path.join(cls.work.name, "venv")
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", cls.venv],
                       check=True, capture_output=True, timeout=PIP_TIMEOUT_S)
        cls.pip = subprocess.run(
            [os.path.join(cls.venv, "bin", "pip"), "install", "--no-build-isolation",
             "--no-index", source], capture_output=True, text=True, timeout=PIP_TIMEOUT_S)

    @classmethod
    def tearDownClass(cls):
        cls.work.cleanup()
        super().tearDownClass()

    def test_installs_offline_and_calls_health_and_list_profiles(self):
        self.assertEqual(self.pip.returncode, 0,
                         f"pip install failed\nstdout:\n{self.pip.stdout}\n"
                         f"stderr:\n{self.pip.stderr}")
        environment = dict(os.environ, OOBLECK_PLANNER_ADDRESS=self.server.address)
        environment.pop("PYTHONPATH", None)
        result = subprocess.run([os.path.join(self.venv, "bin", "python"), "-c", CLIENT],
                                capture_output=True, text=True, env=environment,
                                cwd=self.work.name, timeout=e2e_support.RPC_TIMEOUT_S)
        self.assertEqual(result.returncode, 0,
                         f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
        self.assertIn("health SERVING", result.stdout)
        self.assertIn("profile gpt2-xl rtx4090 50", result.stdout)
        self.assertIn("dropin templates [1, 2, 3]", result.stdout)

    def test_token_without_tls_is_refused_before_any_call(self):
        environment = dict(os.environ, OOBLECK_PLAN_AUTH_TOKEN_FILE="/dev/null")
        environment.pop("OOBLECK_PLAN_TLS_CA", None)
        result = subprocess.run(
            [os.path.join(self.venv, "bin", "python"), "-c", "import oobleck_planner; "
             "oobleck_planner.connect()"], capture_output=True, text=True, env=environment,
            cwd=self.work.name, timeout=e2e_support.RPC_TIMEOUT_S)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("only sent over TLS", result.stderr)


if __name__ == "__main__":
    e2e_support.main()
