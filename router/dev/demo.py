"""``make demo``: the whole router on one machine, end to end.

Starts a local Apache Kafka (``SUBROUTE_DEMO_BROKER=tansu``: Tansu), applies examples/subscriptions.yaml, produces
sample orders (their data in the body: JSON to ``orders``, schemaless Avro to ``orders-avro``), runs a worker
until it is idle, prints where every message went, explains one message of each topic (each property with its
source and value), then (when pyspark is installed) runs the Spark job over the routed topics and prints its
report. Stops everything it started. Then it checks what it showed (router/dev/demo_checks.py) and exits 1 when
something does not hold.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, cast

from subroute import wire
from subroute.admin.status import waiting_messages
from subroute.cli import main as cli
from subroute.config.model import Config
from subroute.config.store import read_config
from subroute.dev import demo_checks as checks
from subroute.dev import jars as dev_jars
from subroute.dev.broker import local_broker
from subroute.dev.samples import ORDER_SCHEMA, SampleOrder, orders
from subroute.kafka import clients
from subroute.kafka.clients import TopicSpec, admin_client, ensure_topics, read_topics_to_end
from subroute.ops.metrics import RouterMetrics
from subroute.ops.settings import Settings
from subroute.routing.decisions import build_table
from subroute.worker.loop import Worker, WorkerOptions

ROOT = Path(__file__).resolve().parents[2]  # router/dev/demo.py -> the checkout
EXAMPLE = ROOT / "examples" / "subscriptions.yaml"
INPUT_TOPIC = "orders"  # the orders as JSON values
AVRO_TOPIC = "orders-avro"  # the same orders as schemaless Avro (examples/order.avsc)
AVRO_APPS = ("carts",)  # the apps reading AVRO_TOPIC: Spark decodes their payloads with the same schema
COUNT = int(os.environ.get("SUBROUTE_DEMO_MESSAGES", "5000"))


def _banner(text: str) -> None:
    print(f"\n=== {text} ===", flush=True)


def refused_config(example: str) -> str:
    """The example with one subscription that compares an int with a string: ``config apply`` refuses it."""
    return _replace_once(example, "'CustomerId < 10'", "'CustomerId < \"ten\"'")


def apac_config(example: str) -> str:
    """The example plus a fulfilment group for the APAC orders that wait on its pending topic."""
    return _replace_once(
        example,
        "  carts:",
        "      apac:\n        subscriptions:\n          - {expression: \"Region = 'APAC'\", priority: 5}\n  carts:",
    )


def _replace_once(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:  # the example changed under the demo: say so, rather than apply something else
        raise ValueError(f"{EXAMPLE.name} no longer holds {old!r} once; the demo's edit of it needs updating")
    return text.replace(old, new)


class _Tee(io.StringIO):
    """Writes through to ``stream`` and keeps a copy: the demo shows the output and checks it."""

    def __init__(self, stream: Any) -> None:
        super().__init__()
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(text)
        return super().write(text)

    def flush(self) -> None:
        self.stream.flush()


@contextmanager
def _captured() -> Iterator[tuple[_Tee, _Tee]]:
    out, err = _Tee(sys.stdout), _Tee(sys.stderr)
    with redirect_stdout(out), redirect_stderr(err):
        yield out, err


def _apply(path: Path, common: list[str]) -> tuple[int, str]:
    with _captured() as (_, err):
        code = cli(["config", "apply", "-f", str(path), *common])
    return code, err.getvalue()


def _apply_text(text: str, common: list[str]) -> tuple[int, str]:
    # Beside the example, whose schema: file is read relative to it; hidden, as `-f examples/` skips such files.
    with tempfile.NamedTemporaryFile(
        "w", dir=EXAMPLE.parent, prefix=".demo-", suffix=".yaml", delete=False
    ) as handle:
        handle.write(text)
    try:
        return _apply(Path(handle.name), common)
    finally:
        os.unlink(handle.name)


def produced(records: list[SampleOrder]) -> list[checks.Produced]:
    """Every record the demo writes, as ``(topic, headers, value)``: each order as JSON, then as Avro."""
    out: list[checks.Produced] = [(INPUT_TOPIC, o.json.headers, o.json.value) for o in records]
    return out + [(AVRO_TOPIC, o.avro.headers, o.avro.value) for o in records]


def produce_orders(settings: Settings, records: list[SampleOrder]) -> None:
    producer = clients.producer(settings)
    for order in records:
        for topic, record in ((INPUT_TOPIC, order.json), (AVRO_TOPIC, order.avro)):
            while True:
                try:
                    producer.produce(
                        topic, value=record.value, key=record.key, headers=cast(Any, record.headers)
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
    producer.flush(30)
    producer.close()


def run_worker(settings: Settings) -> RouterMetrics:
    """One worker until it is idle; prints its throughput while routing (group join and idle wait excluded)."""
    metrics = RouterMetrics()
    worker = Worker(settings, WorkerOptions(exit_on_idle=2.0, session_timeout_ms=6000), metrics)
    t0 = time.monotonic()
    worker.run()
    wall = time.monotonic() - t0
    consumed = metrics.messages_in._value.get()
    produced = _total(metrics.routed)
    busy = sum(s.value for m in metrics.batch_seconds.collect() for s in m.samples if s.name.endswith("_sum"))
    print(
        f"worker consumed {consumed:.0f} records, routed {produced:.0f} records to group topics; "
        f"{busy:.2f}s in batches ({consumed / max(busy, 1e-6):,.0f} input msg/s), {wall:.1f}s wall with the "
        "group join and the idle wait"
    )
    return metrics


def _total(counter: Any, **labels: str) -> float:
    """A Prometheus counter's total over its samples with these label values."""
    return sum(
        float(s.value)
        for m in counter.collect()
        for s in m.samples
        if s.name.endswith("_total") and all(s.labels.get(k) == v for k, v in labels.items())
    )


