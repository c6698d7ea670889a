"""subroute against the Kafka Streams application one would write instead (issue 26):
``python tests/perf/bench_streams_peer.py [--messages N] [--sizes 10,1000,10000] [--repeat R]
[--guarantees at-least-once,exactly-once] [--check-every K] [--warm-up N] [--streams-config NAME=VALUE]...``.

One local broker (Apache Kafka by default; Tansu with ``SUBROUTE_TEST_BROKER=tansu``), one pre-loaded input
topic of ``--partitions`` partitions (200-byte values, four headers, keys ``k<i>``), the workload of
``peer_workload.py``: 10 apps with disjoint filters on a region, each record matching exactly one of its app's
subscriptions, which combine customer ranges with order-type and amount conditions (at 1,000 subscriptions and
more, 100 group topics of ``--partitions`` partitions). For each size and guarantee, in the same run, each router
routes the whole input into topics of its own prefix, which are read back and deleted before the other runs:

* subroute: the worker as shipped (``subroute worker``, in this process and timed per batch as the other
  benchmarks time it), ``--guarantee at-least-once`` or ``exactly-once``;
* kafka-streams: ``tests/perf/streams_peer`` (Kafka Streams at the broker's version, a linear scan of Java
  predicates per app, a ``TopicNameExtractor`` to the same topic names, the same routing headers), one stream
  thread, ``at_least_once`` or ``exactly_once_v2``, commit interval 500 ms, ``linger.ms`` 20, ``batch.size`` 1 MB.

Each figure is input records per second from the first record processed until the input offsets of every record
are committed. Printed per size and guarantee: both figures and ``subroute / kafka-streams``, and the check that
both put every compared record (every ``--check-every``-th by id) in the same place: the same topic (past the
prefix), partition, timestamp, key, value and headers, the routing time aside. The Streams router hashes keys as
librdkafka does (CRC-32), so partitions compare too. Which router goes first alternates from one size to the
next and from one repetition to the next; ``--warm-up`` untimed runs of each come first (a new broker warms up:
the first timed runs after one were 2-3 times slower than later ones, whichever router they were).

The Streams router is compiled on first use (router/dev/jars.py: Maven resolves the ``kafka-streams`` profile of
jars/pom.xml, javac compiles tests/perf/streams_peer; both cached in .cache/jars).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import peer_workload
import perfkit
from confluent_kafka import Consumer, KafkaError, TopicPartition

from subroute import wire
from subroute.config.model import Config
from subroute.dev import jars
from subroute.ops.settings import Settings
from subroute.worker.checkpoint import AT_LEAST_ONCE, EXACTLY_ONCE

SOURCES = Path(__file__).resolve().parent / "streams_peer"
JARS_PROFILE = "kafka-streams"
STREAMS_GUARANTEE = {AT_LEAST_ONCE: "at_least_once", EXACTLY_ONCE: "exactly_once_v2"}
SUBROUTE, STREAMS = "subroute", "kafka-streams"
_RESULT = re.compile(r"RESULT records=(\d+) routed=(\d+) seconds=([\d.]+) processing_seconds=([\d.]+)")

# Where a record landed: topic past the prefix, partition, timestamp, and a digest (Python's hash: both runs are
# read by this one process) of its value and of its headers but the routing time (the one field that may
# differ): 100,000s of records per run stay small in memory.
Placement = tuple[str, int, int, int]


@dataclass
class Outcome:
    rate: float
    placements: dict[bytes, Placement] = field(default_factory=dict)  # by key, the compared ones
    records: int = 0  # routed records read back
    duplicates: int = 0
    pending: int = 0


def placements(s: Settings, topics: Sequence[str], partitions: int, expected: int, every: int) -> Outcome:
    """The routed records of ``topics`` (read_committed), the placement of each ``every``-th by id; the topics'
    warm-up records (no key) are skipped. Read until ``expected`` records have come and every partition is at
    its end, or nothing came for 20 s: a transaction's commit returns before its markers are written, so a
    partition's end may move once more just after a router under exactly-once is done."""
    consumer = Consumer(
        s.client_config(
            {
                "group.id": f"{s.topic_prefix}.check",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
            }
        )
    )
    everything = {(t, p) for t in topics for p in range(partitions)}
    consumer.assign([TopicPartition(t, p, 0) for t, p in everything])
    at_end: set[tuple[str, int]] = set()
    skip = len(s.topic_prefix) + 1
    out = Outcome(0.0)
    seen: set[bytes] = set()
    idle_until = time.monotonic() + 20
    try:
        while (at_end != everything or out.records < expected) and time.monotonic() < idle_until:
            for m in consumer.consume(10_000, timeout=0.2):
                where = (cast(str, m.topic()), cast(int, m.partition()))  # set on every consumed event
                error = m.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise SystemExit(f"reading back {s.topic_prefix}: {error}")
                    at_end.add(where)
                    continue
                at_end.discard(where)
                idle_until = time.monotonic() + 20
                key = m.key()
                if key is None:
                    continue
                out.records += 1
                if key in seen:
                    out.duplicates += 1
                seen.add(key)
                topic = where[0][skip:]
                if topic.endswith(".pending"):
                    out.pending += 1
                if int(key[1:]) % every == 0:
                    headers = tuple(h for h in m.headers() or () if h[0] != wire.ROUTED_AT)
                    out.placements[key] = (topic, where[1], m.timestamp()[1], hash((m.value(), headers)))
    finally:
        consumer.close()
    return out


