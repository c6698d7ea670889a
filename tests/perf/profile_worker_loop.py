"""Where the worker's wall time goes on the peer workload (issue 26): ``python tests/perf/profile_worker_loop.py
[--messages N] [--size 10000] [--repeat R] [--guarantee at-least-once] [--variant NAME=SETTING,...]...``.

One local broker (Apache Kafka by default), the input and destinations of ``bench_streams_peer.py``
(``peer_workload``: 10 apps, 100 group topics and 10 pending topics of 4 partitions). Each variant routes the
whole pre-loaded input with the real worker, timed per part of its loop with wrappers around the worker's own
methods (a few hundred nanoseconds per record, the same for every variant):

* route: deciding and building the envelopes (``BatchRouter.route_batch`` without its produce calls);
* produce: the ``produce()`` calls of routed records, including any wait for a full local queue;
* serve reports: the producers' ``poll(0)`` that serves delivery reports between batches;
* queue full: the records ``produce()`` refused because the producer's queue was full (counted; their wait is
  in produce);
* flush: the producers' ``flush()`` (a commit that waits for every record produced so far), with the number of
  flushes: at-least-once they come from a window that must commit at once (drained input, too many closed
  windows waiting, shutdown);
* commit: the offset commits (``consumer.commit``) or, exactly-once, the transaction's commit;
* rest: the rest of the span (consume, the loop's bookkeeping).

And the CPU time per input record, from the first batch to the end of the run: the poll loop's own thread (all
of the worker's Python and the client calls it makes), and the broker's process when the script started it (a
local broker shares the machine's cores with the worker: what it spends per routed record is what the worker's
produce requests cost it).

A variant is a name and comma-separated settings: ``producers=N``, ``batch=N`` (records per poll),
``window=N`` (commit interval records), ``waiting=N`` (at-least-once: routed records closed windows may hold
while they wait for their reports, ``Checkpoint.max_waiting_records``), ``closed=N`` (the rule before it: a
flush forced as soon as more than N closed windows wait, N=1 being the worker before issue 26), ``young=N``
(the cyclic collector's young-generation threshold while routing, ``worker/tables.py``, with Python's default
older ratios of 10: ``young:700`` is the worker before the eighth session of issue 26), or any
librdkafka producer property (``linger.ms:20``). A variant with no settings is the worker as it is. Variants
run in a rotation that starts at another one each repetition, after ``--warm-up`` untimed runs (at least one) that
warm the broker and write every destination: all runs route into the same topics, rewound to the input's start in
between.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import types
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import peer_workload
import perfkit
from confluent_kafka import Message

from subroute.dev.process import LocalBroker
from subroute.ops.settings import Settings
from subroute.routing.decisions import RoutingTable
from subroute.worker import tables
from subroute.worker.checkpoint import AT_LEAST_ONCE, Checkpoint
from subroute.worker.tally import BatchTally
from subroute.worker.window import CommitInterval

PARTITIONS = 4
PARTS = ("route", "produce", "serve reports", "flush", "commit")


@dataclass
class Statistics:
    """Produce requests and records sent, per producer (librdkafka's cumulative counts: the last report's)."""

    requests: dict[str, int] = field(default_factory=dict)
    records: dict[str, int] = field(default_factory=dict)
    in_flight: list[int] = field(default_factory=list)
    # per report: the mean round trip of produce requests and the mean time records waited in the producer
    # before they were sent (librdkafka's ``rtt`` and ``int_latency`` windows), µs
    round_trip: list[float] = field(default_factory=list)
    queued: list[float] = field(default_factory=list)

    def report(self, text: str) -> None:
        stats = json.loads(text)
        if stats.get("type") != "producer":
            return
        brokers = [b for b in stats.get("brokers", {}).values() if b.get("nodeid", -1) >= 0]
        self.requests[stats["name"]] = sum(b.get("req", {}).get("Produce", 0) for b in brokers)
        self.records[stats["name"]] = stats.get("txmsgs", 0)
        self.in_flight.extend(b.get("waitresp_cnt", 0) for b in brokers)
        self.round_trip.extend(b["rtt"]["avg"] for b in brokers if b.get("rtt", {}).get("cnt"))
        self.queued.extend(b["int_latency"]["avg"] for b in brokers if b.get("int_latency", {}).get("cnt"))


@dataclass
class Profile:
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    flushes: int = 0
    queue_full: int = 0  # produce() refused a record because the producer's queue was full (then it waits)
    statistics: Statistics = field(default_factory=Statistics)
    wall: float = 0.0
    rate: float = 0.0
    # CPU seconds (poll-loop thread, broker process or None) at the first batch, and spent from then to the end
    started: tuple[float, float | None] | None = None
    loop_cpu: float = 0.0
    broker_cpu: float | None = None


def timed(profile: Profile, part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            profile.seconds[part] += time.perf_counter() - began

    return wrapper


class ProfiledWorker(perfkit.TimedWorker):
    def __init__(self, s: Settings, profile: Profile, broker_pid: int | None, **options: Any) -> None:
        super().__init__(s, perfkit.WorkerOptions(session_timeout_ms=perfkit.SESSION_TIMEOUT_MS, **options))
        self.profile = profile
        self.broker_pid = broker_pid
        self.waiting_bound: int | None = None
        self.closed: int | None = None
        self.batches.route_batch = timed(profile, "route", self.batches.route_batch)  # type: ignore[method-assign]
        produce = self.batches._produce

        def produce_timed(*args: Any) -> None:
            began = time.perf_counter()
            produce(*args)
            spent = time.perf_counter() - began
            profile.seconds["produce"] += spent
            profile.seconds["route"] -= spent  # inside route_batch's span

        self.batches._produce = produce_timed  # type: ignore[method-assign]

    def _process_batch(self, table: RoutingTable, batch: list[Message]) -> BatchTally:
        if self.profile.started is None:  # the poll loop's thread: this one
            self.profile.started = (time.thread_time(), perfkit.process_cpu_seconds(self.broker_pid))
        return super()._process_batch(table, batch)

    def _close(self) -> None:
        super()._close()  # the run ends once its last records are acknowledged and committed
        if self.profile.started is not None:
            loop, broker = self.profile.started
            self.profile.loop_cpu = time.thread_time() - loop
            now = perfkit.process_cpu_seconds(self.broker_pid)
            self.profile.broker_cpu = now - broker if now is not None and broker is not None else None

    def _open_clients(self) -> None:
        super()._open_clients()
        checkpoint, profile = self.checkpoint, self.profile
        assert checkpoint is not None
        producers = checkpoint.producers
        producers.poll = timed(profile, "serve reports", producers.poll)  # type: ignore[method-assign]
        flush = timed(profile, "flush", producers.flush)

        def counted_flush(*args: Any) -> int:
            profile.flushes += 1
            return int(flush(*args))

        producers.flush = counted_flush  # type: ignore[method-assign]
        produce_waiting = checkpoint.produce_waiting

        def counted_produce_waiting(*args: Any) -> None:
            profile.queue_full += 1
            produce_waiting(*args)

        checkpoint.produce_waiting = counted_produce_waiting  # type: ignore[method-assign]
        if self.waiting_bound is not None:
            checkpoint.max_waiting_records = self.waiting_bound
        if self.closed is not None:
            checkpoint.commit_if_due = types.MethodType(commit_if_due_before(self.closed), checkpoint)  # type: ignore[method-assign]
        checkpoint._commit_offsets = timed(profile, "commit", checkpoint._commit_offsets)  # type: ignore[method-assign]
        checkpoint._commit_transaction = timed(profile, "commit", checkpoint._commit_transaction)  # type: ignore[method-assign]


def commit_if_due_before(closed: int) -> Callable[[Checkpoint, bool], None]:
    """``Checkpoint.commit_if_due`` as it was before issue 26: a flush as soon as more than ``closed`` closed
    windows wait for their reports."""

    def commit_if_due(self: Checkpoint, drained: bool) -> None:
        if not self.exactly_once:
            self.producers.poll(0)
        due = self.window.due(self.interval, time.monotonic(), drained) or self._doomed is not None
        if self.exactly_once or drained:
            if due or self._closed:
                self.commit()
            return
        if due:
            self._closed.append(self.window)
            self._open_window()
            if len(self._closed) > closed:
                self.commit()
                return
        if self._closed:
            self._commit_settled()

    return commit_if_due


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    name, _, rest = text.partition("=")
    settings = dict(part.split(":", 1) for part in rest.split(",") if part) if rest else {}
    return name, settings


def run_variant(
    broker: LocalBroker, topic: str, prefix: str, settings: dict[str, str], args: argparse.Namespace
) -> Profile:
    """One worker run under ``prefix``, whose destination topics every run shares (``perfkit.ready_topics``:
    partitions not written just before cost the broker more), rewound to the input's start after it."""
    bootstrap = broker.bootstrap_servers
    workload = peer_workload.apps(args.size)
    worker_options: dict[str, Any] = {"guarantee": args.guarantee}
    kafka: dict[str, str] = {}
    waiting: int | None = None
    closed: int | None = None
    young: int | None = None
    for key, value in settings.items():
        if key == "producers":
            worker_options["producers"] = int(value)
        elif key == "batch":
            worker_options["batch_size"] = int(value)
        elif key == "window":
            worker_options["commit_interval"] = CommitInterval(records=int(value))
        elif key == "waiting":
            waiting = int(value)
        elif key == "closed":
            closed = int(value)
        elif key == "young":
            young = int(value)
        else:
            kafka[key] = value
    profile = Profile()
    # librdkafka's own statistics of the worker's producers (served by their poll and flush)
    reported: dict[str, Any] = (
        {"statistics.interval.ms": 200, "stats_cb": profile.statistics.report} if args.statistics else {}
    )
    s = Settings(bootstrap_servers=bootstrap, topic_prefix=prefix, kafka_config={**kafka, **reported})
    config = peer_workload.config(workload, topic, PARTITIONS)
    try:
        perfkit.write_config(s, config)
        worker = ProfiledWorker(s, profile, broker.pid, **worker_options)
        worker.waiting_bound, worker.closed = waiting, closed
        worker.expected = args.messages
        thresholds = (tables.YOUNG_COLLECTION_ALLOCATIONS, tables.OLDER_COLLECTION_RATIO)
        if young is not None:
            tables.YOUNG_COLLECTION_ALLOCATIONS = young
            tables.OLDER_COLLECTION_RATIO = 10  # Python's default
        try:
            worker.run()
        finally:
            tables.YOUNG_COLLECTION_ALLOCATIONS, tables.OLDER_COLLECTION_RATIO = thresholds
    finally:
        perfkit.rewind_worker(s, topic, PARTITIONS)
    timing = worker.timing
    if timing.produced != timing.messages:
        raise SystemExit(f"{timing.produced} records routed for {timing.messages}")
    profile.wall, profile.rate = timing.seconds, timing.rate
    return profile


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    perfkit.common_arguments(parser, messages=100_000, repeat=2)
    parser.add_argument("--size", type=int, default=10_000, help="subscriptions (10000)")
    parser.add_argument("--guarantee", default=AT_LEAST_ONCE)
    parser.add_argument(
        "--statistics",
        action="store_true",
        help="read librdkafka's statistics every 200 ms (records per produce request; costs the loop time)",
    )
    parser.add_argument(
        "--warm-up", type=int, default=2, help="untimed runs on the new broker first (2, at least 1)"
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=KEY:VALUE,...",
        help="a variant (repeatable); none: main only",
    )
    args = parser.parse_args()
    variants = [parse_variant(v) for v in args.variant] or [("main", {})]
    results: dict[str, list[Profile]] = defaultdict(list)
    print(f"(load average {_load()} before, {os.cpu_count()} cores)", flush=True)
    with perfkit.broker() as b:
        base = perfkit.settings(b.bootstrap_servers)
        topic = f"{base.topic_prefix}-orders"
        perfkit.create_topic(base, topic, PARTITIONS)
        perfkit.produce_input(base, topic, peer_workload.message_headers(args.messages))
        prefix = f"profile{uuid.uuid4().hex[:8]}"
        shared = perfkit.settings(b.bootstrap_servers, prefix=prefix)
        perfkit.ready_topics(
            shared,
            perfkit.output_topics(
                shared, peer_workload.config(peer_workload.apps(args.size), topic, PARTITIONS)
            ),
        )
        for _ in range(max(1, args.warm_up)):  # untimed: the broker warms up, the destinations are written
            run_variant(b, topic, prefix, {}, args)
        for rep in range(args.repeat):
            for i in range(len(variants)):
                name, settings = variants[(rep + i) % len(variants)]
                p = run_variant(b, topic, prefix, settings, args)
                results[name].append(p)
                shares = "  ".join(f"{part} {p.seconds[part] / p.wall:4.0%}" for part in PARTS)
                rest = 1 - sum(p.seconds[part] for part in PARTS) / p.wall
                print(
                    f"  {name:16} {p.rate:>9,.0f}/s  {p.wall:6.2f} s  {shares}  rest {rest:4.0%}  "
                    f"flushes {p.flushes}  queue full {p.queue_full}  records/request {_per_request(p.statistics)}  "
                    f"CPU µs/record: loop {_per_record(p.loop_cpu, p)} broker {_per_record(p.broker_cpu, p)}  "
                    f"(load {_load()})",
                    flush=True,
                )
    print(f"\nmedians (load average {_load()} after):")
    for name, _ in variants:
        rates = [p.rate for p in results[name]]
        print(f"  {name:16} {perfkit.spread(rates)}")


def _per_request(found: Statistics) -> str:
    requests = sum(found.requests.values())
    if not requests:
        return "n/a"
    mean = sum(found.in_flight) / max(1, len(found.in_flight))
    rtt = sum(found.round_trip) / max(1, len(found.round_trip)) / 1000
    queued = sum(found.queued) / max(1, len(found.queued)) / 1000
    return (
        f"{sum(found.records.values()) / requests:.0f} (in flight mean {mean:.1f}, round trip {rtt:.1f} ms, "
        f"queued {queued:.1f} ms)"
    )


def _per_record(seconds: float | None, p: Profile) -> str:
    return "n/a" if seconds is None or not p.rate else f"{seconds * 1e6 / (p.rate * p.wall):.1f}"


def _load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


if __name__ == "__main__":
    main()
