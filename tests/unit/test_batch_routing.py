"""The worker's batch routing without Kafka (router/worker/batch.py): a batch decided at once through the native
plan produces what routing each record through ``Router.route`` produces; a failure of the batch path routes the
records one by one, dead-lettering (``rejected``) only a record that fails there too. On a pending partition a
record that can go is routed past the records that still wait, and the commit says so; a pass decides with one
view of the consumers; a sweep takes the expired records that still wait, once, and leaves those routed past the
head alone; a partition whose routed-past set is at its bound stops at its head."""

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
from subroute.routing.passes import WOKEN_BY_PRESENCE, WOKEN_BY_ROOM
from subroute.routing.routed_past import past_of
from subroute.routing.snapshot import Snapshot
from subroute.routing.sweep import mark_of
from subroute.wire import version_metadata
from subroute.worker.batch import BatchRouter
from subroute.worker.pending import PendingPartitions
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
        self.resumed: list[tuple[str, int]] = []
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
        self.resumed += partitions

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
    lag: dict[tuple[str, str], int] | Snapshot | None = None,
) -> tuple[BatchTally, _Sink]:
    sink = _Sink()
    for record in batch:
        tp = (record.topic(), record.partition())
        sink.ends[tp] = max(sink.ends.get(tp, 0), record.offset() + 1)
    batches = router or BatchRouter(PREFIX, RouterMetrics(CollectorRegistry(), runtime=False))
    tally = batches.route_batch(table, batch, {} if lag is None else lag, now_ms, sink, sink, sink)  # type: ignore[arg-type]
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
    assert native.decisions and native.decode_errors == {"billing": {"a": 1}, "audit": {"a": 1}}  # b"x"
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


def _pending_router(every: float = 3600.0) -> BatchRouter:
    metrics = RouterMetrics(CollectorRegistry(), runtime=False)
    return BatchRouter(PREFIX, metrics, PendingPartitions(PREFIX, every))


def _values(sink: _Sink) -> list[tuple[str, bytes]]:
    return [(topic, kw["value"]) for topic, kw in sink.produced]


def _committed(tally: BatchTally, tp: tuple[str, int]) -> TopicPartition:
    """The commit the worker would write for ``tp`` after this batch."""
    return TopicPartition(
        tp[0], tp[1], tally.offsets[tp], metadata=version_metadata(tally.version, tally.metadata[tp])
    )


def test_a_record_that_matches_nothing_stays_and_the_records_behind_it_that_can_go_go_past_it() -> None:
    table = build_table(_config())
    pending = wire.pending_topic(PREFIX, "billing")
    current = [(wire.CONFIG_VERSION, str(table.version).encode()), ("a", b"1")]  # parked under this version
    older = [(wire.CONFIG_VERSION, b"1"), ("a", b"1")]
    batch = [
        _Record(pending, 0, 5, older),  # due: routed again
        _Record(pending, 0, 6, current),  # not due: it stays, the position with it
        _Record(pending, 0, 7, older),  # due: routed past it
        _Record("orders", 0, 40, [("a", b"2")]),
    ]
    for t in (table, dataclasses.replace(table, native=None)):
        tally, sink = _route(t, batch, _pending_router())
        assert sink.parked == [] and [v for _, v in _values(sink) if v != b"v40"] == [b"v5", b"v7"]
        assert tally.offsets == {(pending, 0): 6, ("orders", 0): 41}
        past = past_of(_committed(tally, (pending, 0)).metadata, 6)
        assert past is not None and list(past) == [7]
        assert tally.messages_in == 3
        redriven = [r for r in tally.sent if r[0] != wire.dlq_topic(PREFIX, "billing")]
        assert [dict(r[3]).get(wire.REDRIVEN) is not None for r in redriven] == [True, True, False]


TIERS = Config(
    version=3,
    apps={"jobs": AppConfig("jobs", ("orders",), "bmq", {"g": "string"}, presence="required")},
    groups={
        ("jobs", "vip"): GroupConfig("jobs", "vip", (SubscriptionConfig('g == "vip"', max_unconfirmed=2),)),
        ("jobs", "general"): GroupConfig("jobs", "general", (SubscriptionConfig('g == "general"'),)),
    },
)
PENDING_JOBS = wire.pending_topic(PREFIX, "jobs")


