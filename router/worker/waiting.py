"""Saying what waits for a consumer: one warning per app when its records start waiting for one, naming the Kafka
consumer groups to start and the ``presence: ignored`` alternative.

Records of a ``presence: required`` app (the default) wait on its pending topic while no group they may go to
has a live member. That is the rule (BlazingMQ routes only to attached consumers), but a newcomer who has not
started a consumer yet sees records go nowhere: the worker says so once, and again only when the set of absent
groups changes or after ``repeat_seconds`` (with the count of records parked meanwhile).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from subroute.routing.decisions import Action
from subroute.routing.explain import waiting_advice
from subroute.routing.snapshot import GroupId
from subroute.wire import NO_CONSUMER
from subroute.worker.tally import DecisionLabels

log = logging.getLogger(__name__)


class WaitingReport:
    """Counts the records parked for want of a consumer, per app, and warns as the module says."""

    def __init__(
        self, prefix: str, repeat_seconds: float = 600.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.prefix, self.repeat_seconds, self._clock = prefix, repeat_seconds, clock
        # per app: the absent groups last warned about, when, and the records parked since
        self._warned: dict[str, tuple[frozenset[str], float, int]] = {}

    def note(self, counted: Iterable[tuple[DecisionLabels, int]], absent: frozenset[GroupId]) -> None:
        """``counted``: a batch's decisions counted by their labels (``tally.count_labels``)."""
        parked: dict[str, int] = {}
        for (action, app, _group, reason), count in counted:
            if action == Action.PENDING.value and reason == NO_CONSUMER:
                parked[app] = parked.get(app, 0) + count
        now = self._clock()
        for app, count in parked.items():
            groups = frozenset(group for owner, group in absent if owner == app)
            last = self._warned.get(app)
            if last is not None and last[0] == groups and now - last[1] < self.repeat_seconds:
                self._warned[app] = (last[0], last[1], last[2] + count)
                continue
            since = count + (last[2] if last is not None else 0)
            log.warning(
                waiting_advice(self.prefix, app, groups),
                extra={"fields": {"app": app, "parked": since, "absent_groups": sorted(groups)}},
            )
            self._warned[app] = (groups, now, 0)
