"""Spark's Kafka connector against the project's Python Kafka source, on the same topics, in one run.

For each size (50,000 and 500,000 records by default; 200-byte values, the router's headers, 4 partitions) the
records are written once, then each source reads the whole topic as a batch into Spark's ``noop`` sink (every
row materialised, nothing written), ``--repeat`` times in alternation, after one untimed warm-up read each. It
prints rows/s per source (median of the runs) and the ratio Python source / connector.

    python tests/perf/bench_spark_sources.py [--sizes 50000,500000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import perfkit
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from subroute.dev import jars as dev_jars
from subroute.kafka.clients import TopicSpec, admin_client, ensure_topics
from subroute.ops.settings import Settings
from subroute.spark.kafka_source import FORMAT
from subroute.spark.session import build_session

PARTITIONS = 4
SOURCES = {"connector": "kafka", "python": FORMAT}


def load_topic(bootstrap: str, topic: str, count: int) -> None:
    ensure_topics(admin_client(Settings(bootstrap_servers=bootstrap)), [TopicSpec(topic, PARTITIONS)])
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000})
    value = b"v" * 200
    headers = [
        ("subroute.app", b"orders"),
        ("subroute.group", b"fast"),
        ("subroute.subscription", b"orders/fast/0"),
        ("subroute.source", b"orders/0/12345"),
        ("subroute.config-version", b"7"),
        ("subroute.routed-at", b"1767225600000"),
    ]
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=value, key=str(i % 1000).encode(), headers=headers)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0, "records still queued after 120 s"


def read_seconds(spark: SparkSession, source_format: str, bootstrap: str, topic: str) -> tuple[int, float]:
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "includeHeaders": "true",
        "startingOffsets": "earliest",
        "endingOffsets": "latest",
    }
    frame = spark.read.format(source_format).options(**options).load()
    began = time.perf_counter()
    frame.write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - began
    return frame.count(), seconds  # counted outside the timing: both must read every record


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="50000,500000", help="records per topic, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="timed reads per source and size (3)")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    connector = [str(jar) for jar in dev_jars.jar_files("spark-kafka")]
    results: list[tuple[int, dict[str, float]]] = []
    with perfkit.broker() as broker:
        spark = build_session(master="local[2]", app_name="bench-spark-sources", jars=connector)
        try:
            for size in (int(s) for s in args.sizes.split(",")):
                topic = f"bench-spark-{uuid.uuid4().hex[:8]}"
                load_topic(broker.bootstrap_servers, topic, size)
                for source_format in SOURCES.values():  # warm-up: JIT, class loading, Python workers
                    read_seconds(spark, source_format, broker.bootstrap_servers, topic)
                runs: dict[str, list[float]] = {name: [] for name in SOURCES}
                for _ in range(args.repeat):
                    for name, source_format in SOURCES.items():
                        rows, seconds = read_seconds(spark, source_format, broker.bootstrap_servers, topic)
                        assert rows == size, f"{name} read {rows} of {size} records"
                        runs[name].append(size / seconds)
                        print(f"  {size:>9,} records, {name:<9}: {size / seconds:>10,.0f} rows/s", flush=True)
                results.append((size, {name: statistics.median(r) for name, r in runs.items()}))
        finally:
            spark.stop()
    print(
        f"\nrows/s, median of {args.repeat} batch reads into the noop sink ({PARTITIONS} partitions, local[2]):"
    )
    print(f"{'records':>9}  {'connector':>10}  {'python':>10}  python/connector")
    for size, medians in results:
        ratio = medians["python"] / medians["connector"]
        print(f"{size:>9,}  {medians['connector']:>10,.0f}  {medians['python']:>10,.0f}  {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
