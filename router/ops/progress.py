"""Progress bars (tqdm) on stderr, only when stderr is a terminal: a pipe or a log file gets the commands' own
lines (``dlq redrive`` prints one per batch), never a bar's carriage returns."""

from __future__ import annotations

import io
import os
import sys
from types import TracebackType
from typing import IO, Any

from tqdm import tqdm


def on_terminal(stream: IO[str] | None = None) -> bool:
    target = sys.stderr if stream is None else stream
    try:
        return target.isatty()
    except (AttributeError, ValueError):  # closed or not a real stream
        return False


def _columns(stream: IO[str]) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return 0


class Bar:
    """A bar counting ``unit``s toward ``total`` (None: unknown, a counter with a rate), or nothing off a
    terminal. ``update(done, **figures)`` sets the count and shows the figures beside it."""

    def __init__(
        self, description: str, *, unit: str, total: int | None = None, stream: IO[str] | None = None
    ):
        self.enabled = on_terminal(stream)
        target = sys.stderr if stream is None else stream
        # a terminal that reports no size (a bare pseudo-terminal) gets 80x24: tqdm would hide its bar there
        sized = _columns(target) > 0
        self._bar: tqdm[Any] | None = (
            tqdm(
                total=total,
                desc=description,
                unit=unit,
                file=target,
                dynamic_ncols=sized,
                ncols=None if sized else 80,
                nrows=None if sized else 24,
                leave=False,
            )
            if self.enabled
            else None
        )

    def update(self, done: int, *, total: int | None = None, **figures: object) -> None:
        if self._bar is None:
            return
        if total is not None and total != self._bar.total:
            self._bar.total = total
        if figures:
            self._bar.set_postfix({k: str(v) for k, v in figures.items()}, refresh=False)
        self._bar.update(done - self._bar.n)
        self._bar.refresh()  # updates come per batch or per poll: draw each (tqdm would skip some)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Bar:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
