"""Checks the deployment files against the real binaries, so they cannot drift from them.

No container runtime or cluster is needed: the commands the Dockerfile, the Kubernetes
manifests (single and replicated) and the compose files would run are read from those files and run here against
build/bin/oobleck-planner and build/bin/oobleck-plan, with container paths mapped to the
source tree and the listening address moved to 127.0.0.1:<free port>.

Runs with the arguments of tests/e2e (whose RunningServer and EtcdCluster it reuses); stdlib
only, plus Debian's etcd-server for the replicated files.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
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


def yaml_documents(text):
    """The documents of a multi-document YAML file, as text."""
    return [d for d in re.split(r"^---\s*$", text, flags=re.MULTILINE) if "kind:" in d]


def kind_of(document):
    return re.search(r"^kind: (\S+)", document, flags=re.MULTILINE).group(1)


def wait_serving(server, timeout_s=20):
    """Polls `oobleck-plan health` (a replica is NOT_SERVING until it read etcd)."""
    deadline = time.monotonic() + timeout_s
    while True:
        health = run([e2e_support.ARGS.cli_bin, f"--server={server.address}", "health"])
        if health.stdout == "SERVING\n":
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not SERVING within {timeout_s} s: {health.stdout} "
                                 f"{health.stderr}; server log: {server.stderr()}")
        time.sleep(0.1)


def etcd_cluster():
    from etcd_cluster import EtcdCluster  # tests/e2e; needs Debian's etcd-server
    return EtcdCluster(1)


class ReplicatedKubernetesTest(unittest.TestCase):
    """deploy/kubernetes/replicated: 3-member etcd, >= 2 planner replicas, PDBs, a headless
    Service for client-side balancing, gRPC probes; the planner's flags run for real."""

    def setUp(self):
        self.planner = read_source("deploy", "kubernetes", "replicated", "planner.yaml")
        self.etcd = read_source("deploy", "kubernetes", "replicated", "etcd.yaml")
        self.docs = {}
        for doc in yaml_documents(self.planner) + yaml_documents(self.etcd):
            name = re.search(r"^  name: (\S+)", doc, flags=re.MULTILINE).group(1)
            self.docs[(kind_of(doc), name)] = doc
        self.args = yaml_list_flags(self.planner)

    def test_kustomization_lists_both_files(self):
        kustomization = read_source("deploy", "kubernetes", "replicated", "kustomization.yaml")
        self.assertEqual(re.findall(r"^  - (\S+)$", kustomization, flags=re.MULTILINE),
                         ["etcd.yaml", "planner.yaml"])

    def test_replicas_budgets_services_and_probes_agree(self):
        deployment = self.docs[("Deployment", "oobleck-planner-replicated")]
        self.assertGreaterEqual(int(re.search(r"replicas: (\d+)", deployment).group(1)), 2)
        label = "app.kubernetes.io/name: oobleck-planner-replicated"
        self.assertIn(label, deployment)
        budget = self.docs[("PodDisruptionBudget", "oobleck-planner-replicated")]
        self.assertIn(label, budget)
        self.assertIn("maxUnavailable: 1", budget)
        service = self.docs[("Service", "oobleck-planner-replicas")]
        self.assertIn("clusterIP: None", service)
        self.assertIn(label, service)
        probes = re.findall(r"(startup|readiness|liveness)Probe:\s*\n\s*grpc: \{port: (\d+)\}",
                            deployment)
        self.assertEqual(sorted(p[0] for p in probes), ["liveness", "readiness", "startup"])
        port = flag_value(self.args, "address").rsplit(":", 1)[1]
        self.assertTrue(all(p[1] == port for p in probes), probes)
        self.assertIn(f"dns:///oobleck-planner-replicas:{port}", self.planner)

    def test_etcd_members_are_the_planner_endpoints(self):
        stateful = self.docs[("StatefulSet", "oobleck-etcd")]
        self.assertEqual(re.search(r"replicas: (\d+)", stateful).group(1), "3")
        members = re.findall(r"(oobleck-etcd-\d)=http://(oobleck-etcd-\d)\.oobleck-etcd:2380",
                             stateful)
        self.assertEqual([m[0] for m in members], ["oobleck-etcd-0", "oobleck-etcd-1",
                                                   "oobleck-etcd-2"])
        self.assertTrue(all(a == b for a, b in members))
        endpoints = flag_value(self.args, "etcd_endpoints").split(",")
        self.assertEqual(endpoints, [f"{m[0]}.oobleck-etcd:2379" for m in members])
        self.assertIn("clusterIP: None", self.docs[("Service", "oobleck-etcd")])
        self.assertIn("maxUnavailable: 1", self.docs[("PodDisruptionBudget", "oobleck-etcd")])

    def test_two_replicas_with_the_manifest_flags_share_an_upload(self):
        cluster = etcd_cluster()
        try:
            args = without_flags(self.args, "address", "profile_dir", "etcd_endpoints")
            args.append(f"--etcd_endpoints={cluster.endpoints}")
            profile_dir = dockerfile_paths()[flag_value(self.args, "profile_dir")]
            with RunningServer(profile_dir=profile_dir, extra_args=args) as a, \
                    RunningServer(profile_dir=profile_dir, extra_args=args) as b:
                both = f"{a.address},{b.address}"
                for server in (a, b):
                    wait_serving(server)
                loaded = run([e2e_support.ARGS.cli_bin, f"--server={a.address}",
                              "load-profile", "--model=uploaded", "--gpu-type=rtx4090",
                              source_path("examples", "profiles", "gpt2-xl", "rtx4090")])
                self.assertEqual(loaded.returncode, 0, loaded.stderr)
                deadline = time.monotonic() + 2  # the watch delivers it in milliseconds
                while True:
                    listed = run([e2e_support.ARGS.cli_bin, f"--server=dns:///{b.address}",
                                  "list-profiles"])
                    if "uploaded" in listed.stdout or time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
                self.assertIn("uploaded", listed.stdout, listed.stderr)
                stats = run([e2e_support.ARGS.cli_bin, f"--server={both}", "stats"])
                self.assertEqual(stats.returncode, 0, stats.stderr)
        finally:
            cluster.stop()


