"""A TCP proxy on 127.0.0.1 that can cut the network: every byte in both directions dropped for N seconds.

It runs an asyncio loop in a daemon thread. ``cut(seconds)`` (or ``start_cut``/``heal``) blackholes all traffic:

* established connections stay open, but whatever either side sends is read and thrown away (no RST, no FIN:
  a peer only notices through its own timeouts, as with a pulled cable or a dropping firewall);
* new connections are accepted, then blackholed the same way (a SYN answered, nothing after);
* at the end of the cut, connections that lost bytes are closed, because their byte streams are now corrupt
  (real TCP would have retransmitted, or timed out and reset); clients reconnect to a working network.

``mode="reset"`` instead closes every connection at once and refuses new ones while the cut lasts.
Counters (``stats``) say how many connections and bytes went through and how many bytes were dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from dataclasses import dataclass, field


@dataclass
class ProxyStats:
    connections: int = 0
    bytes_forwarded: int = 0
    bytes_dropped: int = 0
    connections_closed_by_cut: int = 0
    cuts: list[tuple[float, float]] = field(default_factory=list)  # (start, end) monotonic times


class _Pipe:
    """One client connection and its upstream connection."""

    def __init__(self, proxy: TcpProxy, client: asyncio.StreamWriter) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.corrupt = False  # bytes were dropped: the stream cannot be resumed

    def close(self) -> None:
        for writer in (self.client, self.upstream):
            if writer is not None:
                with contextlib.suppress(Exception):
                    writer.close()


class TcpProxy:
    def __init__(self, upstream_port: int, listen_port: int = 0, upstream_host: str = "127.0.0.1") -> None:
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.listen_port = listen_port
        self.stats = ProxyStats()
        self._cut = False
        self._mode = "blackhole"
        self._pipes: set[_Pipe] = set()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tcp-proxy", daemon=True)

    # --- control (any thread) -------------------------------------------------------------------------------

    def start(self) -> TcpProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the proxy did not start")
        return self

    @property
    def port(self) -> int:
        return self.listen_port

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.listen_port}"

    @property
    def is_cut(self) -> bool:
        return self._cut

    def start_cut(self, mode: str = "blackhole") -> None:
        if mode not in ("blackhole", "reset"):
            raise ValueError(mode)
        self._mode = mode
        self._cut = True
        self.stats.cuts.append((time.monotonic(), float("nan")))
        if mode == "reset":
            self._call(self._close_all)

    def heal(self) -> None:
        """End the cut; connections that lost bytes are closed (their clients reconnect)."""
        self._call(self._close_corrupt)
        self._cut = False
        start, _ = self.stats.cuts[-1]
        self.stats.cuts[-1] = (start, time.monotonic())

    def cut(self, seconds: float, mode: str = "blackhole") -> None:
        """Cut the network for ``seconds`` (blocks)."""
        self.start_cut(mode)
        try:
            time.sleep(seconds)
        finally:
            self.heal()

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self._call(self._close_all)
        if self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- the loop ---------------------------------------------------------------------------------------------

    def _call(self, fn: object) -> None:
        done = threading.Event()

        def run() -> None:
            try:
                fn()  # type: ignore[operator]
            finally:
                done.set()

        self._loop.call_soon_threadsafe(run)
        done.wait(10)

    def _close_all(self) -> None:
        for pipe in list(self._pipes):
            pipe.close()
            self.stats.connections_closed_by_cut += 1
        self._pipes.clear()

    def _close_corrupt(self) -> None:
        for pipe in [p for p in self._pipes if p.corrupt]:
            pipe.close()
            self._pipes.discard(pipe)
            self.stats.connections_closed_by_cut += 1

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._accept, "127.0.0.1", self.listen_port, reuse_address=True)
        )
        sock: socket.socket = self._server.sockets[0]
        self.listen_port = sock.getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        if self._cut and self._mode == "reset":
            writer.close()
            return
        pipe = _Pipe(self, writer)
        self._pipes.add(pipe)
        try:
            while self._cut:  # a connection made during a cut: blackholed until the cut ends
                if not await self._drain_blackholed(reader, pipe):
                    return
            if pipe.corrupt:
                return
            try:
                up_reader, pipe.upstream = await asyncio.open_connection(
                    self.upstream_host, self.upstream_port
                )
            except OSError:
                return
            await asyncio.gather(
                self._forward(reader, pipe.upstream, pipe),
                self._forward(up_reader, writer, pipe),
            )
        finally:
            pipe.close()
            self._pipes.discard(pipe)

    async def _drain_blackholed(self, reader: asyncio.StreamReader, pipe: _Pipe) -> bool:
        """Read and drop what a blackholed connection sends; False once the peer has closed it."""
        try:
            data = await asyncio.wait_for(reader.read(65536), timeout=0.1)
        except TimeoutError:
            return True
        if not data:
            pipe.corrupt = True
            return False
        self.stats.bytes_dropped += len(data)
        pipe.corrupt = True
        return True

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pipe: _Pipe) -> None:
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if self._cut or pipe.corrupt:
                    self.stats.bytes_dropped += len(data)
                    pipe.corrupt = True
                    continue
                writer.write(data)
                self.stats.bytes_forwarded += len(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            pipe.close()
