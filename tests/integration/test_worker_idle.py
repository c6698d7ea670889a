"""More workers than partitions: the worker the group gives nothing is not ready (it routes nothing) but idle, so
the not-ready alert leaves it out; when a worker that holds partitions goes, it takes them over and is ready."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.integration.harness import BackgroundWorker, apply, make_env

pytestmark = pytest.mark.kafka


def gauges(worker: BackgroundWorker) -> tuple[float, float]:
    """(subroute_ready, subroute_idle) as a scrape reads them."""
    registry = worker.metrics.registry
    ready = registry.get_sample_value("subroute_ready")
    idle = registry.get_sample_value("subroute_idle")
    assert ready is not None and idle is not None
    return ready, idle


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_a_worker_given_no_partition_is_idle_not_stuck(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)  # one input partition
    assert apply(env, "apps:\n  a:\n    inputs: [INPUT]\n    groups:\n      g: {}\n") == 0
    # The group reads the input and the app's pending topic: two partitions for three workers.
    workers = [BackgroundWorker(env) for _ in range(3)]
    for worker in workers:
        worker.__enter__()
    try:

        def settled() -> bool:
            states = sorted(gauges(w) for w in workers)
            return states == [(0.0, 1.0), (1.0, 0.0), (1.0, 0.0)]

        wait_for(settled, 90, "two ready workers and one idle")
        [spare] = [w for w in workers if gauges(w) == (0.0, 1.0)]
        assert not spare.worker.ready() and spare.worker.idle()
        busy = next(w for w in workers if w is not spare)
        busy.__exit__(None, None, None)  # leaves the group: the spare takes its partitions
        workers.remove(busy)
        wait_for(lambda: gauges(spare) == (1.0, 0.0), 90, "the spare to take the partitions over")
    finally:
        for worker in workers:
            worker.__exit__(None, None, None)
    assert gauges(spare) == (0.0, 0.0)  # closed: neither ready nor idle