class ReplicatedComposeTest(unittest.TestCase):

    def test_trainer_commands_succeed_against_the_replicated_planner_command(self):
        text = read_source("deploy", "compose-replicated.yaml")
        planner_args = yaml_list_flags(text)
        self.assertEqual(flag_value(planner_args, "etcd_endpoints"),
                         "etcd0:2379,etcd1:2379,etcd2:2379")
        for member in ("etcd0", "etcd1", "etcd2"):
            self.assertIn(f"{member}=http://{member}:2380", text)
            self.assertIn(f"  {member}:\n", text)
        self.assertGreaterEqual(int(re.search(r"replicas: (\d+)", text).group(1)), 2)
        scripts = yaml_block_scripts(text)
        [trainer] = [s for s in scripts if "oobleck-plan " in s]
        commands = [shlex.split(line) for line in
                    re.sub(r"\\\n\s*", " ", trainer).splitlines()
                    if line.strip().startswith("oobleck-plan ")]
        self.assertTrue(all("--server=dns:///planner:50051" in c for c in commands), commands)
        cluster = etcd_cluster()
        try:
            args = without_flags(planner_args, "address", "profile_dir", "etcd_endpoints")
            args.append(f"--etcd_endpoints={cluster.endpoints}")
            profile_dir = dockerfile_paths()[flag_value(planner_args, "profile_dir")]
            with RunningServer(profile_dir=profile_dir, extra_args=args) as server:
                wait_serving(server)
                for command in commands:
                    done = run([e2e_support.ARGS.cli_bin] + command[1:], server.address)
                    self.assertEqual(done.returncode, 0, f"{command}: {done.stderr}")
        finally:
            cluster.stop()


if __name__ == "__main__":
    e2e_support.main()
