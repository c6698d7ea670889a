"""``make demo``: the whole router on one machine, end to end, in under a minute.

Starts the embedded broker, applies examples/subscriptions.yaml, produces sample orders, runs a worker until it
is idle, prints where every message went, explains one message, then (when pyspark is installed) runs the Spark
job over the routed topics and prints its report. Stops everything it started.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, cast

from confluent_kafka import Producer

from router import names
from router.cli import main as cli
from router.config_store import read_config
from router.dev_broker import EmbeddedBroker
from router.kafka_io import TopicSpec, admin_client, ensure_topics, read_to_end
from router.metrics import RouterMetrics
from router.samples import orders
from router.settings import Settings
from router.worker import Worker, WorkerOptions

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "subscriptions.yaml"
INPUT_TOPIC = "orders"
COUNT = int(os.environ.get("SUBROUTE_DEMO_MESSAGES", "5000"))


def _banner(text: str) -> None:
    print(f"\n=== {text} ===", flush=True)


def produce_orders(settings: Settings, count: int) -> None:
    producer = Producer(settings.client_config({"linger.ms": 5, "enable.idempotence": True}))
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


def destinations(settings: Settings) -> Counter[tuple[str, str]]:
    """Records per (app, destination) read back from the routed, pending and dead-letter topics."""
    config = read_config(settings)
    found: Counter[tuple[str, str]] = Counter()
    prefix = settings.topic_prefix
    for app in sorted(config.apps):
        topics = [(g.name, names.group_topic(prefix, app, g.name)) for g in config.groups_of(app)]
        topics += [
            ("(pending)", names.pending_topic(prefix, app)),
            ("(dead letters)", names.dlq_topic(prefix, app)),
        ]
        for label, topic in topics:
            found[(app, label)] = sum(1 for _ in read_to_end(settings, topic, idle_timeout=0.5))
    return found


def run_demo() -> int:
    started = time.monotonic()
    with EmbeddedBroker() as broker:
        settings = Settings(bootstrap_servers=broker.bootstrap_servers)
        common = ["--bootstrap-servers", broker.bootstrap_servers]
        print(f"embedded broker on {broker.bootstrap_servers}")
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
        metrics = RouterMetrics()
        worker = Worker(settings, WorkerOptions(exit_on_idle=2.0, session_timeout_ms=6000), metrics)
        t0 = time.monotonic()
        worker.run()
        elapsed = time.monotonic() - t0 - 2.0
        routed = sum(
            s.value for m in metrics.routed.collect() for s in m.samples if s.name.endswith("_total")
        )
        consumed = metrics.messages_in._value.get()
        print(
            f"worker consumed {consumed:.0f} records and produced {routed:.0f} routed records "
            f"in {elapsed:.2f}s (incl. group join): {consumed / max(elapsed, 1e-3):,.0f} input msg/s"
        )

        _banner("where the messages went (read back from Kafka)")
        for (app, label), count in sorted(destinations(settings).items()):
            print(f"  {app:<12} {label:<16} {count:>6}")

        _banner(f"subroute explain --topic {INPUT_TOPIC} --partition 0 --offset 0")
        cli(["explain", "--topic", INPUT_TOPIC, "--partition", "0", "--offset", "0", *common])

        _run_spark(settings)
    print(f"\ndemo finished in {time.monotonic() - started:.1f}s")
    return 0


def _run_spark(settings: Settings) -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("\n(pyspark not installed: skipping the Spark step)")
        return
    with contextlib.suppress(SystemExit):
        from router.cli import build_parser

        if "spark" not in build_parser().format_help():
            return
    _banner("subroute spark run (availableNow) and subroute spark report")
    output = Path(tempfile.mkdtemp(prefix="subroute-demo-"))
    common = ["--bootstrap-servers", settings.bootstrap_servers]
    cli(
        [
            "spark",
            "run",
            "--subscribe-pattern",
            f"^{settings.topic_prefix}\\..*",
            "--output",
            str(output / "parquet"),
            "--checkpoint",
            str(output / "checkpoint"),
            "--trigger",
            "available-now",
            *common,
        ]
    )
    cli(["spark", "report", "--input", str(output / "parquet"), *common])


def main() -> int:
    # Keep the demo's output readable: librdkafka's own chatter goes to stderr only on errors.
    sys.stdout = io.TextIOWrapper(sys.stdout.buffer, line_buffering=True)
    return run_demo()


if __name__ == "__main__":
    sys.exit(main())
