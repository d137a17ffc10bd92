"""Checks the deployment files against the real binaries, so they cannot drift from them.

No container runtime or cluster is needed: the commands the Dockerfile, the Kubernetes
manifests and the compose file would run are read from those files and run here against
build/bin/oobleck-planner and build/bin/oobleck-plan, with container paths mapped to the
source tree and the listening address moved to 127.0.0.1:<free port>.

Runs with the arguments of tests/e2e (whose RunningServer it reuses); stdlib only.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import e2e_support  # noqa: E402  (path set just above)
from e2e_support import RunningServer  # noqa: E402

CLI_TIMEOUT_S = 60


def source_path(*parts):
    return os.path.join(e2e_support.ARGS.source_dir, *parts)


def read_source(*parts):
    with open(source_path(*parts), encoding="utf-8") as f:
        return f.read()


def dockerfile_instructions():
    """(INSTRUCTION, arguments) pairs of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", read_source("Dockerfile"))
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            pairs.append((keyword.upper(), rest.strip()))
    return pairs


def dockerfile_paths():
    """Container path -> host path for everything the runtime stage copies from the build
    stage (which builds the repository at /src into /src/build/bin)."""
    paths = {}
    for keyword, rest in dockerfile_instructions():
        if keyword != "COPY" or not rest.startswith("--from=build"):
            continue
        *sources, destination = rest.split()[1:]
        for src in sources:
            relative = os.path.relpath(src, "/src")
            host = (os.path.join(os.path.dirname(e2e_support.ARGS.server_bin),
                                 os.path.basename(src))
                    if relative.startswith("build/bin/") else source_path(relative))
            target = (os.path.join(destination, os.path.basename(src))
                      if destination.endswith("/") else destination)
            paths[target] = host
    return paths


def dockerfile_env():
    """NAME -> value of the Dockerfile's ENV instructions."""
    env = {}
    for keyword, rest in dockerfile_instructions():
        if keyword == "ENV":
            for item in shlex.split(rest):
                name, _, value = item.partition("=")
                env[name] = value
    return env


def make_certificate(directory, dns_name):
    """A self-signed certificate for `dns_name` only (not for 127.0.0.1); returns the paths
    of the certificate and its key."""
    cert = os.path.join(directory, "cert.pem")
    key = os.path.join(directory, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", f"/CN={dns_name}", "-addext", f"subjectAltName=DNS:{dns_name}",
                    "-keyout", key, "-out", cert],
                   check=True, capture_output=True, timeout=CLI_TIMEOUT_S)
    return cert, key


def flag_value(args, name):
    values = [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]
    return values[-1] if values else None


def without_flags(args, *names):
    return [a for a in args if not any(a.startswith(f"--{n}=") for n in names)]


def yaml_list_flags(text):
    """Every `- --name=value` list item of a YAML file (the planner's argument lists)."""
    return re.findall(r"^\s*- (--[a-z_]+=\S+)\s*$", text, flags=re.MULTILINE)


def yaml_block_scripts(text):
    """The bodies of the `- |` literal blocks of a YAML file (the shell scripts)."""
    scripts = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^\s*- \|\s*$", line):
            body = []
            for nxt in lines[i + 1:]:
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= len(line) - len(line.lstrip()):
                    break
                body.append(nxt)
            scripts.append("\n".join(body))
    return scripts


def count_profile_dirs(root):
    """<model>/<gpu_type> directories holding an mb<m>.json, as the server loads them."""
    return sum(1 for model in os.listdir(root) for gpu in os.listdir(os.path.join(root, model))
               if any(re.fullmatch(r"mb\d+\.json", f)
                      for f in os.listdir(os.path.join(root, model, gpu))))


def run(command, address=None, env=None):
    if address:
        command = [a.replace("planner:50051", address) for a in command]
    return subprocess.run(command, capture_output=True, text=True, timeout=CLI_TIMEOUT_S,
                          env=env)


