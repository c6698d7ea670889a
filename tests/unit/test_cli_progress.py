"""Progress bars (router/ops/progress.py, spark/progress.py): tqdm on a terminal, nothing in a pipe."""

from __future__ import annotations

import io
from dataclasses import dataclass, field

from subroute.ops.progress import Bar
from subroute.spark.progress import SparkProgress, tasks


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_is_drawn_on_a_terminal_only() -> None:
    terminal = Terminal()
    with Bar("redrive A", unit="letter", stream=terminal) as bar:
        assert bar.enabled
        bar.update(1000, redriven=990, skipped=10)
        bar.update(2500, redriven=2480, skipped=20)
    drawn = terminal.getvalue()
    assert "redrive A" in drawn and "2500letter" in drawn and "redriven=2480" in drawn and "\r" in drawn

    pipe = io.StringIO()
    with Bar("redrive A", unit="letter", stream=pipe) as bar:
        assert not bar.enabled
        bar.update(1000, redriven=1000)
    assert pipe.getvalue() == ""


@dataclass
class Stage:
    numTasks: int
    numCompletedTasks: int


@dataclass
class Tracker:
    stages: dict[int, Stage] = field(default_factory=dict)

    def getActiveStageIds(self) -> list[int]:
        return list(self.stages)

    def getStageInfo(self, stageId: int) -> Stage | None:
        return self.stages.get(stageId)


@dataclass
class Context:
    tracker: Tracker

    def statusTracker(self) -> Tracker:
        return self.tracker


@dataclass
class Session:
    sparkContext: Context


def test_spark_progress_counts_the_tasks_of_the_running_stages() -> None:
    tracker = Tracker({3: Stage(8, 5), 4: Stage(2, 0)})
    assert tasks(tracker) == (5, 10, 2)
    terminal = Terminal()
    bar = Bar("plan", unit="task", stream=terminal)
    with SparkProgress(Session(Context(tracker)), "plan", bar=bar, figures=lambda: {"rows": 42}) as progress:
        progress.poll()
    drawn = terminal.getvalue()
    assert "plan" in drawn and "5/10" in drawn and "rows=42" in drawn and "stages=2" in drawn


def test_spark_progress_does_nothing_off_a_terminal_or_without_a_spark_context() -> None:
    pipe = io.StringIO()
    with SparkProgress(
        Session(Context(Tracker({1: Stage(4, 1)}))), "plan", bar=Bar("plan", unit="task", stream=pipe)
    ) as p:
        p.poll()
    assert pipe.getvalue() == ""
    with SparkProgress(object(), "plan", bar=Bar("plan", unit="task", stream=Terminal())) as p:
        p.poll()  # Spark Connect: no SparkContext, no bar, no error
