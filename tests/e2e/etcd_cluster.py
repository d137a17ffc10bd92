"""A real etcd cluster for the replication tests: Debian's etcd-server binary, every
member on its own loopback ports, data in a temporary directory, always killed at the end.

Members can be killed (SIGKILL) and restarted with their data, to take the quorum away and
give it back. Timings are shortened (heartbeat 50 ms, election 500 ms) so that a lost
leader is replaced in about a second.
"""

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

ETCD_BIN = shutil.which("etcd") or "/usr/bin/etcd"
START_TIMEOUT_S = 30


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EtcdCluster:
    def __init__(self, members=3):
        self.dir = tempfile.mkdtemp(prefix="oobleck-etcd-")
        self.client_ports = [free_port() for _ in range(members)]
        self.peer_ports = [free_port() for _ in range(members)]
        self.processes = [None] * members
        self.logs = [None] * members
        self.initial_cluster = ",".join(
            f"m{i}=http://127.0.0.1:{p}" for i, p in enumerate(self.peer_ports))
        try:
            for i in range(members):
                self.start(i)
            self.wait_healthy(range(members))
        except BaseException:
            self.stop()
            raise

    @property
    def endpoints(self):
        return ",".join(f"127.0.0.1:{p}" for p in self.client_ports)

    def start(self, i):
        client = f"http://127.0.0.1:{self.client_ports[i]}"
        peer = f"http://127.0.0.1:{self.peer_ports[i]}"
        if self.logs[i] is None:
            self.logs[i] = open(os.path.join(self.dir, f"m{i}.log"), "ab")
        self.processes[i] = subprocess.Popen(
            [ETCD_BIN, "--name", f"m{i}", "--data-dir", os.path.join(self.dir, f"m{i}"),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", self.initial_cluster, "--initial-cluster-state", "new",
             "--initial-cluster-token", os.path.basename(self.dir),
             "--heartbeat-interval", "50", "--election-timeout", "500",
             "--logger", "zap", "--log-level", "warn"],
            stdout=self.logs[i], stderr=self.logs[i])

    def kill(self, i):
        """kill -9 of member i."""
        process = self.processes[i]
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=10)
        self.processes[i] = None

    def healthy(self, i):
        """True when member i answers /health with a leader (it is part of a quorum)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.client_ports[i]}/health",
                                        timeout=1) as response:
                return json.load(response).get("health") == "true"
        except (OSError, ValueError):
            return False

    def wait_healthy(self, members, timeout_s=START_TIMEOUT_S):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(self.healthy(i) for i in members):
                return
            time.sleep(0.1)
        raise RuntimeError(f"etcd members {list(members)} not healthy within {timeout_s} s; "
                           f"logs in {self.dir}: {self.log_tail()}")

    def _gateway(self, path, body):
        """etcd's JSON gateway (bytes fields base64) on the first healthy member."""
        data = json.dumps({k: base64.b64encode(v.encode()).decode() for k, v in body.items()})
        for i in range(len(self.processes)):
            if self.processes[i] is None:
                continue
            request = urllib.request.Request(
                f"http://127.0.0.1:{self.client_ports[i]}{path}", data=data.encode(),
                headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    return json.load(response)
            except OSError:
                continue
        raise RuntimeError(f"no etcd member answered {path}")

    def put(self, key, value):
        """Writes a raw value, as an operator with etcdctl would."""
        return self._gateway("/v3/kv/put", {"key": key, "value": value})

    def delete(self, key):
        return self._gateway("/v3/kv/deleterange", {"key": key})

    def log_tail(self, chars=2000):
        out = []
        for i in range(len(self.processes)):
            path = os.path.join(self.dir, f"m{i}.log")
            if os.path.exists(path):
                with open(path, "rb") as f:
                    out.append(f"m{i}: " + f.read()[-chars:].decode(errors="replace"))
        return "\n".join(out)

    def stop(self):
        for i in range(len(self.processes)):
            self.kill(i)
            if self.logs[i] is not None:
                self.logs[i].close()
                self.logs[i] = None
        shutil.rmtree(self.dir, ignore_errors=True)