def show_destinations(found: checks.Destinations) -> None:
    for (app, label), count in sorted(found.items()):
        if count or label != checks.DROPPED:  # dropped: only apps with on_expire: drop
            print(f"  {app:<12} {label:<22} {count:>6}")


def destinations(
    settings: Settings, runs: list[RouterMetrics]
) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, int]]]:
    """Records per (app, destination) read back from the group topics (with their priority bands) and the
    dead-letter topics; pending counts what still waits, in messages, as ``subroute status`` does (past the
    router's position, less what was routed past it); what the app filters skipped, or expiry dropped, is
    written nowhere: the workers' metrics count it. Also, for apps with a priority expression, the records
    per band."""
    config = read_config(settings)
    found: Counter[tuple[str, str]] = Counter()
    bands: Counter[tuple[str, int]] = Counter()
    prefix = settings.topic_prefix
    waiting = waiting_messages(settings, config, sorted(config.apps))
    topics = [
        topic
        for app in sorted(config.apps)
        for topic in (
            *(t for group in config.groups_of(app) for t in wire.band_topics(prefix, app, group.name)),
            wire.dlq_topic(prefix, app),
        )
    ]
    # One read of every topic (a priority band no record fell in does not exist: it counts 0).
    records = Counter(message.topic() for message in read_topics_to_end(settings, topics, idle_timeout=0.5))
    for app in sorted(config.apps):
        for group in config.groups_of(app):
            for band, topic in enumerate(wire.band_topics(prefix, app, group.name)):
                found[(app, group.name)] += records[topic]
                if config.apps[app].priority:
                    bands[(app, band)] += records[topic]
        found[(app, checks.DEAD_LETTERS)] = records[wire.dlq_topic(prefix, app)]
        found[(app, checks.PENDING)] = waiting[app].total
        found[(app, checks.FILTERED)] = round(sum(_total(m.filtered, app=app) for m in runs))
        found[(app, checks.DROPPED)] = round(sum(_total(m.expired, app=app, action="drop") for m in runs))
    return found, bands


def show_bands(config: Config, bands: Counter[tuple[str, int]]) -> None:
    """Per app with a priority expression, its routed records per band (band topics ``.p1`` to ``.p9``)."""
    for app in sorted({app for app, _ in bands}):
        counts = " ".join(f"p{band}:{bands[(app, band)]}" for band in wire.BANDS)
        print(f"  {app:<12} by band of priority {config.apps[app].priority}: {counts}")


