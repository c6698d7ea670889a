"""``make demo``: the whole router on one machine, end to end, in under a minute.

Starts a local Apache Kafka (``SUBROUTE_DEMO_BROKER=tansu``: Tansu), applies examples/subscriptions.yaml, produces sample orders, runs a worker until it
is idle, prints where every message went, explains one message, then (when pyspark is installed) runs the Spark
job over the routed topics and prints its report. Stops everything it started.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, cast

from subroute import names
from subroute.cli import main as cli
from subroute.config.store import read_config
from subroute.dev import jars as dev_jars
from subroute.dev.broker import local_broker
from subroute.dev.samples import orders
from subroute.kafka import io as kafka_io
from subroute.kafka.io import TopicSpec, admin_client, ensure_topics, read_to_end
from subroute.ops.metrics import RouterMetrics
from subroute.ops.settings import Settings
from subroute.worker.loop import Worker, WorkerOptions

ROOT = Path(__file__).resolve().parents[2]  # router/dev/demo.py -> the checkout
EXAMPLE = ROOT / "examples" / "subscriptions.yaml"
INPUT_TOPIC = "orders"
COUNT = int(os.environ.get("SUBROUTE_DEMO_MESSAGES", "5000"))


def _banner(text: str) -> None:
    print(f"\n=== {text} ===", flush=True)


def produce_orders(settings: Settings, count: int) -> None:
    producer = kafka_io.producer(settings)
    for record in orders(count):
        while True:
            try:
                producer.produce(
                    INPUT_TOPIC, value=record.value, key=record.key, headers=cast(Any, record.headers)
                )
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(30)


def run_worker(settings: Settings) -> RouterMetrics:
    """One worker until it is idle; prints its throughput while routing (group join and idle wait excluded)."""
    metrics = RouterMetrics()
    worker = Worker(settings, WorkerOptions(exit_on_idle=2.0, session_timeout_ms=6000), metrics)
    t0 = time.monotonic()
    worker.run()
    wall = time.monotonic() - t0
    consumed = metrics.messages_in._value.get()
    produced = sum(s.value for m in metrics.routed.collect() for s in m.samples if s.name.endswith("_total"))
    busy = sum(s.value for m in metrics.batch_seconds.collect() for s in m.samples if s.name.endswith("_sum"))
    print(
        f"worker consumed {consumed:.0f} records, routed {produced:.0f} records to group topics; "
        f"{busy:.2f}s in batches ({consumed / max(busy, 1e-6):,.0f} input msg/s), {wall:.1f}s wall with the "
        "group join and the idle wait"
    )
    return metrics


def show_destinations(settings: Settings) -> None:
    for (app, label), count in sorted(destinations(settings).items()):
        print(f"  {app:<12} {label:<22} {count:>6}")


def destinations(settings: Settings) -> Counter[tuple[str, str]]:
    """Records per (app, destination) read back from the group and dead-letter topics; pending counts what
    still waits (records on the pending topic past the router's committed position)."""
    config = read_config(settings)
    found: Counter[tuple[str, str]] = Counter()
    prefix = settings.topic_prefix
    for app in sorted(config.apps):
        topics = [(g.name, names.group_topic(prefix, app, g.name)) for g in config.groups_of(app)]
        topics += [("(dead letters)", names.dlq_topic(prefix, app))]
        for label, topic in topics:
            found[(app, label)] = sum(1 for _ in read_to_end(settings, topic, idle_timeout=0.5))
        found[(app, "(pending, waiting)")] = waiting(settings, names.pending_topic(prefix, app))
    return found


def waiting(settings: Settings, topic: str) -> int:
    """Records of a pending topic the router has not moved on from (end offset - its committed offset)."""
    # The router's group id, only to read its commits (kafka_io.reader never commits).
    return kafka_io.group_backlog(settings, names.worker_group_id(settings.topic_prefix), topic)


def run_demo() -> int:
    started = time.monotonic()
    engine = os.environ.get("SUBROUTE_DEMO_BROKER", "kafka")  # or tansu, for machines without Java and Maven
    with local_broker(engine) as broker:
        settings = Settings(bootstrap_servers=broker.bootstrap_servers)
        common = ["--bootstrap-servers", broker.bootstrap_servers]
        print(
            f"{engine} broker on {broker.bootstrap_servers} (started in {time.monotonic() - started:.1f} s)"
        )
        ensure_topics(admin_client(settings), [TopicSpec(INPUT_TOPIC, 3)])

        _banner(f"subroute config apply -f {EXAMPLE.relative_to(ROOT)}")
        if cli(["config", "apply", "-f", str(EXAMPLE), *common]) != 0:
            return 1

        _banner("a bad subscription is refused, nothing written")
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as bad:
            bad.write(EXAMPLE.read_text().replace("'CustomerId < 10'", "'CustomerId < \"ten\"'"))
        code = cli(["config", "apply", "-f", bad.name, *common])
        os.unlink(bad.name)
        print(f"(exit code {code})")

        _banner(f"producing {COUNT} sample orders to '{INPUT_TOPIC}'")
        produce_orders(settings, COUNT)

        _banner("subroute worker --exit-on-idle 2")
        run_worker(settings)

        _banner("where the messages went (read back from Kafka)")
        show_destinations(settings)

        _banner("subscribe APAC orders: pending messages are redriven")
        v2 = EXAMPLE.read_text().replace(
            "  carts:",
            "      apac:\n        subscriptions:\n          - {expression: \"Region = 'APAC'\", priority: 5}\n  carts:",
        )
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as updated:
            updated.write(v2)
        cli(["config", "apply", "-f", updated.name, *common])
        os.unlink(updated.name)
        metrics = run_worker(settings)
        redriven = sum(
            s.value for m in metrics.redriven.collect() for s in m.samples if s.name.endswith("_total")
        )
        print(f"redriven from pending topics: {redriven:.0f}")
        show_destinations(settings)

        _banner(f"subroute explain --topic {INPUT_TOPIC} --partition 0 --offset 0")
        cli(["explain", "--topic", INPUT_TOPIC, "--partition", "0", "--offset", "0", *common])

        _run_spark(settings)
    print(f"\ndemo finished in {time.monotonic() - started:.1f}s")
    return 0


def _run_spark(settings: Settings) -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("\n(pyspark is not installed: skipping the Spark step; `pip install -e .[spark]` adds it)")
        return
    _banner("subroute spark run (availableNow), then subroute spark report")
    output = Path(tempfile.mkdtemp(prefix="subroute-demo-")) / "routed"
    common = ["--bootstrap-servers", settings.bootstrap_servers, "--master", "local[2]"]
    schemas = [arg for app in ("billing", "fulfilment", "carts") for arg in ("--avro-schema", f"{app}=order")]
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from subroute.cli import build_parser
    from subroute.spark import job, report
    from subroute.spark import session as spark_session

    # The same code as `subroute spark run` and `subroute spark report`, sharing one Spark session.
    args = build_parser().parse_args(["spark", "run", "--output", str(output), *schemas, *common])
    t0 = time.monotonic()
    try:  # Spark's own Kafka connector, as `make demo` resolved it; without it the job uses its Python source
        connector = [str(jar) for jar in dev_jars.jar_files("spark-kafka")]
    except dev_jars.JarsNotAvailable as exc:
        print(f"(Spark's Kafka connector is not available, the job reads with its Python source: {exc})")
        connector = []
    session = spark_session.build_session(master=args.master, jars=connector)
    try:
        print(job.describe(job.run(session, job.config_from_args(args))), flush=True)
        print(f"Parquet under {output} ({time.monotonic() - t0:.1f}s with the session start)")
        print(report.format_report(report.build_report(session, str(output), settings)), flush=True)
    finally:
        session.stop()


def main() -> int:
    # Line by line, so the demo's output and its subprocesses' (Spark's JVM) stay in order.
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    return run_demo()


if __name__ == "__main__":
    sys.exit(main())
