"""What the worker knows of the consumers it routes to, kept fresh on the poll-loop thread.

The capacity monitor measures lag and presence on its own thread (``worker.capacity``); this takes its newest
measurement into the ``Snapshot`` decisions read (keeping what was routed since the measurement began), and
wakes the parked pending partitions when what waits there may now go: a group attached, or some group's
unconfirmed count fell. Otherwise waiting records stay unread (the sweep timer aside), so nothing spins. With each
measurement it also releases the message groups whose holders have confirmed them (routing/holders.py).
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer

from subroute.routing.holders import Holders
from subroute.routing.snapshot import Snapshot
from subroute.worker.assignment import Assignment
from subroute.worker.capacity import CapacityMonitor, Measurement


class ConsumerView:
    def __init__(self, capacity: CapacityMonitor) -> None:
        self.capacity = capacity
        self.holders = Holders()  # the message groups with messages outstanding, kept across snapshots
        self.snapshot = Snapshot(holders=self.holders)
        self._measured: Measurement | None = None
        self._held_apps: set[str] = set()  # apps with a held-groups series

    def follow(self, consumer: Consumer, assignment: Assignment, settled: int = -1) -> Snapshot:
        """The snapshot to route the next batch with. ``settled``: the newest commit window whose records all
        have their delivery reports (the checkpoint's)."""
        measured = self.capacity.measurement()
        if measured is not self._measured:
            self._measured = measured
            fresh = self.snapshot.renewed(measured.lag, measured.absent, measured.started_at)
            if self.snapshot.attached(fresh):
                assignment.resume_parked(consumer)
            self.snapshot = fresh
            self._release(measured, settled)
        self.snapshot.clock = time.monotonic()
        return self.snapshot

    def _release(self, measured: Measurement, settled: int) -> None:
        """Free the message groups their holders have confirmed, and publish how many stay held per app."""
        holders = self.holders
        holders.settled = max(holders.settled, settled)
        if holders:
            holders.release(measured.committed)
        metrics = self.capacity.metrics
        if metrics is not None:
            held = holders.held_per_app()
            for app in self._held_apps - held.keys():
                metrics.message_groups_held.remove(app)
            for app, count in held.items():
                metrics.message_groups_held.labels(app).set(count)
            self._held_apps = set(held)
