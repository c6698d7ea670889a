"""A local broker process: free ports, start until it answers, stop (SIGTERM, then SIGKILL) and clean up.

The engines (``kafka``, ``tansu``) say what to run; ``broker`` picks one. The local Schema Registry
(``schema_registry``) is run the same way, ready when it answers HTTP instead of Kafka's ApiVersions.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO

from subroute.errors import SubrouteError


class BrokerNotAvailable(SubrouteError, RuntimeError):
    """The broker's binaries are not installed, or it did not start."""


def free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("connection closed")
        data += chunk
    return data


def answers_api_versions(port: int, timeout: float = 1.0) -> bool:
    """True once a Kafka broker on ``port`` serves requests: it answers ApiVersions (key 18, v0) without error."""
    request = struct.pack(">hhih", 18, 0, 7, -1)  # api key, version, correlation id, null client id
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(struct.pack(">i", len(request)) + request)
            (size,) = struct.unpack(">i", _read_exactly(sock, 4))
            correlation_id, error_code = struct.unpack(">ih", _read_exactly(sock, min(size, 6)))
    except (OSError, ConnectionError, struct.error):
        return False
    return bool(correlation_id == 7 and error_code == 0)


class LocalBroker(ABC):
    """A broker process on a free local port; use as a context manager, or ``start()`` / ``stop()``."""

    engine: str

    def __init__(self, port: int | None = None, advertised_port: int | None = None) -> None:
        self.port = port or free_port()
        self.advertised_port = advertised_port or self.port
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.advertised_port}"

    @property
    def log_path(self) -> Path | None:
        """Where the broker's own log goes, if anywhere."""
        return None

    @abstractmethod
    def _prepare(self) -> list[str]:
        """Everything the process needs on disk; returns its command line."""

    def _environment(self) -> dict[str, str]:
        return dict(os.environ)

    def _cleanup(self) -> None:  # noqa: B027 (an optional hook: Tansu keeps nothing on disk)
        """Remove what ``_prepare`` made (called after the process has exited)."""

    def _answers(self) -> bool:
        """Whether the started process serves requests yet."""
        return answers_api_versions(self.port)

    def start(self, timeout: float = 60.0) -> LocalBroker:
        command = self._prepare()
        log: IO[bytes] | int = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        try:
            self._process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self._environment(),
                start_new_session=True,  # a terminal's Ctrl-C reaches us, and we stop the broker in order
            )
        finally:
            if not isinstance(log, int):
                log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                code = self._process.returncode
                self.stop()
                raise BrokerNotAvailable(
                    f"{self.engine} exited with code {code} on port {self.port}{self._log_hint()}"
                )
            if self._answers():
                return self
            time.sleep(0.1)
        self.stop()
        raise BrokerNotAvailable(
            f"{self.engine} did not answer on port {self.port} within {timeout:.0f} s{self._log_hint()}"
        )

    def _log_hint(self) -> str:
        return f" (log: {self.log_path})" if self.log_path else ""

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM (the broker shuts down in order), SIGKILL after ``grace`` seconds, then remove its files."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        self._cleanup()

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        """The broker process's id while it runs (the benchmarks read its CPU time)."""
        return self._process.pid if self.running and self._process is not None else None

    def __enter__(self) -> LocalBroker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class _Stop(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)


def _stop(signum: int, _frame: object) -> None:
    raise _Stop(signum)


def serve_until_stopped(
    service: LocalBroker, name: str, start: Callable[[], object], first_line: Callable[[], str]
) -> int:
    """``subroute dev broker`` and ``dev schema-registry``: start ``service``, print ``first_line()`` first on
    stdout (what scripts read), its log's path on stderr, then run until SIGINT/SIGTERM (0; 3 when it does not
    start).

    The stop signals get handlers rather than being blocked (and waited for): a blocked mask is inherited by the
    service's process, and Tansu never heard the SIGTERM that stops it (it was killed after the grace time). One
    that comes during the start stops the service there too."""
    stop_signals = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.signal(signum, _stop) for signum in stop_signals}
    try:
        start()
        print(first_line(), flush=True)
        if service.log_path:
            print(f"{name} log: {service.log_path}", file=sys.stderr, flush=True)
        while True:
            signal.pause()
    except _Stop as received:
        print(f"{received}: stopping the {name}", file=sys.stderr, flush=True)
        return 0
    except BrokerNotAvailable as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 3
    finally:
        for signum in stop_signals:  # a second signal while stopping is ignored: the stop finishes in order
            signal.signal(signum, signal.SIG_IGN)
        service.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
