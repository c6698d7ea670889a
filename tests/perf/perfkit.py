"""Shared pieces of the router benchmarks (``tests/perf/bench_*.py``): workloads, a local broker, input
loading, the pass-through pipe (the ceiling) and a worker that times its own batches.

Not a test module: pytest collects nothing here. Every bench starts its own broker (Apache Kafka; Tansu with
``SUBROUTE_TEST_BROKER=tansu``, as for the tests), so the figures of one run are measured against each other on
the same machine at the same time.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from confluent_kafka import Consumer, Message, Producer, TopicPartition

from subroute import wire
from subroute.config.codec import encode
from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig
from subroute.config.store import config_topic_spec
from subroute.dev.broker import LocalBroker, local_broker
from subroute.kafka.clients import TopicSpec, admin_client, ensure_topics
from subroute.ops.metrics import RouterMetrics
from subroute.ops.settings import Settings
from subroute.routing import native_routing
from subroute.routing.decisions import RoutingTable
from subroute.wire import Headers
from subroute.worker.loop import Worker, WorkerOptions
from subroute.worker.tally import BatchTally

ROOT = Path(__file__).resolve().parents[2]

APPS = 10
GROUPS_PER_APP = 5
CUSTOMERS = 10_000
AMOUNTS = 10_000
REGIONS = 1_000
ORDER_TYPES = ("EXPRESS", "STANDARD", "BULK")
VALUE_BYTES = 200
SQL92_APPS = frozenset({7, 8, 9})  # the last three apps are sql92 (IN, BETWEEN, <>); the rest bmq
TYPES = {"App": "string", "CustomerId": "int", "Amount": "int", "Region": "string", "OrderType": "string"}
# Client settings both the pipe and the worker use (the worker's own defaults are the same).
SESSION_TIMEOUT_MS = 6000


# --- workloads ---------------------------------------------------------------------------------------------------


def app_name(k: int) -> str:
    return f"app{k}"


def _filter(k: int, fanout: int) -> str:
    """App k takes messages whose App header is one of app k, k-1, ... (``fanout`` of them): with fanout 1 the
    app filters are disjoint, with 3 every message passes three app filters."""
    sql = k in SQL92_APPS
    names_ = [app_name((k - j) % APPS) for j in range(fanout)]
    if sql:
        return "App IN (" + ", ".join(f"'{n}'" for n in names_) + ")"
    return " || ".join(f'App == "{n}"' for n in names_)


def _subscription(k: int, i: int, per_kind: int) -> str:
    """The i-th consumer subscription of app k; five kinds in turn, each kind partitioning its key space so that
    a message matches about one subscription of each kind whatever the number of subscriptions."""
    sql = k in SQL92_APPS
    kind, j = i % 5, i // 5
    if kind == 0:  # equality
        c = (j * (CUSTOMERS // per_kind) + k) % CUSTOMERS
        return f"CustomerId = {c}" if sql else f"CustomerId == {c}"
    if kind == 1:  # a range window of Amount
        width = max(1, AMOUNTS // per_kind)
        lo = j * width
        if sql:
            return f"Amount BETWEEN {lo} AND {lo + width - 1}"
        return f"Amount >= {lo} && Amount < {lo + width}"
    if kind == 2:  # IN (sql92) / string equality (bmq)
        r1, r2 = (2 * j) % REGIONS, (2 * j + 1) % REGIONS
        if sql:
            return f"Region IN ('r{r1}', 'r{r2}') AND OrderType <> 'BULK'"
        return f'Region == "r{r1}" && OrderType != "BULK"'
    if kind == 3:  # string comparisons
        r = (j * 7 + 3) % REGIONS
        t = ORDER_TYPES[j % 3]
        if sql:
            return f"Region = 'r{r}' AND OrderType = '{t}'"
        return f'Region == "r{r}" && OrderType == "{t}"'
    # mixed: an OR of equalities, a range and a string inequality
    c1 = (j * (CUSTOMERS // per_kind) + 5000 + k) % CUSTOMERS
    c2 = (c1 + 1) % CUSTOMERS
    if sql:
        return f"(CustomerId = {c1} OR CustomerId = {c2}) AND Amount > {j % 100} AND Region <> 'r0'"
    return f'(CustomerId == {c1} || CustomerId == {c2}) && Amount > {j % 100} && Region != "r0"'


def subscription_config(
    total: int,
    topic: str = "orders",
    fanout: int = 1,
    version: int = 1,
    groups_per_app: int = GROUPS_PER_APP,
    partitions: int = 1,
    every_group: bool = False,
) -> Config:
    """``total`` expressions over ``APPS`` apps: per app one filter, one catch-all subscription (priority 0) and
    the rest specific subscriptions (priority 1) spread over ``groups_per_app`` groups (topics of
    ``partitions``). With one expression per
    app (``total`` = 10) each app has its filter and one group without subscriptions (it takes everything);
    ``every_group`` makes all ``groups_per_app`` groups, those left without subscriptions taking everything (so
    the same topics at every size; round-robin among them)."""
    per_app = max(1, total // APPS)
    specific = max(0, per_app - 2)
    per_kind = max(1, -(-specific // 5))
    apps: dict[str, AppConfig] = {}
    groups: dict[tuple[str, str], GroupConfig] = {}
    for k in range(APPS):
        name = app_name(k)
        apps[name] = AppConfig(
            name=name,
            inputs=(topic,),
            dialect="sql92" if k in SQL92_APPS else "bmq",
            properties=TYPES,
            filter=(_filter(k, fanout),),
            partitions=partitions,
            presence="ignored",  # the benchmarks route with no consumer attached
        )
        subs: list[list[SubscriptionConfig]] = [[] for _ in range(groups_per_app)]
        if per_app >= 2:
            subs[0].append(SubscriptionConfig("Amount >= 0", priority=0))
        for i in range(specific):
            subs[(i // 5) % groups_per_app].append(SubscriptionConfig(_subscription(k, i, per_kind), 1))
        for g, group_subs in enumerate(subs):
            if group_subs or g == 0 or every_group:
                groups[(name, f"g{g}")] = GroupConfig(name, f"g{g}", tuple(group_subs), order=g)
    return Config(version, apps, groups)


def expression_count(config: Config) -> int:
    return sum(len(a.filter) for a in config.apps.values()) + sum(
        len(g.subscriptions) for g in config.groups.values()
    )


def message_headers(count: int, seed: int = 11) -> list[Headers]:
    """Headers of ``count`` orders: App, CustomerId, Amount, Region, OrderType (as UTF-8 text)."""
    rng = random.Random(seed)
    out: list[Headers] = []
    for _ in range(count):
        out.append(
            [
                ("App", app_name(rng.randrange(APPS)).encode()),
                ("CustomerId", str(rng.randrange(CUSTOMERS)).encode()),
                ("Amount", str(rng.randrange(AMOUNTS)).encode()),
                ("Region", f"r{rng.randrange(REGIONS)}".encode()),
                ("OrderType", rng.choice(ORDER_TYPES).encode()),
            ]
        )
    return out


# --- the broker and its topics ------------------------------------------------------------------------------------


@contextlib.contextmanager
def broker() -> Iterator[LocalBroker]:
    engine = os.environ.get("SUBROUTE_TEST_BROKER", "kafka")
    with local_broker(engine) as b:
        print(f"({engine} broker on {b.bootstrap_servers})", flush=True)
        yield b


def settings(bootstrap: str, prefix: str | None = None) -> Settings:
    return Settings(bootstrap_servers=bootstrap, topic_prefix=prefix or f"bench{uuid.uuid4().hex[:8]}")


def create_topic(s: Settings, topic: str, partitions: int) -> None:
    ensure_topics(admin_client(s), [TopicSpec(topic, partitions)])


def produce_input(
    s: Settings,
    topic: str,
    headers: Sequence[Headers],
    start: int = 0,
    keyed: bool = True,
) -> float:
    """Produce one record per header list (200-byte values, keys ``k<i>``, or none if not ``keyed``); seconds
    it took."""
    producer = Producer(s.client_config({"linger.ms": 5, "enable.idempotence": True, "acks": "all"}))
    value = b"v" * VALUE_BYTES
    began = time.perf_counter()
    for i, h in enumerate(headers):
        key = f"k{start + i}".encode() if keyed else None
        while True:
            try:
                producer.produce(topic, value=value, key=key, headers=h)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)
    return time.perf_counter() - began


def write_config(s: Settings, config: Config) -> int:
    """Write every app and group of ``config`` to the config topic; the number of records written."""
    ensure_topics(admin_client(s), [config_topic_spec(s)])
    producer = Producer(s.client_config({"linger.ms": 5, "enable.idempotence": True, "acks": "all"}))
    values: list[AppConfig | GroupConfig] = [*config.apps.values(), *config.groups.values()]
    for v in values:
        key, payload, hdrs = encode(v)
        producer.produce(s.config_topic, key=key.encode(), value=payload, headers=hdrs)
    producer.flush(60)
    return len(values)


def output_topics(s: Settings, config: Config) -> list[TopicSpec]:
    specs = []
    for app in config.apps.values():
        n = app.partitions or 1
        specs.append(TopicSpec(wire.pending_topic(s.topic_prefix, app.name), n))
        specs.append(TopicSpec(wire.dlq_topic(s.topic_prefix, app.name), n))
    for a, g in config.groups:
        specs.append(TopicSpec(wire.group_topic(s.topic_prefix, a, g), config.apps[a].partitions or 1))
    return specs


def ready_topics(s: Settings, specs: Sequence[TopicSpec]) -> None:
    """Create ``specs`` and write one record to each partition: a topic just created has no leaders yet, and the
    first run to write to 440 new partitions would otherwise be timed waiting for them.

    That is not enough to compare two runs fairly: writing partitions that were not written just before costs the
    local broker several times the CPU per record, nearly all of it kernel time (measured: 28-98 µs per record on
    new topics, 26-31 on topics last written minutes before, against 7-10 on topics written seconds before by a
    full pass; neither waiting 30 s after creating them nor 250 records per partition written just before lowered
    it). A benchmark that compares runs writes them all, back to back, into the topics an untimed run has just
    written (``rewind_worker``)."""
    ensure_topics(admin_client(s), list(specs))
    producer = Producer(producer_config(s))
    for spec in specs:
        if spec.name.endswith(".pending"):
            continue  # read by the worker: a record there would be routed, and counted, as a pending one
        for partition in range(spec.partitions):
            producer.produce(spec.name, value=b"warm-up", partition=partition)
    producer.flush(120)


def rewind_worker(s: Settings, topic: str, partitions: int) -> None:
    """Commit the start of ``topic`` for the worker group of ``s``'s prefix: the next worker under that prefix
    routes the whole input again, into the same (already written) destination topics. A commit outside the
    group's membership, which every broker takes from a group with no members."""
    consumer = Consumer(consumer_config(s, wire.worker_group_id(s.topic_prefix)))
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, 0) for p in range(partitions)], asynchronous=False)
    finally:
        consumer.close()