def run_demo() -> int:
    started = time.monotonic()
    engine = os.environ.get("SUBROUTE_DEMO_BROKER", "kafka")  # or tansu, for machines without Java and Maven
    problems: list[str] = []
    with local_broker(engine) as broker:
        settings = Settings(bootstrap_servers=broker.bootstrap_servers)
        common = ["--bootstrap-servers", broker.bootstrap_servers]
        print(
            f"{engine} broker on {broker.bootstrap_servers} (started in {time.monotonic() - started:.1f} s)"
        )
        admin = admin_client(settings)
        ensure_topics(admin, [TopicSpec(INPUT_TOPIC, 3), TopicSpec(AVRO_TOPIC, 3)])
        del admin  # an admin client has no close: it goes with its last reference

        _banner(f"subroute config apply -f {EXAMPLE.relative_to(ROOT)}")
        code, _ = _apply(EXAMPLE, common)
        if code != 0:
            print(f"the example configuration was not applied (exit code {code})")
            return 1
        first = read_config(settings)

        _banner("a bad subscription is refused, nothing written")
        code, refusal = _apply_text(refused_config(EXAMPLE.read_text()), common)
        print(f"(exit code {code})")
        problems += checks.check_refusal(code, refusal, first.version, read_config(settings).version)

        _banner(f"producing {COUNT} sample orders as JSON to '{INPUT_TOPIC}' and as Avro to '{AVRO_TOPIC}'")
        records = list(orders(COUNT))
        print(f"{INPUT_TOPIC}: {records[0].json.value.decode()}")
        header = " ".join(f"{name}={(value or b'').decode()}" for name, value in records[0].avro.headers)
        print(
            f"{AVRO_TOPIC}: the same order, {len(records[0].avro.value)} bytes of schemaless Avro "
            f"({ORDER_SCHEMA.relative_to(ROOT)}), header {header or '(none: a guest)'}"
        )
        produced_at = int(time.time() * 1000)
        produce_orders(settings, records)

        _banner("subroute worker --exit-on-idle 2")
        runs = [run_worker(settings)]

        _banner("where the messages went (read back from Kafka)")
        found, bands = destinations(settings, runs)
        show_destinations(found)
        show_bands(first, bands)
        expected = checks.expected_destinations([first], produced(records), produced_at)
        problems += checks.check_destinations("first run", first, COUNT, expected.destinations, found)
        problems += checks.check_bands(expected.bands, bands)

        _banner("subscribe APAC orders: pending messages are redriven")
        code, _ = _apply_text(apac_config(EXAMPLE.read_text()), common)
        if code != 0:
            problems.append(f"the APAC subscription was not applied (exit code {code})")
        second = read_config(settings)
        runs.append(run_worker(settings))
        redriven = _total(runs[-1].redriven)
        print(f"redriven from pending topics: {redriven:.0f}")
        found, bands = destinations(settings, runs)
        show_destinations(found)
        show_bands(second, bands)
        expected = checks.expected_destinations([first, second], produced(records), produced_at)
        problems += checks.check_destinations(
            "after the APAC subscription",
            second,
            COUNT,
            expected.destinations,
            found,
            # Only a redrive routes pending records past the router's position, kept in commit metadata.
            pending_counts_routed_past=engine == "tansu",
        )
        problems += checks.check_bands(expected.bands, bands)
        problems += checks.check_redriven(round(redriven), sum(expected.redriven.values()))

        for topic in (INPUT_TOPIC, AVRO_TOPIC):
            _banner(f"subroute explain --topic {topic} --partition 0 --offset 0")
            with _captured() as (out, _):
                code = cli(["explain", "--topic", topic, "--partition", "0", "--offset", "0", *common])
            readers = [app.name for app in build_table(second).apps_for(topic)]
            problems += checks.check_explanation(code, out.getvalue(), readers, second.version)
            problems += checks.check_sources(out.getvalue(), second, readers)

        landed = _run_spark(settings, engine)
        if landed is not None:
            problems += checks.check_spark(*landed, found)
    print(f"\ndemo finished in {time.monotonic() - started:.1f}s")
    _banner("what the demo showed, checked")
    for problem in problems:
        print(f"FAILED: {problem}")
    if problems:
        print(f"{len(problems)} check(s) failed")
        return 1
    print(
        "every produced record accounted for in every app, where the configuration sends it; the bad config"
    )
    print(
        "refused with a caret and nothing written; a JSON and an Avro order explained, each property with its"
    )
    print("source in the body and its value; Spark's report matches the topics")
    return 0


def _run_spark(settings: Settings, engine: str) -> tuple[int, dict[tuple[str, str], int]] | None:
    """Spark lands the group topics as Parquet and reports them; returns the records it landed and its report's
    rows, or None when pyspark is not installed. On Tansu without Spark's Kafka connector, as the test session
    does (tests/spark/conftest.py)."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("\n(pyspark is not installed: skipping the Spark step; `pip install -e .[spark]` adds it)")
        return None
    _banner("subroute spark run (availableNow), then subroute spark report")
    output = Path(tempfile.mkdtemp(prefix="subroute-demo-")) / "routed"
    common = ["--bootstrap-servers", settings.bootstrap_servers, "--master", "local[2]"]
    schemas = [arg for app in AVRO_APPS for arg in ("--avro-schema", f"{app}={ORDER_SCHEMA}")]
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from subroute.cli import build_parser
    from subroute.spark import job, report
    from subroute.spark import session as spark_session

    # The same code as `subroute spark run` and `subroute spark report`, sharing one Spark session.
    args = build_parser().parse_args(["spark", "run", "--output", str(output), *schemas, *common])
    t0 = time.monotonic()
    connector: list[str] = []
    if engine == "tansu":
        # The connector reads up to the end offset ListOffsets reports, which Tansu answers short by up to a
        # batch per partition (docs/brokers.md); the Python source reads to the end fetch responses report.
        print("(on Tansu the job reads with its Python source: Spark's Kafka connector would stop short)")
    else:
        try:  # Spark's own Kafka connector, as `make demo` resolved it; without it the job uses its Python source
            connector = [str(jar) for jar in dev_jars.jar_files("spark-kafka")]
        except dev_jars.JarsNotAvailable as exc:
            print(f"(Spark's Kafka connector is not available, the job reads with its Python source: {exc})")
    session = spark_session.build_session(master=args.master, jars=connector)
    try:
        result = job.run(session, job.config_from_args(args))
        print(job.describe(result), flush=True)
        print(f"Parquet under {output} ({time.monotonic() - t0:.1f}s with the session start)")
        landed = report.build_report(session, str(output), settings)
        print(report.format_report(landed), flush=True)
        return result.rows, landed.messages()
    finally:
        session.stop()


def main() -> int:
    # Line by line, so the demo's output and its subprocesses' (Spark's JVM) stay in order.
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    return run_demo()


if __name__ == "__main__":
    sys.exit(main())
