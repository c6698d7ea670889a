"""A progress bar for Spark work (``plan``, ``spark run``) on a terminal: the tasks of the active stages done
out of their number, polled from Spark's status tracker (Spark's own console bar is off: spark/session.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, Protocol

from subroute.ops.progress import Bar


class StageInfo(Protocol):
    numTasks: int
    numCompletedTasks: int


class StatusTracker(Protocol):
    def getActiveStageIds(self) -> list[int]: ...

    def getStageInfo(self, stageId: int) -> StageInfo | None: ...


def tasks(tracker: StatusTracker) -> tuple[int, int, int]:
    """(completed tasks, tasks, stages) of the stages running now."""
    done = total = stages = 0
    for stage_id in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage_id)
        if info is not None:
            done += info.numCompletedTasks
            total += info.numTasks
            stages += 1
    return done, total, stages


class SparkProgress:
    """``with SparkProgress(spark, "plan"):`` shows a bar while Spark works; off a terminal it does nothing.
    ``figures`` adds what the caller counts (rows landed ...) beside the bar."""

    def __init__(
        self,
        spark: Any,
        description: str,
        *,
        figures: Callable[[], dict[str, object]] | None = None,
        interval: float = 0.2,
        bar: Bar | None = None,
    ) -> None:
        self.bar = bar if bar is not None else Bar(description, unit="task")
        try:
            self._tracker: StatusTracker | None = spark.sparkContext.statusTracker()
        except Exception:  # Spark Connect has no SparkContext: no bar then
            self._tracker = None
        self._figures = figures
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spark-progress", daemon=True)

    def poll(self) -> None:
        if self._tracker is None:
            return
        done, total, stages = tasks(self._tracker)
        extra = self._figures() if self._figures is not None else {}
        self.bar.update(done, total=max(total, done), stages=stages, **extra)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.poll()
            except Exception:  # a bar must never break the job it shows (Spark may be stopping)
                return

    def __enter__(self) -> SparkProgress:
        if self.bar.enabled and self._tracker is not None:
            self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.bar.close()