class DockerfileTest(unittest.TestCase):

    def setUp(self):
        self.instructions = dict(dockerfile_instructions())  # last of each kind
        self.paths = dockerfile_paths()
        self.port = int(self.instructions["EXPOSE"])
        self.cmd = json.loads(self.instructions["CMD"])
        self.entrypoint = json.loads(self.instructions["ENTRYPOINT"])

    def host(self, container_path):
        self.assertIn(container_path, self.paths, "not copied into the runtime image")
        return self.paths[container_path]

    def health_check(self, address):
        """The HEALTHCHECK command, run here against `address`."""
        check = json.loads(self.instructions["HEALTHCHECK"].split(" CMD ", 1)[1])
        command = [self.host(os.path.join("/usr/local/bin", check[0]))] + [
            f"--server={address}" if a.startswith("--server=") else a for a in check[1:]]
        self.assertIn(f"--server={address}", command)
        return command

    def container_env(self, **overrides):
        """This process's environment with the image's ENV defaults, then `overrides`."""
        return {**os.environ, **dockerfile_env(), **overrides}

    def test_runs_unprivileged_on_all_interfaces_of_the_exposed_port(self):
        self.assertRegex(self.instructions["USER"], r"^[1-9]\d*(:\d+)?$")
        self.assertEqual(flag_value(self.cmd, "address"), f"0.0.0.0:{self.port}")

    def test_command_serves_the_bundled_profiles_and_health_check_tracks_the_server(self):
        server_bin = self.host(os.path.join("/usr/local/bin", self.entrypoint[0]))
        self.assertEqual(server_bin, e2e_support.ARGS.server_bin)
        profile_dir = self.host(flag_value(self.cmd, "profile_dir"))

        server = RunningServer(profile_dir=profile_dir,
                               extra_args=without_flags(self.cmd, "address", "profile_dir"))
        try:
            self.assertIn(f"loaded {count_profile_dirs(profile_dir)} profile(s)",
                          server.stderr())
            self.assertNotIn("skipped profile", server.stderr())
            check_command = self.health_check(server.address)
            healthy = run(check_command, env=self.container_env())
            self.assertEqual(healthy.returncode, 0, healthy.stderr)
            self.assertEqual(healthy.stdout, "SERVING\n")
        finally:
            server.stop()
        unhealthy = run(check_command, env=self.container_env())
        self.assertNotEqual(unhealthy.returncode, 0, "health check passes with no server")

    def test_health_check_asks_the_health_service_over_tls_with_a_token(self):
        # The variables the image declares are the ones the CLI reads.
        cli_help = run([self.health_check("x:1")[0], "--help"]).stdout
        declared = {name for name in dockerfile_env() if name.startswith("OOBLECK_PLAN_")}
        self.assertEqual(declared, {"OOBLECK_PLAN_TLS_CA", "OOBLECK_PLAN_TLS_SERVER_NAME"})
        for name in declared:
            self.assertIn(name, cli_help)
        self.assertEqual(self.health_check("x:1")[-1], "health")

        profile_dir = self.host(flag_value(self.cmd, "profile_dir"))
        with tempfile.TemporaryDirectory() as tmp:
            # As in a cluster: the certificate names the service, not the loopback address
            # the check connects to; every call but health needs the token.
            cert, key = make_certificate(tmp, "planner.internal")
            token = os.path.join(tmp, "token")
            with open(token, "w", encoding="utf-8") as f:
                f.write("s3cret-token\n")
            tls_args = ["--tls_cert=" + cert, "--tls_key=" + key, "--auth_token_file=" + token]
            with RunningServer(profile_dir=profile_dir,
                               extra_args=without_flags(self.cmd, "address", "profile_dir")
                               + tls_args) as server:
                check_command = self.health_check(server.address)
                healthy = run(check_command, env=self.container_env(
                    OOBLECK_PLAN_TLS_CA=cert, OOBLECK_PLAN_TLS_SERVER_NAME="planner.internal"))
                self.assertEqual(healthy.returncode, 0, healthy.stderr)
                self.assertEqual(healthy.stdout, "SERVING\n")
                # The image's defaults (plaintext) cannot pass against a TLS server, and
                # neither can TLS that checks the certificate against 127.0.0.1.
                plaintext = run(check_command, env=self.container_env())
                self.assertEqual(plaintext.returncode, 1, plaintext.stderr)
                self.assertIn("error: UNAVAILABLE: health check of", plaintext.stderr)
                wrong_name = run(check_command,
                                 env=self.container_env(OOBLECK_PLAN_TLS_CA=cert))
                self.assertEqual(wrong_name.returncode, 1, wrong_name.stderr)


