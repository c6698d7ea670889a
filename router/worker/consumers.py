"""What the worker knows of the consumers it routes to, kept fresh on the poll-loop thread.

The capacity monitor measures lag and presence on its own thread (``routing.capacity``); this takes its newest
measurement into the ``Snapshot`` decisions read (keeping what was routed since the measurement began), and
wakes the parked pending partitions when what waits there may now go: a group attached, or some group's
unconfirmed count fell. Otherwise waiting records stay unread (the sweep timer aside), so nothing spins.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer

from subroute.routing.capacity import CapacityMonitor, Measurement
from subroute.routing.snapshot import Snapshot
from subroute.worker.assignment import Assignment


class ConsumerView:
    def __init__(self, capacity: CapacityMonitor) -> None:
        self.capacity = capacity
        self.snapshot = Snapshot()
        self._measured: Measurement | None = None

    def follow(self, consumer: Consumer, assignment: Assignment) -> Snapshot:
        """The snapshot to route the next batch with."""
        measured = self.capacity.measurement()
        if measured is not self._measured:
            self._measured = measured
            fresh = self.snapshot.renewed(measured.lag, measured.absent, measured.started_at)
            if self.snapshot.attached(fresh):
                assignment.resume_parked(consumer)
            self.snapshot = fresh
        self.snapshot.clock = time.monotonic()
        return self.snapshot