@dataclass(frozen=True)
class Destinations:
    """The topics a config routes to under a prefix, written by an untimed worker (``write_destinations``)."""

    names: frozenset[str]  # every output topic, pending and dead-letter ones included
    sinks: list[str]  # where the worker writes (it reads the pending topics): what a fan-out pipe writes to


def write_destinations(
    s: Settings, config: Config, topic: str, messages: int, partitions: int
) -> Destinations:
    """Untimed: a worker routes the whole of ``topic`` under ``config`` into its destination topics, then its
    group is rewound to the input's start, so that every timed run after it, pipe or worker, writes topics
    written just before. Partitions not written just before cost the broker several times the CPU per record
    (``ready_topics``), and the first runs on a new broker were measured up to 3x slower than later ones
    whatever they ran: without this pass, whichever run wrote first paid for both."""
    outputs = output_topics(s, config)
    ready_topics(s, outputs)
    write_config(s, config)
    run_worker(s, messages)
    rewind_worker(s, topic, partitions)
    return Destinations(
        frozenset(spec.name for spec in outputs),
        [spec.name for spec in outputs if not spec.name.endswith(".pending")],
    )


def drop_topics(s: Settings, topics: Sequence[str]) -> None:
    admin = admin_client(s)  # kept alive until every future has its answer
    for future in admin.delete_topics(list(topics), operation_timeout=60).values():
        future.result()


