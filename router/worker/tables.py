"""Routing tables built for the worker, on the config store's thread (off the hot path), and the cyclic
collector's settings while the worker routes."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager

from subroute.config.model import Config
from subroute.ops.metrics import RouterMetrics
from subroute.routing.decisions import RoutingTable
from subroute.routing.native_routing import build_table


class TableBuilder:
    """Compiles each config version into a table, reusing the previous table's unchanged apps and plans."""

    def __init__(self, metrics: RouterMetrics) -> None:
        self.metrics = metrics
        self._last_built: RoutingTable | None = None  # unchanged apps reuse its plans

    def __call__(self, config: Config) -> RoutingTable:
        started = time.perf_counter()
        # Freeze what is alive first: a full collection set off by the build's allocations then walks only the
        # build's own objects, in one hold of the GIL. The build shares the GIL with routing by the interpreter's
        # switch interval: a build that slept between steps to give way (a "pacer", when routing flushed the
        # producer per batch) took twice as long to come into force and shortened no routing pause once commits
        # were pipelined (docs/performance.md, "Config swap").
        gc.freeze()
        previous = self._last_built
        table = build_table(config, previous)
        self._last_built = table
        # A plan of 10,000 expressions is a million long-lived objects: frozen, the cyclic collector skips them
        # (it would stop routing for a few hundred ms); refcounting still frees them when a table replaces this.
        gc.freeze()
        self.metrics.plan_compile_seconds.observe(time.perf_counter() - started)
        return table


# Container allocations between two collections of the young generation while the worker routes (Python's default
# is 700). A routed record makes a dozen containers (its headers, its envelope, its decisions) and most die young
# by reference counting; what survives (a commit window's records, held until their delivery reports) is walked
# again by every older collection. At 700 the poll loop spent about 3 of its 19 µs of CPU per record at 10,000
# subscriptions collecting (docs/performance.md); reference cycles are rare on the routing path, so little garbage
# waits the longer interval.
YOUNG_COLLECTION_ALLOCATIONS = 50_000
OLDER_COLLECTION_RATIO = 20  # each older generation collected once per 20 collections of the one before it


@contextmanager
def routing_collection() -> Iterator[None]:
    """The cyclic collector's thresholds for routing (above), the process's own restored afterwards (tests run
    workers inside the test process)."""
    before = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_ALLOCATIONS, OLDER_COLLECTION_RATIO, OLDER_COLLECTION_RATIO)
    try:
        yield
    finally:
        gc.set_threshold(*before)