def config_version(config: Config) -> int:
    """The version the worker stamps on what it routes under ``config`` written to a new config topic: the
    number of its records (router/config/store.py), one per app and per group."""
    return len(config.apps) + len(config.groups)


def destinations(s: Settings, config: Config) -> list[str]:
    """Every topic a router may write for ``config``: its group topics and pending topics."""
    return [spec.name for spec in perfkit.output_topics(s, config) if not spec.name.endswith(".dlq")]


@contextlib.contextmanager
def topics_of(s: Settings, config: Config) -> Iterator[None]:
    """The output topics of ``config`` under ``s``'s prefix (each partition written once, see ``ready_topics``),
    deleted afterwards, so that every run meets a broker with the same partitions (it slows as they grow). Both
    routers meet new topics alike: both pay what new partitions cost the broker (``perfkit.ready_topics``)."""
    specs = perfkit.output_topics(s, config)
    perfkit.ready_topics(s, specs)
    try:
        yield
    finally:
        perfkit.drop_topics(s, [spec.name for spec in specs])


def run_subroute(
    bootstrap: str,
    topic: str,
    workload: Sequence[peer_workload.App],
    guarantee: str,
    args: argparse.Namespace,
) -> Outcome:
    s = perfkit.settings(bootstrap, prefix=f"subroute{uuid.uuid4().hex[:8]}")
    config = peer_workload.config(workload, topic, args.partitions)
    with topics_of(s, config):
        if perfkit.write_config(s, config) != config_version(config):
            raise SystemExit("subroute: the config version is not the number of config records written")
        try:
            timing = perfkit.run_worker(s, args.messages, guarantee=guarantee).timing
        finally:
            perfkit.drop_topics(s, [s.config_topic])
        if timing.produced != timing.messages:
            raise SystemExit(f"subroute: {timing.produced} records routed for {timing.messages}")
        out = placements(s, destinations(s, config), args.partitions, args.messages, args.check_every)
    out.rate = timing.rate
    return out