def _waiting(offset: int, group: str, timestamp_ms: int = NOW_MS - 10, **extra: bytes) -> _Record:
    headers = [(wire.CONFIG_VERSION, b"3"), (wire.PENDING_REASON, b"no-consumer"), ("g", group.encode())]
    return _Record(PENDING_JOBS, 0, offset, [*headers, *extra.items()], timestamp_ms=timestamp_ms)


def test_records_waiting_for_an_absent_group_do_not_hold_up_those_of_a_group_with_room_and_a_new_worker_passes_over_them() -> (
    None
):
    table = build_table(TIERS)
    general, vip = ("jobs", "general"), ("jobs", "vip")
    batch = [_waiting(0, "general"), _waiting(1, "vip"), _waiting(2, "general"), _waiting(3, "vip")]
    router = _pending_router()
    # vip is present with room for one; general is absent
    tally, sink = _route(table, batch, router, lag=Snapshot({vip: 1}, absent=frozenset({general})))
    assert _values(sink) == [("subroute.jobs.vip", b"v1")]  # m3 waits for room, behind m1
    commit = _committed(tally, (PENDING_JOBS, 0))
    assert commit.offset == 0 and list(past_of(commit.metadata, 0) or ()) == [1]

    # A new worker (the commit is all it knows) with vip's room back: it passes over m1, routes m3, and the
    # general records stay where they are.
    again = _pending_router()
    again.pending.assigned([commit])
    tally, sink = _route(table, batch, again, lag=Snapshot({vip: 0}, absent=frozenset({general})))
    assert _values(sink) == [("subroute.jobs.vip", b"v3")]
    commit = _committed(tally, (PENDING_JOBS, 0))
    assert commit.offset == 0 and list(past_of(commit.metadata, 0) or ()) == [1, 3]

    # general attaches: a pass from the position routes the general records in order, passing over the rest
    live = Snapshot({vip: 0}, absent=frozenset())
    sink = _Sink()
    again.pending.follow(live)
    again.pending.wake(sink, sink, {"jobs": WOKEN_BY_PRESENCE}, table, NOW_MS)  # type: ignore[arg-type]
    assert sink.sought == [((PENDING_JOBS, 0), 0)]
    tally, sink = _route(table, batch, again, lag=live)
    assert _values(sink) == [("subroute.jobs.general", b"v0"), ("subroute.jobs.general", b"v2")]
    assert tally.offsets == {(PENDING_JOBS, 0): 4} and tally.metadata[(PENDING_JOBS, 0)] == ""


def test_a_pass_decides_with_the_consumers_as_it_began_so_a_later_record_does_not_overtake_a_waiting_one() -> (
    None
):
    table = build_table(TIERS)
    general, vip = ("jobs", "general"), ("jobs", "vip")
    router = _pending_router()
    full = Snapshot({vip: 2}, absent=frozenset({general}))
    _, sink = _route(table, [_waiting(0, "vip"), _waiting(1, "general")], router, lag=full)
    assert _values(sink) == []  # m0 waits for room on vip
    # vip confirms while the pass still reads: its next record must not overtake m0
    roomy = Snapshot({vip: 0}, absent=frozenset({general}), started_at=5.0)
    _, sink = _route(table, [_waiting(2, "vip")], router, lag=roomy)
    assert _values(sink) == []
    # the confirm wakes a pass over the partition: m0 then m2, in order
    router.pending.wake(sink, sink, {"jobs": WOKEN_BY_ROOM}, table, NOW_MS)  # type: ignore[arg-type]
    batch = [_waiting(0, "vip"), _waiting(1, "general"), _waiting(2, "vip")]
    tally, sink = _route(table, batch, router, lag=roomy)
    assert _values(sink) == [("subroute.jobs.vip", b"v0"), ("subroute.jobs.vip", b"v2")]
    assert tally.offsets == {(PENDING_JOBS, 0): 1} and roomy[vip] == 2  # counted where the worker counts