# --- measuring ---------------------------------------------------------------------------------------------------


@dataclass
class Run:
    """Timing of one consumer (pipe or worker) over a pre-loaded input."""

    messages: int = 0
    produced: int = 0
    first: float | None = None
    last: float = 0.0
    batches: list[tuple[float, float, int, int]] = field(default_factory=list)  # (start, end, n, version)

    @property
    def seconds(self) -> float:
        return self.last - (self.first or self.last)

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def produced_rate(self) -> float:
        return self.produced / self.seconds if self.seconds > 0 else 0.0


def consumer_config(s: Settings, group: str) -> dict[str, Any]:
    return s.client_config(
        {"group.id": group, "enable.auto.commit": False, "isolation.level": "read_committed"},
        defaults={
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
        },
    )


def producer_config(s: Settings) -> dict[str, Any]:
    return s.client_config({"acks": "all", "enable.idempotence": True}, defaults={"linger.ms": 5})


ROUTING_HEADERS_SAMPLE: Headers = [
    (wire.APP, b"app3"),
    (wire.GROUP, b"g2"),
    (wire.SUBSCRIPTION, b'Region == "r12" && OrderType != "BULK"'),
    (wire.CONFIG_VERSION, b"61"),
    (wire.ROUTED_AT, b"1795320112822"),
]


