"""What the worker knows of the consumers it routes to, kept fresh on the poll-loop thread.

The capacity monitor measures lag and presence on its own thread (``worker.capacity``); this takes its newest
measurement into the ``Snapshot`` decisions read (keeping what was routed since the measurement began), and says
(``on_woken``) which apps' waiting records may go now: a group attached or left, some group's unconfirmed count
fell, a message group was released (``routing.passes.wakes``). Otherwise waiting records stay unread (the sweep
timer aside), so nothing spins. With each measurement it also releases the message groups whose holders have
confirmed them (routing/holders.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from subroute.routing.holders import Holders
from subroute.routing.passes import wakes
from subroute.routing.snapshot import Snapshot
from subroute.worker.capacity import CapacityMonitor, Measurement

Woken = Mapping[str, frozenset[str]]  # app -> the reasons for which its waiting records may go now


class ConsumerView:
    def __init__(self, capacity: CapacityMonitor, on_woken: Callable[[Woken], None] | None = None) -> None:
        self.capacity = capacity
        self.on_woken = on_woken
        self.holders = Holders()  # the message groups with messages outstanding, kept across snapshots
        self.snapshot = Snapshot(holders=self.holders)
        self._measured: Measurement | None = None
        self._held_apps: set[str] = set()  # apps with a held-groups series

    def follow(self, settled: int = -1) -> Snapshot:
        """The snapshot to route the next batch with. ``settled``: the newest commit window whose records all
        have their delivery reports (the checkpoint's)."""
        measured = self.capacity.measurement()
        if measured is not self._measured:
            self._measured = measured
            older, fresh = (
                self.snapshot,
                self.snapshot.renewed(measured.lag, measured.absent, measured.started_at),
            )
            self.snapshot = fresh
            woken = wakes(older, fresh, self._release(measured, settled))
            if woken and self.on_woken is not None:
                self.on_woken(woken)
        self.snapshot.clock = time.monotonic()
        return self.snapshot

    def _release(self, measured: Measurement, settled: int) -> frozenset[str]:
        """Free the message groups their holders have confirmed, and publish how many stay held per app; the
        apps some of whose message groups were freed."""
        holders = self.holders
        holders.settled = max(holders.settled, settled)
        before = holders.held_per_app()
        if holders:
            holders.release(measured.committed)
        after = holders.held_per_app()
        released = frozenset(app for app, count in before.items() if after.get(app, 0) < count)
        metrics = self.capacity.metrics
        if metrics is not None:
            held = after
            for app in self._held_apps - held.keys():
                metrics.message_groups_held.remove(app)
            for app, count in held.items():
                metrics.message_groups_held.labels(app).set(count)
            self._held_apps = set(held)
        return released