def run_streams(
    bootstrap: str,
    topic: str,
    workload: Sequence[peer_workload.App],
    guarantee: str,
    args: argparse.Namespace,
    classpath: str,
) -> Outcome:
    s = perfkit.settings(bootstrap, prefix=f"streams{uuid.uuid4().hex[:8]}")
    config = peer_workload.config(workload, topic, args.partitions)
    with topics_of(s, config), tempfile.TemporaryDirectory(prefix="streams-peer-") as folder:
        description = peer_workload.write_streams_description(
            Path(folder) / "workload.tsv", workload, s.topic_prefix, config_version(config)
        )
        log = Path(folder) / "stderr.log"
        command = [
            "java",
            "-cp",
            classpath,
            "peer.StreamsRouter",
            *("--bootstrap", bootstrap, "--input", topic, "--workload", str(description)),
            *("--application-id", f"{s.topic_prefix}.router", "--expected", str(args.messages)),
            *("--guarantee", STREAMS_GUARANTEE[guarantee]),
            *(part for setting in args.streams_config for part in ("--set", setting)),
        ]
        with log.open("w") as stderr:
            done = subprocess.run(command, stdout=subprocess.PIPE, stderr=stderr, text=True, check=False)
        result = _RESULT.search(done.stdout)
        if done.returncode != 0 or result is None:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
            raise SystemExit(f"the Kafka Streams router failed ({done.returncode}):\n{done.stdout}\n{tail}")
        records, routed, seconds = int(result[1]), int(result[2]), float(result[3])
        if records != args.messages or routed != records:
            raise SystemExit(f"kafka-streams: {routed} records routed for {records} of {args.messages}")
        out = placements(s, destinations(s, config), args.partitions, args.messages, args.check_every)
    out.rate = records / seconds
    return out


def compare(subroute: Outcome, streams: Outcome, messages: int) -> list[str]:
    """What differs between the two runs' placements (empty: the same)."""
    problems = []
    for name, outcome in ((SUBROUTE, subroute), (STREAMS, streams)):
        if outcome.records != messages or outcome.duplicates:
            problems.append(
                f"{name}: {outcome.records} records read back for {messages} ({outcome.duplicates} twice)"
            )
    if subroute.placements.keys() != streams.placements.keys():
        problems.append(f"compared ids differ: {len(subroute.placements.keys() ^ streams.placements.keys())}")
    differ = [key for key in subroute.placements if streams.placements.get(key) != subroute.placements[key]]
    for key in differ[:5]:
        where_sr, where_ks = subroute.placements[key], streams.placements.get(key)
        problems.append(f"{key.decode()}: subroute {where_sr[:3]}, kafka-streams {where_ks and where_ks[:3]}")
    if len(differ) > 5:
        problems.append(f"... {len(differ)} records placed differently in all")
    return problems


@dataclass(frozen=True)
class Cell:
    size: int
    guarantee: str

    @property
    def label(self) -> str:
        return f"{self.size:,} subscriptions, {self.guarantee}"


def one_run(
    args: argparse.Namespace, rep: int, classpath: str, results: dict[tuple[Cell, str], list[float]]
) -> bool:
    """One repetition on a new broker; whether every check held."""
    ok = True
    with perfkit.broker() as b:
        base = perfkit.settings(b.bootstrap_servers)
        topic = f"{base.topic_prefix}-orders"
        perfkit.create_topic(base, topic, args.partitions)
        perfkit.produce_input(base, topic, peer_workload.message_headers(args.messages))
        warmup = peer_workload.apps(args.sizes[0])
        for _ in range(args.warm_up):  # untimed: the broker warms up
            run_subroute(b.bootstrap_servers, topic, warmup, AT_LEAST_ONCE, args)
            run_streams(b.bootstrap_servers, topic, warmup, AT_LEAST_ONCE, args, classpath)
        cells = [Cell(size, guarantee) for size in args.sizes for guarantee in args.guarantees]
        for i, cell in enumerate(cells):
            workload = peer_workload.apps(cell.size)
            order = [SUBROUTE, STREAMS] if (rep + i) % 2 == 0 else [STREAMS, SUBROUTE]
            outcomes: dict[str, Outcome] = {}
            for router in order:
                if router == SUBROUTE:
                    outcomes[router] = run_subroute(
                        b.bootstrap_servers, topic, workload, cell.guarantee, args
                    )
                else:
                    outcomes[router] = run_streams(
                        b.bootstrap_servers, topic, workload, cell.guarantee, args, classpath
                    )
                results.setdefault((cell, router), []).append(outcomes[router].rate)
            sr, ks = outcomes[SUBROUTE], outcomes[STREAMS]
            problems = compare(sr, ks, args.messages)
            ok = ok and not problems
            check = f"same place: {len(sr.placements):,} compared" if not problems else "DIFFER"
            groups = len(peer_workload.config(workload, topic, args.partitions).groups)
            print(
                f"  {cell.label:40} {sr.rate:>10,.0f} {ks.rate:>14,.0f} {sr.rate / ks.rate:>10.2f}   "
                f"{groups} group topics, {sr.pending} pending; {check}",
                flush=True,
            )
            for problem in problems:
                print(f"    {problem}")
    return ok