def test_a_sweep_takes_expired_records_that_wait_once_and_leaves_those_routed_past_the_head() -> None:
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
    router = _pending_router(every=0.0)
    tally, sink = _route(table, batch, router)
    assert _values(sink) == [(dlq, b"v6")]
    assert dict(sink.produced[0][1]["headers"])[wire.DLQ_REASON] == b"expired"
    assert sink.parked == [] and tally.offsets == {(pending, 0): 5}  # the position stays at the head
    commit = _committed(tally, (pending, 0))
    mark = mark_of(commit.metadata)
    assert mark is not None and mark.has_left(6, NOW_MS - 5_000, 1000)

    # The next worker (the mark from the commit) passes over m6 and takes m8 once it has expired; when the head
    # goes at last, routing passes over both.
    again = _pending_router(every=0.0)
    again.pending.assigned([commit])
    tally, sink = _route(table, batch, again, now_ms=NOW_MS + 2_000)
    assert [v for _, v in _values(sink)] == [b"v8"] and tally.offsets == {(pending, 0): 5}
    newer = dataclasses.replace(table, version=table.version + 1)  # the head is due under a newer version
    sink = _Sink()
    again.pending.renew(sink, sink, newer, NOW_MS + 2_000)  # type: ignore[arg-type]
    tally, sink = _route(newer, batch, again, now_ms=NOW_MS + 2_000)
    assert [v for _, v in _values(sink)] == [b"v5", b"v7"]  # routed under it, in order
    assert tally.offsets == {(pending, 0): 9} and tally.metadata == {(pending, 0): ""}  # the mark is done


def test_the_sweep_passes_over_records_routed_past_the_head_when_they_expire_there() -> None:
    jobs = dataclasses.replace(TIERS.apps["jobs"], expiration_ms=60_000)
    table = build_table(dataclasses.replace(TIERS, apps={"jobs": jobs}))
    general, vip = ("jobs", "general"), ("jobs", "vip")
    old = NOW_MS - 50_000
    batch = [_waiting(0, "general"), _waiting(1, "vip", old), _waiting(2, "general", old)]
    router = _pending_router(every=0.0)
    tally, sink = _route(table, batch, router, lag=Snapshot({vip: 0}, absent=frozenset({general})))
    assert _values(sink) == [("subroute.jobs.vip", b"v1")]  # routed past m0 before it expired
    # 20 s later m1 and m2 have expired where they are: the sweep dead-letters m2, not m1 (it went)
    sweep = _Sink()
    router.pending.tick(sweep, sweep, table, NOW_MS + 20_000)  # type: ignore[arg-type]
    assert sweep.sought == [((PENDING_JOBS, 0), 0)]
    tally, sink = _route(
        table, batch, router, now_ms=NOW_MS + 20_000, lag=Snapshot({vip: 0}, absent=frozenset({general}))
    )
    assert _values(sink) == [(wire.dlq_topic(PREFIX, "jobs"), b"v2")]
    assert tally.offsets == {(PENDING_JOBS, 0): 0}


def test_a_partition_whose_routed_past_set_is_full_stops_at_its_head_until_the_head_moves() -> None:
    table = build_table(TIERS)
    general = ("jobs", "general")
    router = BatchRouter(
        PREFIX, RouterMetrics(CollectorRegistry(), runtime=False), PendingPartitions(PREFIX, 3600.0, budget=1)
    )
    lag = Snapshot(absent=frozenset({general}))  # vip's count unmeasured: room for all
    batch = [_waiting(i, "general" if i % 2 == 0 else "vip") for i in range(12)]
    tally, sink = _route(table, batch, router, lag=lag)
    # one byte holds the bitmap of offsets 0-7: m1, m3, m5, m7 go past m0; m9 and m11 would not fit, so they stay
    assert [v for _, v in _values(sink)] == [b"v1", b"v3", b"v5", b"v7"]
    assert list(past_of(_committed(tally, (PENDING_JOBS, 0)).metadata, 0) or ()) == [1, 3, 5, 7]
    assert sink.parked == [((PENDING_JOBS, 0), 0)]  # the pass over, the partition waits at its head
    assert tally.offsets == {(PENDING_JOBS, 0): 0}

    # general attaches: the pass from the head routes the general records, passes over what went, and the vip
    # records that had to stay go in their turn
    live = Snapshot()
    router.pending.follow(live)
    wake = _Sink()
    router.pending.wake(wake, wake, {"jobs": WOKEN_BY_PRESENCE}, table, NOW_MS)  # type: ignore[arg-type]
    assert wake.resumed == [(PENDING_JOBS, 0)] and wake.sought == [((PENDING_JOBS, 0), 0)]
    tally, sink = _route(table, batch, router, lag=live)
    assert [v for _, v in _values(sink)] == [b"v0", b"v2", b"v4", b"v6", b"v8", b"v9", b"v10", b"v11"]
    assert tally.offsets == {(PENDING_JOBS, 0): 12} and sink.parked == []