def run_pipe(
    s: Settings, source: str, sink: str, expected: int, batch_size: int = 2000, routing_headers: bool = False
) -> Run:
    """The ceiling: consume a batch, produce every record with its key, headers and timestamp, flush, commit.

    With ``routing_headers`` it also adds the six headers the router adds (same names, similar sizes): the
    ceiling of any router that keeps the routing headers of docs/design.md §2 on this broker.
    """
    consumer = Consumer(consumer_config(s, f"{s.topic_prefix}.pipe"))
    producer = Producer(
        {**producer_config(s), "on_delivery": _pipe_delivered, "delivery.report.only.error": True}
    )
    _pipe_failures.clear()
    consumer.subscribe([source])
    run = Run()
    try:
        while run.messages < expected:
            batch = consumer.consume(batch_size, timeout=0.2)
            if not batch:
                continue
            started = time.perf_counter()
            run.first = run.first or started
            offsets: dict[tuple[str, int], int] = {}
            produce = producer.produce
            for m in batch:
                if m.error() is not None:
                    continue
                topic, partition, offset = m.topic(), m.partition(), m.offset()
                headers = m.headers()
                if routing_headers:
                    headers = [
                        *(headers or ()),
                        (wire.SOURCE, f"{topic}/{partition}/{offset}".encode()),
                        *ROUTING_HEADERS_SAMPLE,
                    ]
                while True:
                    try:
                        produce(
                            sink, value=m.value(), key=m.key(), headers=headers, timestamp=m.timestamp()[1]
                        )
                        break
                    except BufferError:
                        producer.poll(0.05)
                offsets[(topic, partition)] = offset + 1
            producer.flush()
            if _pipe_failures:
                raise RuntimeError(f"pipe: {len(_pipe_failures)} records not delivered")
            consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
            )
            run.messages += len(batch)
            run.produced += len(batch)
            run.last = time.perf_counter()
            run.batches.append((started, run.last, len(batch), 0))
    finally:
        consumer.close()
    return run


