"""Routing tables built for the worker, on the config store's thread (off the hot path)."""

from __future__ import annotations

import gc
import time

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
