"""A downstream cluster corral cannot reach: its whole control plane in a network namespace of
its own, which has nothing but its loopback, and one way out.

    host network (corral, its operator, the tests)        the cluster's network namespace
    127.0.0.1:<corral's port>  ◄──── uplink ──────────── 127.0.0.1:<corral's port>
                                 (outbound only)          etcd, kube-apiserver, kcm, scheduler,
                                                          kwok, and whatever runs "there"

Nothing on the host has a route into the namespace: its loopback is its own, and it has no
other device, so the cluster's API server (on that loopback) cannot be dialled from corral's
processes at all. The uplink is what a NAT or an egress-only firewall gives a real cluster:
connections opened inside towards corral's port reach corral, and nothing else goes either way.
corral's URL is the same on both sides, so its serving certificate and the manifest's URL hold.

Processes are started inside with `nsenter`; calls from this process (readiness, the checks of
the tests) run in a thread that joined the namespace (setns is per thread), so a socket they
open lives there.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from corral.devenv.controlplane import ControlPlane, Etcd
from corral.devenv.host import run
from corral.devenv.process import Process, stop_all
from corral.devenv.waiting import wait_for

log = logging.getLogger(__name__)

T = TypeVar("T")

_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)
COPY_CHUNK = 64 * 1024


class IsolatedNetwork:
    """A network namespace held by one process: it goes when that process does."""

    def __init__(self, name: str, root: Path) -> None:
        self.holder = Process(f"{name}/netns", ["unshare", "--net", "--", "sleep", "infinity"],
                              root / "logs" / f"{name}-netns.log")  # fmt: skip
        ours = Path("/proc/self/ns/net").readlink()
        theirs = Path(f"/proc/{self.holder.pid}/ns/net")
        try:
            wait_for(f"{name}'s network namespace", lambda: theirs.readlink() != ours, 10,
                     [self.holder])  # fmt: skip
            run([*self.enter(), "ip", "link", "set", "lo", "up"])
        except BaseException:
            self.holder.stop()
            raise
        self._inside = ThreadPoolExecutor(1, f"{name}-netns", initializer=self._join)
        self._uplinks: list[Uplink] = []

    def enter(self) -> list[str]:
        """The prefix that runs a command inside."""
        return ["nsenter", "-t", str(self.holder.pid), "-n", "--"]

    def command(self, argv: Sequence[str]) -> list[str]:
        return [*self.enter(), *argv]

    def call(self, function: Callable[..., T], *args: object) -> T:
        """`function(*args)` run from inside: the sockets it opens are the namespace's."""
        return self._inside.submit(function, *args).result()

    def uplink(self, port: int) -> None:
        """Let connections to 127.0.0.1:`port` inside reach 127.0.0.1:`port` of the host."""
        listener = self.call(socket.create_server, ("127.0.0.1", port))
        self._uplinks.append(Uplink(listener, port))

    def route(self, port: int, targets: Sequence[int]) -> None:
        """From now on, connections to `port` inside reach the first of the host's `targets`
        that accepts, as a Service's address reaches a replica that is up: several API
        server replicas behind corral's one URL."""
        (uplink,) = [u for u in self._uplinks if u.port == port]
        uplink.targets = list(targets)

    def close(self) -> None:
        for uplink in self._uplinks:
            uplink.close()
        self._inside.shutdown(wait=True)
        self.holder.stop()

    def _join(self) -> None:
        with open(f"/proc/{self.holder.pid}/ns/net") as namespace:  # noqa: PTH123
            if _libc.setns(namespace.fileno(), _CLONE_NEWNET) != 0:
                error = ctypes.get_errno()
                raise OSError(error, f"setns: {os.strerror(error)}")


class Uplink:
    """Connections accepted inside, each copied both ways to a connection made on the host."""

    def __init__(self, listener: socket.socket, port: int) -> None:
        self._listener = listener
        self.port = port
        self.targets = [port]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name=f"uplink-{port}", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                inside, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                outside = self._connect()
            except OSError as exc:
                log.warning("uplink to port %d: %s", self.port, exc)
                inside.close()
                continue
            outside.settimeout(None)
            with self._lock:
                self._open.update((inside, outside))
            threading.Thread(target=self._carry, args=(inside, outside), daemon=True).start()

    def _connect(self) -> socket.socket:
        # This thread never joined the namespace: the connection is the host's.
        refused: OSError | None = None
        for port in list(self.targets):
            try:
                return socket.create_connection(("127.0.0.1", port), timeout=10)
            except OSError as exc:
                refused = exc
        assert refused is not None
        raise refused

    def _carry(self, inside: socket.socket, outside: socket.socket) -> None:
        back = threading.Thread(target=_copy, args=(outside, inside), daemon=True)
        back.start()
        _copy(inside, outside)
        back.join()
        with self._lock:
            self._open.difference_update((inside, outside))
        inside.close()
        outside.close()

    def close(self) -> None:
        # Closing alone would not wake the accept() under way in the other thread.
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            for connection in self._open:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
                connection.close()
            self._open.clear()


def _copy(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(COPY_CHUNK):
            sink.sendall(data)
    # This direction ended: pass the half close on; the other ends in its own time.
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


@dataclass
class IsolatedCluster:
    """A simulated cluster (its own etcd, control plane and kwok) inside an IsolatedNetwork whose
    one way out reaches corral."""

    network: IsolatedNetwork
    etcd: Etcd
    plane: ControlPlane

    @classmethod
    def start(
        cls, name: str, devkube: Path, root: Path, corral_port: int, nodes: int = 1,
        stream_namespaces: Sequence[str] = (), port_forwards: Mapping[int, int] | None = None,
    ) -> IsolatedCluster:  # fmt: skip
        network = IsolatedNetwork(name, root)
        processes: list[Process] = []
        try:
            etcd = Etcd(devkube, root / "clusters" / name, network.enter())
            processes.append(etcd.process)
            network.call(etcd.wait_ready)
            plane = ControlPlane(
                name, devkube, root, etcd.url, nodes=nodes, enter=network.enter(),
                stream_namespaces=stream_namespaces, port_forwards=port_forwards or {},
            )  # fmt: skip
            plane.start()
            processes.extend(plane.apiserver)
            network.call(plane.wait_apiserver)
            plane.start_controllers()
            processes.extend(plane.controllers)
            network.call(plane.wait_ready)
            network.uplink(corral_port)
        except BaseException:
            stop_all(reversed(processes))
            network.close()
            raise
        return cls(network, etcd, plane)

    def kubectl(self, devkube: Path, *args: str) -> list[str]:
        """A kubectl command run inside, as the cluster's admin."""
        config = self.plane.kubeconfig_path
        return self.network.command([str(devkube), "kubectl", f"--kubeconfig={config}", *args])

    def close(self) -> None:
        stop_all(self.plane.controllers)
        stop_all(self.plane.apiserver)
        self.etcd.process.stop()
        self.network.close()