_pipe_failures: list[object] = []


def _pipe_delivered(error: object, message: object) -> None:
    if error is not None:
        _pipe_failures.append(error)


class TimedWorker(Worker):
    """The real worker, recording when each batch started and ended and under which config version."""

    def __init__(self, s: Settings, options: WorkerOptions, expected: int | None = None) -> None:
        super().__init__(s, options, RouterMetrics())
        self.timing = Run()
        self.expected = expected
        self.on_batch: Callable[[TimedWorker], None] | None = None

    def _process_batch(self, table: RoutingTable, batch: list[Message]) -> BatchTally:
        started = time.perf_counter()
        self.timing.first = self.timing.first or started
        tally = super()._process_batch(table, batch)
        self.timing.produced += len(tally.sent)
        t = self.timing
        t.last = time.perf_counter()
        t.messages += sum(1 for m in batch if m.error() is None)  # not the partition-end events
        t.batches.append((started, t.last, len(batch), table.version))
        if self.on_batch is not None:
            self.on_batch(self)
        if self.expected is not None and t.messages >= self.expected:
            self.stop()
        return tally

    def _close(self) -> None:
        # The run ends when its last records are acknowledged and their offsets committed, as the pipe's does.
        if self.checkpoint is not None and self.timing.first is not None:
            self.checkpoint.close()
            self.timing.last = time.perf_counter()
            # Closed (its producers too, since the worker closes them): the worker's own close would close them
            # again, which confluent-kafka refuses.
            self.checkpoint = None
        super()._close()


def run_worker(s: Settings, expected: int, **options: Any) -> TimedWorker:
    """Route ``expected`` input records with one in-process worker; returns it with its timing."""
    worker = TimedWorker(s, WorkerOptions(session_timeout_ms=SESSION_TIMEOUT_MS, **options), expected)
    worker.run()
    return worker


def run_in_thread(fn: Callable[[], Any]) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)
    thread.start()
    return thread


# --- reporting ---------------------------------------------------------------------------------------------------


def process_cpu_seconds(pid: int | None) -> float | None:
    """User and system CPU seconds process ``pid`` has used (Linux's /proc); None where that cannot be read."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def spread(values: Sequence[float], fmt: str = "{:.0f}") -> str:
    """``median (min-max, n runs)``."""
    if not values:
        return "n/a"
    return f"{fmt.format(median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))}, {len(values)} runs)"


def verdict(ok: bool) -> str:
    return "holds" if ok else "DOES NOT HOLD"


def python_routing_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--python-routing",
        action="store_true",
        help="route without the native plan (every record through Router.route): the figures before it",
    )


def unkeyed_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--unkeyed",
        action="store_true",
        help="input records without keys: every producer's records then go through librdkafka's sticky "
        "partitioner (one partition per topic at a time), as routed records of unkeyed input do",
    )


def use_python_routing() -> None:
    """From now on, tables are built without the native plan, so every record takes ``Router.route`` (the
    Python plans), as before the worker used the native plan (issue 13): the "before" of a comparison run on
    the same machine and code. Only the routing differs; the batch loop around it is today's."""
    native_routing.build_native = lambda *args, **kwargs: None


def common_arguments(parser: argparse.ArgumentParser, messages: int, repeat: int = 3) -> None:
    parser.add_argument(
        "--messages", type=int, default=messages, help=f"input records per run (default {messages})"
    )
    parser.add_argument(
        "--repeat", type=int, default=repeat, help=f"runs per figure, median reported ({repeat})"
    )
