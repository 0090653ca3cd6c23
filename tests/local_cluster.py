"""A Ray cluster of several nodes on this machine, for the multi-node tests.

The pytest process already drives the session's own Ray cluster (``ray_session``), and a process
drives one cluster at most; so the multi-node cluster lives in a keeper process of its own
(``python tests/local_cluster.py SPEC FD``, Ray's ``cluster_utils.Cluster``), which the test talks
to one JSON line each way: requests on its stdin, answers on a pipe of their own (file descriptor
FD), never on its stdout, where Ray's processes print too (a raylet's death notice once landed in
the middle of an answer line):

- it starts the head (no pool resources, the dashboard for Ray's state API) and one node per
  entry of SPEC (a JSON list of ``{"num_cpus": .., "resources": {..}}``), starts Serve with its
  proxy on the head only, on a free port (nodes on one host would all want port 8000), and answers
  ``{"address", "nodes": [node ids, head first]}``;
- ``{"op": "actors"}`` -> ``{"actors": [{"class_name", "name", "node_id", "state", "pid"}]}``,
  from Ray's state API (what Ray itself records, not what our actors say of themselves);
- ``{"op": "kill", "node": i}`` kills every process of node ``i`` (1-based, the head is 0) with no
  grace, as a lost machine -> ``{"killed": node id}``;
- ``{"op": "add", "num_cpus": .., "resources": {..}}`` -> ``{"node": node id}``;
- end of input shuts the cluster down.

Token authentication is off (``RAY_AUTH_MODE=disabled``): every process is on the loopback. A lost
node is declared dead after about 3 s (``ENV``). The
keeper's Ray files live under a temporary ``RAY_TMPDIR`` of its own, so that it never becomes the
"current cluster" (``/tmp/ray/ray_current_cluster``) that a plain ``ray.init()`` would join.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

# The GCS declares a node dead after 3 failed health checks 1 s apart (Ray's defaults: 5, 3 s apart):
# a node killed with no grace refuses every check at once, so its loss is seen in about 3 s instead
# of 15, while a live node under load still answers (each check may take 10 s, Ray's default).
ENV = {
    "RAY_AUTH_MODE": "disabled",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def keep(spec: list[dict[str, Any]], answers_fd: int) -> None:
    """The keeper process's body (see the module's docstring)."""
    os.set_inheritable(answers_fd, False)  # Ray's node processes must not hold the answer pipe
    answers = os.fdopen(answers_fd, "w")

    def answer(message: dict[str, Any]) -> None:
        answers.write(json.dumps(message) + "\n")
        answers.flush()

    import ray
    from ray import serve
    from ray.cluster_utils import Cluster
    from ray.util.state import list_actors

    dashboard = free_port()
    cluster = Cluster(
        initialize_head=True,
        connect=False,
        head_node_args={
            "num_cpus": 1,
            "include_dashboard": True,
            "dashboard_host": "127.0.0.1",
            "dashboard_port": dashboard,
        },
    )
    nodes = [cluster.head_node]
    try:
        for node in spec:
            nodes.append(cluster.add_node(num_cpus=node["num_cpus"], resources=node["resources"]))
        cluster.wait_for_nodes(timeout=300)
        ray.init(address=cluster.address, namespace="turnopd", log_to_driver=False)
        serve.start(http_options={"host": "127.0.0.1", "port": free_port(), "location": "HeadOnly"})
        answer({"address": cluster.address, "nodes": [n.node_id for n in nodes]})
        for line in sys.stdin:
            request = json.loads(line)
            match request["op"]:
                case "actors":
                    found = list_actors(address=f"http://127.0.0.1:{dashboard}", detail=True, limit=10_000)
                    keys = ("class_name", "name", "node_id", "state", "pid")
                    answer({"actors": [{k: getattr(a, k) for k in keys} for a in found]})
                case "kill":
                    node = nodes[request["node"]]
                    cluster.remove_node(node, allow_graceful=False)
                    answer({"killed": node.node_id})
                case "add":
                    node = cluster.add_node(num_cpus=request["num_cpus"], resources=request["resources"])
                    cluster.wait_for_nodes(timeout=300)
                    nodes.append(node)
                    answer({"node": node.node_id})
                case other:
                    answer({"error": f"unknown op {other!r}"})
    finally:
        ray.shutdown()
        cluster.shutdown()


class LocalCluster:
    """The test's side: starts the keeper, asks it things, shuts it down (a context manager)."""

    def __init__(self, spec: list[dict[str, Any]], log: Path) -> None:
        self._log = log.open("w")
        self._tmp = tempfile.mkdtemp(prefix="rmn", dir="/tmp")  # short: Ray's socket paths have a limit
        read_end, write_end = os.pipe()
        self._keeper = subprocess.Popen(
            [sys.executable, __file__, json.dumps(spec), str(write_end)],
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=self._log,
            text=True,
            env=self.env(with_address=False),
            pass_fds=(write_end,),
        )
        os.close(write_end)  # the keeper holds the only writer: its end is this reader's end of file
        self._answers = os.fdopen(read_end, "r")
        ready = self._read()
        self.address: str = ready["address"]
        self.nodes: list[str] = ready["nodes"]

    def env(self, with_address: bool = True) -> dict[str, str]:
        """The environment of a process that joins this cluster (``turnopd train``)."""
        env = dict(os.environ, RAY_TMPDIR=self._tmp, **ENV)
        if with_address:
            env["RAY_ADDRESS"] = self.address
        return env

    def actors(self) -> list[dict[str, Any]]:
        return list(self._ask({"op": "actors"})["actors"])

    def kill(self, node: int) -> str:
        return str(self._ask({"op": "kill", "node": node})["killed"])

    def add(self, num_cpus: float, resources: dict[str, float]) -> str:
        node = str(self._ask({"op": "add", "num_cpus": num_cpus, "resources": resources})["node"])
        self.nodes.append(node)
        return node

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self._keeper.stdin is not None
        self._keeper.stdin.write(json.dumps(request) + "\n")
        self._keeper.stdin.flush()
        return self._read()

    def _read(self) -> dict[str, Any]:
        line = self._answers.readline()
        if not line:
            self._log.flush()
            code = self._keeper.wait()
            raise RuntimeError(f"the cluster keeper ended (exit {code}); its log: {self._log.name}")
        message: dict[str, Any] = json.loads(line)
        if "error" in message:
            raise RuntimeError(message["error"])
        return message

    def close(self) -> None:
        assert self._keeper.stdin is not None
        self._keeper.stdin.close()
        try:
            self._keeper.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self._keeper.kill()
        self._answers.close()
        self._log.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


if __name__ == "__main__":
    keep(json.loads(sys.argv[1]), int(sys.argv[2]))