def header() -> None:
    print(f"  {'':40} {'subroute':>10} {'kafka-streams':>14} {'sr / ks':>10}   (records/s)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    perfkit.common_arguments(parser, messages=100_000, repeat=1)
    parser.add_argument("--partitions", type=int, default=4, help="input and destination partitions (4)")
    parser.add_argument(
        "--sizes",
        type=lambda text: [int(size) for size in text.split(",")],
        default=[10, 1_000, 10_000],
        help="subscriptions, comma-separated (10,1000,10000)",
    )
    parser.add_argument(
        "--guarantees",
        type=lambda text: text.split(","),
        default=[AT_LEAST_ONCE, EXACTLY_ONCE],
        help=f"comma-separated, of {AT_LEAST_ONCE} and {EXACTLY_ONCE} (both)",
    )
    parser.add_argument(
        "--warm-up",
        type=int,
        default=1,
        metavar="N",
        help="untimed runs of each router on a new broker before the timed ones (1); the first timed runs on a "
        "new broker are slower than later ones",
    )
    parser.add_argument(
        "--check-every",
        type=int,
        default=1,
        metavar="K",
        help="compare the placement of every K-th record by id (1: all); every record is counted whatever K",
    )
    parser.add_argument(
        "--streams-config",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Kafka Streams, producer. or consumer. setting of the peer over its own (repeatable)",
    )
    args = parser.parse_args()
    if unknown := set(args.guarantees) - set(STREAMS_GUARANTEE):
        parser.error(f"unknown guarantee(s): {', '.join(sorted(unknown))}")
    began = time.perf_counter()
    classpath = jars.java_classpath(JARS_PROFILE, SOURCES)
    print(
        f"(Kafka Streams router ready in {time.perf_counter() - began:.1f} s: {classpath.split(os.pathsep)[0]})"
    )
    print(f"(load average {_load()} before the run, {os.cpu_count()} cores)", flush=True)
    results: dict[tuple[Cell, str], list[float]] = {}
    ok = True
    for rep in range(args.repeat):
        print(f"run {rep + 1} of {args.repeat}, {args.messages:,} records", flush=True)
        header()
        ok = one_run(args, rep, classpath, results) and ok
    print(f"\nmedians of {args.repeat} run(s) (records/s), load average {_load()} after the run:")
    header()
    cells = [Cell(size, guarantee) for size in args.sizes for guarantee in args.guarantees]
    for cell in cells:
        sr, ks = perfkit.median(results[(cell, SUBROUTE)]), perfkit.median(results[(cell, STREAMS)])
        print(f"  {cell.label:40} {sr:>10,.0f} {ks:>14,.0f} {sr / ks:>10.2f}")
    print(f"both routers put every compared record in the same place: {perfkit.verdict(ok)}")
    if not ok:
        raise SystemExit(1)


def _load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


if __name__ == "__main__":
    main()