class KubernetesTest(unittest.TestCase):

    def setUp(self):
        self.text = read_source("deploy", "kubernetes", "deployment.yaml")
        self.args = yaml_list_flags(self.text)
        self.port = int(dict(dockerfile_instructions())["EXPOSE"])

    def test_ports_and_probes_agree(self):
        self.assertEqual(flag_value(self.args, "address"), f"0.0.0.0:{self.port}")
        self.assertEqual(re.findall(r"containerPort: (\d+)", self.text), [str(self.port)])
        probes = re.findall(r"(startup|readiness|liveness)Probe:\s*\n\s*grpc: \{port: (\d+)\}",
                            self.text)
        self.assertEqual(sorted(p[0] for p in probes), ["liveness", "readiness", "startup"])
        self.assertTrue(all(int(p[1]) == self.port for p in probes), probes)
        service = read_source("deploy", "kubernetes", "service.yaml")
        self.assertIn(f"port: {self.port}", service)
        self.assertIn("targetPort: grpc", service)
        self.assertIn("name: grpc", self.text)

    def test_mounts_are_where_the_flags_and_the_unpack_script_look(self):
        mounts = re.findall(r"mountPath: (\S+)", self.text)
        self.assertIn(flag_value(self.args, "profile_dir"), mounts)
        # The script below is run with exactly these two directories replaced.
        self.assertIn("/profiles", mounts)
        self.assertIn("/config", mounts)

    def test_unpacked_config_map_profiles_are_served_with_the_manifest_flags(self):
        [script] = yaml_block_scripts(self.text)
        with tempfile.TemporaryDirectory() as tmp:
            config = os.path.join(tmp, "config")
            unpacked = os.path.join(tmp, "profiles")
            os.makedirs(config)
            os.makedirs(unpacked)
            # A second GPU type delivered through the ConfigMap, flat keys as documented.
            bundled = source_path("examples", "profiles", "gpt2-xl", "rtx4090")
            for name in os.listdir(bundled):
                with open(os.path.join(bundled, name), encoding="utf-8") as src, \
                        open(os.path.join(config, f"gpt2-xl__a100__{name}"), "w",
                             encoding="utf-8") as dst:
                    dst.write(src.read())
            bundled_root = dict(dockerfile_paths()).get("/opt/oobleck-planner/profiles")
            self.assertIsNotNone(bundled_root, "the image no longer bundles profiles there")
            local = (script.replace("/opt/oobleck-planner/profiles", "\0")
                     .replace("/profiles", unpacked).replace("/config", config)
                     .replace("\0", bundled_root))
            unpack = subprocess.run(["/bin/sh", "-ec", local], capture_output=True, text=True,
                                    timeout=CLI_TIMEOUT_S)
            self.assertEqual(unpack.returncode, 0, unpack.stderr)
            self.assertTrue(os.path.isfile(os.path.join(unpacked, "gpt2-xl", "a100", "mb1.json")))
            expected = count_profile_dirs(bundled_root) + 1

            with RunningServer(profile_dir=unpacked,
                               extra_args=without_flags(self.args, "address",
                                                        "profile_dir")) as server:
                self.assertIn(f"loaded {expected} profile(s)", server.stderr())
                listed = run([e2e_support.ARGS.cli_bin, f"--server={server.address}",
                              "list-profiles"])
                self.assertEqual(listed.returncode, 0, listed.stderr)
                self.assertIn("a100", listed.stdout)


class ComposeTest(unittest.TestCase):

    def setUp(self):
        self.text = read_source("deploy", "compose.yaml")

    def test_trainer_commands_succeed_against_the_planner_command(self):
        planner_args = yaml_list_flags(self.text)
        port = int(dict(dockerfile_instructions())["EXPOSE"])
        self.assertEqual(flag_value(planner_args, "address"), f"0.0.0.0:{port}")
        self.assertIn(f":{port}:{port}\"", self.text)
        profile_dir = dockerfile_paths()[flag_value(planner_args, "profile_dir")]
        [script] = yaml_block_scripts(self.text)
        commands = [shlex.split(line) for line in
                    re.sub(r"\\\n\s*", " ", script).splitlines()
                    if line.strip().startswith("oobleck-plan ")]
        self.assertGreaterEqual(len(commands), 2)
        with RunningServer(profile_dir=profile_dir,
                           extra_args=without_flags(planner_args, "address",
                                                    "profile_dir")) as server:
            for command in commands:
                done = run([e2e_support.ARGS.cli_bin] + command[1:], server.address)
                self.assertEqual(done.returncode, 0, f"{command}: {done.stderr}")


if __name__ == "__main__":
    e2e_support.main()
