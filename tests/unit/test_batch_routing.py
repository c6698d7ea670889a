"""The worker's batch routing without Kafka (router/worker/batch.py): a batch decided at once through the native
plan produces what routing each record through ``Router.route`` produces; a failure of the batch path routes the
records one by one, dead-lettering (``rejected``) only a record that fails there too; a parked partition resumes
at the record it stopped at; a sweep takes the expired records behind it, once."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from prometheus_client import CollectorRegistry

from subroute import wire
from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig
from subroute.ops.metrics import RouterMetrics
from subroute.routing.decisions import Action, Router, RoutingTable
from subroute.routing.native_routing import build_table
from subroute.routing.sweep import mark_of
from subroute.worker.batch import BatchRouter
from subroute.worker.sweeps import Sweeps
from subroute.worker.tally import BatchTally

PREFIX = "subroute"
NOW_MS = 1_800_000_000_000


class _Record:
    """Stands in for confluent_kafka.Message (the methods the batch loop calls)."""

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        headers: list[tuple[str, bytes | None]],
        timestamp_ms: int = NOW_MS - 10,
    ):
        self._topic, self._partition, self._offset, self._headers = topic, partition, offset, headers
        self._timestamp = timestamp_ms

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def headers(self) -> list[tuple[str, bytes | None]]:
        return list(self._headers)

    def timestamp(self) -> tuple[int, int]:
        return 1, self._timestamp

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return b"v%d" % self._offset


class _Sink:
    """The checkpoint, its producer, the consumer and the assignment: records what the loop asks of them. The
    consumer has read each partition to the end of the batch (``ends``)."""

    def __init__(self) -> None:
        self.produced: list[tuple[str, Any]] = []
        self.parked: list[tuple[tuple[str, int], int]] = []
        self.sought: list[tuple[tuple[str, int], int]] = []
        self.ends: dict[tuple[str, int], int] = {}

    on_delivery = None  # the window's delivery callback (none: nothing is delivered here)

    @property
    def producers(self) -> _Sink:
        return self

    def produce_of(self, topic: str) -> Any:
        return self.produce

    def produce(self, topic: str, **kwargs: Any) -> None:
        self.produced.append((topic, kwargs))

    def park(self, consumer: object, tp: tuple[str, int], offset: int) -> None:
        self.parked.append((tp, offset))

    def resume(self, consumer: object, partitions: list[tuple[str, int]]) -> None:
        pass

    def seek(self, tp: TopicPartition) -> None:
        self.sought.append(((tp.topic, tp.partition), tp.offset))

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [
            TopicPartition(p.topic, p.partition, self.ends.get((p.topic, p.partition), -1001))
            for p in partitions
        ]

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool = False) -> tuple[int, int]:
        return 0, self.ends.get((tp.topic, tp.partition), -1001)


def _config() -> Config:
    types = {"a": "int", "s": "string"}
    apps = {
        "billing": AppConfig("billing", ("orders",), "bmq", types, filter=("a >= 0",)),
        "audit": AppConfig("audit", ("orders",), "sql92", {"a": "int"}, filter=("a > 5",), group_by="s"),
    }
    groups = {
        ("billing", "low"): GroupConfig("billing", "low", (SubscriptionConfig("a < 10"),)),
        ("billing", "high"): GroupConfig("billing", "high", (SubscriptionConfig("a >= 10", priority=1),), 1),
        ("billing", "any"): GroupConfig("billing", "any"),
        ("audit", "all"): GroupConfig("audit", "all"),
    }
    return Config(version=3, apps=apps, groups=groups)


def _batch() -> list[_Record]:
    values = [b"1", b"12", b"x", b"7", None, b"-3", b"99"]
    return [
        _Record("orders", i % 2, 100 + i, [("a", v), ("s", b"k%d" % (i % 3))]) for i, v in enumerate(values)
    ]


def _route(
    table: RoutingTable,
    batch: list[Any],
    router: BatchRouter | None = None,
    now_ms: int = NOW_MS,
    lag: dict[tuple[str, str], int] | None = None,
) -> tuple[BatchTally, _Sink]:
    sink = _Sink()
    for record in batch:
        tp = (record.topic(), record.partition())
        sink.ends[tp] = max(sink.ends.get(tp, 0), record.offset() + 1)
    batches = router or BatchRouter(PREFIX, RouterMetrics(CollectorRegistry(), runtime=False))
    tally = batches.route_batch(table, batch, lag or {}, now_ms, sink, sink, sink)  # type: ignore[arg-type]
    return tally, sink


def _summary(tally: BatchTally) -> tuple[object, ...]:
    return (
        tally.offsets,
        tally.first_offsets,
        tally.sent,
        tally.messages_in,
        tally.decisions,
        [list(f) for f in tally.filtered],
        tally.decode_errors,
        tally.evaluation_errors,
    )


def test_batch_routes_as_record_by_record() -> None:
    table = build_table(_config())
    assert table.native is not None
    python_only = dataclasses.replace(table, native=None)  # every record through Router.route
    native, native_sink = _route(table, _batch())
    reference, reference_sink = _route(python_only, _batch())
    assert _summary(native) == _summary(reference)
    assert native_sink.produced == reference_sink.produced
    assert native.decisions and native.decode_errors == {"billing": 1, "audit": 1}  # b"x"
    # Round-robin: the three billing groups at priority 0 take turns across records.
    routed = [d.group for d in native.decisions if d.app == "billing" and d.action is Action.ROUTE]
    assert len(set(routed)) > 1


def test_a_failing_batch_path_routes_record_by_record(monkeypatch: pytest.MonkeyPatch) -> None:
    table = build_table(_config())
    reference, _ = _route(dataclasses.replace(table, native=None), _batch())

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(Router, "route_batch", broken)
    tally, _ = _route(table, _batch())
    assert _summary(tally) == _summary(reference)

    # A record that fails on the Python path as well is dead-lettered alone, for each app reading its topic.
    route = Router.route

    def failing_on_offset_103(self: Router, table: RoutingTable, message: Any, *args: Any, **kw: Any) -> Any:
        if message.offset == 103:
            raise RuntimeError("bug")
        return route(self, table, message, *args, **kw)

    monkeypatch.setattr(Router, "route", failing_on_offset_103)
    tally, _ = _route(table, _batch())
    rejected = [r for r in tally.sent if dict(r[3]).get(wire.DLQ_REASON) == b"rejected"]
    assert sorted(dict(r[3])[wire.APP] for r in rejected) == [b"audit", b"billing"]
    assert {r[1] for r in rejected} == {b"v103"}
    assert tally.offsets == reference.offsets


def test_parked_partition_resumes_where_it_stopped() -> None:
    table = build_table(_config())
    pending = wire.pending_topic(PREFIX, "billing")
    current = [(wire.CONFIG_VERSION, str(table.version).encode()), ("a", b"1")]  # parked under this version
    older = [(wire.CONFIG_VERSION, b"1"), ("a", b"1")]
    batch = [
        _Record(pending, 0, 5, older),  # due: routed again
        _Record(pending, 0, 6, current),  # not due: the partition stops here
        _Record(pending, 0, 7, older),  # after the stop: not looked at
        _Record("orders", 0, 40, [("a", b"2")]),
    ]
    for t in (table, dataclasses.replace(table, native=None)):
        tally, sink = _route(t, batch)
        assert sink.parked == [((pending, 0), 6)]
        assert tally.offsets == {(pending, 0): 6, ("orders", 0): 41}
        assert tally.messages_in == 2
        redriven = [r for r in tally.sent if r[0] != wire.dlq_topic(PREFIX, "billing")]
        # the redriven record for billing alone; the input record for billing (audit filters it out)
        assert [dict(r[3]).get(wire.REDRIVEN) is not None for r in redriven] == [True, False]


def test_a_sweep_takes_expired_records_behind_the_head_once_and_keeps_the_position_at_the_head() -> None:
    table = build_table(_config())  # billing has no expiration: only records' own expire
    pending = wire.pending_topic(PREFIX, "billing")
    dlq = wire.dlq_topic(PREFIX, "billing")
    parked = [(wire.CONFIG_VERSION, str(table.version).encode()), ("a", b"1")]
    expiring = [*parked, (wire.EXPIRATION, b"1s")]
    batch = [
        _Record(pending, 0, 5, parked),  # matches nothing under this version: the head
        _Record(pending, 0, 6, expiring, timestamp_ms=NOW_MS - 5_000),  # expired behind it
        _Record(pending, 0, 7, parked),  # waits as the head does
        _Record(pending, 0, 8, expiring),  # not expired yet
    ]
    router = BatchRouter(PREFIX, RouterMetrics(CollectorRegistry(), runtime=False), Sweeps(PREFIX, 0.0))
    tally, sink = _route(table, batch, router)
    assert [(topic, kw["value"]) for topic, kw in sink.produced] == [(dlq, b"v6")]
    assert dict(sink.produced[0][1]["headers"])[wire.DLQ_REASON] == b"expired"
    assert sink.parked == [((pending, 0), 5)]  # parked at the head once the pass read to the end
    assert tally.offsets == {(pending, 0): 5} and tally.first_offsets == {(pending, 0): 5}
    mark = tally.marks[(pending, 0)]
    assert mark is not None and mark_of(wire.version_metadata(table.version, mark.text())) == mark

    # The next pass (a new worker: the mark from the commit) passes over m6 and takes m8 once it has expired;
    # when the head goes at last, routing passes over both.
    again = BatchRouter(PREFIX, RouterMetrics(CollectorRegistry(), runtime=False), Sweeps(PREFIX, 0.0))
    again.sweeps.assigned(
        [TopicPartition(pending, 0, 5, metadata=wire.version_metadata(table.version, mark.text()))]
    )
    tally, sink = _route(table, batch, again, now_ms=NOW_MS + 2_000)
    assert [kw["value"] for _, kw in sink.produced] == [b"v8"] and tally.offsets == {(pending, 0): 5}
    newer = dataclasses.replace(table, version=table.version + 1)  # the head is due under a newer version
    tally, sink = _route(newer, batch, again, now_ms=NOW_MS + 2_000)
    assert [kw["value"] for _, kw in sink.produced] == [b"v5", b"v7"]  # routed under it, in order
    assert tally.offsets == {(pending, 0): 9} and tally.marks == {(pending, 0): None}  # the mark is done


def test_a_record_waiting_for_room_holds_up_the_others_but_not_the_expired_ones() -> None:
    # The app's own expiration this time (1 min), and a head that waits for room on its full group.
    jobs = AppConfig("jobs", ("orders",), "bmq", {"a": "int"}, expiration_ms=60_000)
    full = GroupConfig("jobs", "w", (SubscriptionConfig("a >= 0", max_unconfirmed=1),))
    table = build_table(Config(version=3, apps={"jobs": jobs}, groups={("jobs", "w"): full}))
    pending = wire.pending_topic(PREFIX, "jobs")
    waits = [(wire.CONFIG_VERSION, b"3"), (wire.PENDING_REASON, b"capacity"), ("a", b"1")]
    batch = [
        _Record(pending, 0, 0, waits),
        _Record(pending, 0, 1, waits, timestamp_ms=NOW_MS - 61_000),  # expired behind it
        _Record(pending, 0, 2, waits),
    ]
    router = BatchRouter(PREFIX, RouterMetrics(CollectorRegistry(), runtime=False), Sweeps(PREFIX, 0.0))
    tally, sink = _route(table, batch, router, lag={("jobs", "w"): 1})
    assert [(topic, kw["value"]) for topic, kw in sink.produced] == [(wire.dlq_topic(PREFIX, "jobs"), b"v1")]
    assert sink.parked == [((pending, 0), 0)] and tally.offsets == {(pending, 0): 0}
    # room (a measurement of 0 that routing does not raise here): the waiting ones go in order, the one
    # dead-lettered is passed over
    tally, sink = _route(table, batch, router, lag={("jobs", "w"): 0})
    assert [(topic, kw["value"]) for topic, kw in sink.produced] == [
        ("subroute.jobs.w", b"v0"),
        ("subroute.jobs.w", b"v2"),
    ]
    assert tally.offsets == {(pending, 0): 3} and tally.marks == {(pending, 0): None}