def test_a_pass_decides_again_only_the_records_whose_wait_the_change_concerns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = build_table(TIERS)
    general, vip = ("jobs", "general"), ("jobs", "vip")
    decided: list[int] = []
    route = Router.route

    def counting(self: Router, table: RoutingTable, message: Any, *args: Any, **kw: Any) -> Any:
        decided.append(message.offset)
        return route(self, table, message, *args, **kw)

    monkeypatch.setattr(Router, "route", counting)
    router = _pending_router()
    batch = [_waiting(0, "general"), _waiting(1, "vip"), _waiting(2, "general"), _waiting(3, "vip")]
    _, sink = _route(table, batch, router, lag=Snapshot({vip: 2}, absent=frozenset({general})))
    # The first reading decides every record, but one whose headers are those of a record that stayed before it
    # in the pass (m3, as m1): the view never improves within a pass, so it stays for the same reason.
    assert _values(sink) == [] and decided == [0, 1, 2]
    # vip confirms: the pass decides the records waiting for room, not those waiting for a consumer
    decided.clear()
    roomy = Snapshot({vip: 0}, absent=frozenset({general}), started_at=5.0)
    router.pending.wake(sink, sink, {"jobs": WOKEN_BY_ROOM}, table, NOW_MS)  # type: ignore[arg-type]
    tally, sink = _route(table, batch, router, lag=roomy)
    assert decided == [1, 3] and _values(sink) == [("subroute.jobs.vip", b"v1"), ("subroute.jobs.vip", b"v3")]
    # general attaches: its records are decided again, and go
    decided.clear()
    present = Snapshot({vip: 2}, started_at=6.0)
    router.pending.wake(sink, sink, {"jobs": WOKEN_BY_PRESENCE}, table, NOW_MS)  # type: ignore[arg-type]
    tally, sink = _route(table, batch, router, lag=present)
    assert decided == [0, 2] and [v for _, v in _values(sink)] == [b"v0", b"v2"]
    assert tally.offsets == {(PENDING_JOBS, 0): 4}


def test_a_record_that_waits_after_a_change_that_concerned_it_is_decided_again_by_the_next_pass() -> None:
    table = build_table(TIERS)
    general, vip = ("jobs", "general"), ("jobs", "vip")
    router = _pending_router()
    _, sink = _route(
        table, [_waiting(0, "general")], router, lag=Snapshot({vip: 2}, absent=frozenset({general}))
    )
    # vip confirms: nothing waits for room yet, so no pass starts...
    roomy = Snapshot({vip: 0}, absent=frozenset({general}), started_at=5.0)
    router.pending.wake(sink, sink, {"jobs": WOKEN_BY_ROOM}, table, NOW_MS)  # type: ignore[arg-type]
    assert sink.sought == []
    # ...but a vip record parked before the confirms arrives now and is decided with the pass's older view
    _, sink = _route(table, [_waiting(1, "vip")], router, lag=roomy)
    assert _values(sink) == []
    # so the next pass decides it again (between batches), with the consumers as they are now
    router.pending.tick(sink, sink, table, NOW_MS)  # type: ignore[arg-type]
    assert sink.sought == [((PENDING_JOBS, 0), 0)]
    tally, sink = _route(table, [_waiting(0, "general"), _waiting(1, "vip")], router, lag=roomy)
    assert _values(sink) == [("subroute.jobs.vip", b"v1")] and tally.offsets == {(PENDING_JOBS, 0): 0}
