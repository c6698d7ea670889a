"""The worker's warning about records that wait for a consumer: once per app, again when the absent groups change
or after the repeat interval, with the count of records parked meanwhile."""

from __future__ import annotations

import logging

import pytest

from subroute.routing.decisions import Action, Decision
from subroute.wire import CAPACITY, NO_CONSUMER
from subroute.worker.tally import labels_of
from subroute.worker.waiting import WaitingReport

WAITING = labels_of(Decision("billing", Action.PENDING, reason=NO_CONSUMER))
FULL = labels_of(Decision("billing", Action.PENDING, reason=CAPACITY))
ROUTED = labels_of(Decision("billing", Action.ROUTE, "vip", "*"))


def test_one_warning_per_app_naming_the_consumer_groups_and_presence_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    report = WaitingReport("shop", repeat_seconds=600, clock=lambda: now[0])
    absent = frozenset({("billing", "vip"), ("billing", "general"), ("carts", "a")})
    with caplog.at_level(logging.WARNING, logger="subroute.worker.waiting"):
        report.note([(ROUTED, 5), (FULL, 3)], absent)  # nothing waits for a consumer: nothing said
        assert caplog.records == []
        report.note([(WAITING, 700)], absent)
        report.note([(WAITING, 10)], absent)  # the same groups, soon after: not again
        [first] = caplog.records
        assert first.getMessage().startswith(
            "records of app billing wait for a consumer: no live member in Kafka consumer group(s) "
            "shop.billing.general, shop.billing.vip; start a consumer in one of them, or set `presence: ignored`"
        )
        assert first.fields["parked"] == 700  # type: ignore[attr-defined]
        report.note([(WAITING, 1)], absent - {("billing", "vip")})  # vip attached, general still absent
        assert len(caplog.records) == 2 and "shop.billing.vip" not in caplog.records[1].getMessage()
        report.note([(WAITING, 4)], absent - {("billing", "vip")})
        now[0] = 601.0
        report.note([(WAITING, 2)], absent - {("billing", "vip")})  # still waiting after the interval
        assert len(caplog.records) == 3 and caplog.records[2].fields["parked"] == 6  # type: ignore[attr-defined]
