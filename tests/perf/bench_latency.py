"""End-to-end latency at half the maximum throughput: ``python tests/perf/bench_latency.py [--seconds S]``.

First the maximum: one worker routes a pre-loaded input (1,000 expressions, disjoint app filters) as fast as
it can. Then a worker process (``subroute worker``) runs against a fresh input while this process produces
to it at half that rate (linger.ms 5, as a usual producer) for ``--seconds``, and reads every routed record
back from the group topics. Per routed record (after a warm-up second):

* producer timestamp (CreateTime, kept on the routed record) to the record's ``subroute.routed-at`` header
  (stamped when the worker starts routing the batch that holds it);
* producer timestamp to the routed record being read from its group topic by a consumer (fetch.wait.max.ms 10).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time

import perfkit
from confluent_kafka import Consumer, Producer
from perfkit import median, spread

from subroute import wire
from subroute.kafka.clients import admin_client, ensure_topics


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def max_rate(bootstrap: str, messages: int) -> float:
    s = perfkit.settings(bootstrap)
    topic = f"{s.topic_prefix}-orders"
    perfkit.create_topic(s, topic, 1)
    perfkit.produce_input(s, topic, perfkit.message_headers(messages))
    perfkit.write_config(s, perfkit.subscription_config(1_000, topic))
    return perfkit.run_worker(s, messages).timing.rate


def latency_run(
    bootstrap: str, rate: float, seconds: float, worker_args: list[str]
) -> tuple[list[float], list[float], float]:
    s = perfkit.settings(bootstrap)
    topic = f"{s.topic_prefix}-orders"
    perfkit.create_topic(s, topic, 1)
    config = perfkit.subscription_config(1_000, topic)
    perfkit.write_config(s, config)
    ensure_topics(admin_client(s), perfkit.output_topics(s, config))
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "subroute.cli",
            "worker",
            "--bootstrap-servers",
            bootstrap,
            "--topic-prefix",
            s.topic_prefix,
            "--metrics-port",
            "-1",
            "--log-level",
            "WARNING",
            *worker_args,
        ],
        env={**os.environ, "SUBROUTE_KAFKA_SESSION_TIMEOUT_MS": str(perfkit.SESSION_TIMEOUT_MS)},
        cwd=perfkit.ROOT,
        stdout=subprocess.DEVNULL,
    )
    to_stamp: list[float] = []
    to_read: list[float] = []
    stop = threading.Event()
    started_at: list[float] = []

    def reader() -> None:
        consumer = Consumer(
            s.client_config(
                {
                    "group.id": f"{s.topic_prefix}.latency-reader",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "session.timeout.ms": perfkit.SESSION_TIMEOUT_MS,
                    "fetch.wait.max.ms": 10,  # the reader's own wait should not count
                }
            )
        )
        consumer.subscribe([wire.group_topic(s.topic_prefix, a, g) for a, g in config.groups])
        while not stop.is_set():
            for m in consumer.consume(1000, timeout=0.1):
                if m.error() is not None:
                    continue
                now = time.time() * 1000
                created = m.timestamp()[1]
                if not started_at or created < started_at[0]:
                    continue  # warm-up
                routed = next((v for k, v in m.headers() or () if k == wire.ROUTED_AT), None)
                if routed is not None:
                    to_stamp.append(int(routed) - created)
                    to_read.append(now - created)
        consumer.close()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    producer = Producer(s.client_config({"linger.ms": 5, "enable.idempotence": True, "acks": "all"}))
    headers = perfkit.message_headers(int(rate * (seconds + 3)) + 1)
    value = b"v" * perfkit.VALUE_BYTES
    time.sleep(8)  # the worker joins its group (on Tansu the first join takes about session.timeout.ms / 2)
    begin = time.perf_counter()
    sent = 0
    warm = False
    while True:
        elapsed = time.perf_counter() - begin
        if elapsed >= seconds + 1:
            break
        if not warm and elapsed >= 1.0:
            started_at.append(time.time() * 1000)  # records created from now on are measured
            warm = True
        due = int(elapsed * rate)
        while sent < due:
            producer.produce(topic, value=value, key=f"k{sent}".encode(), headers=headers[sent])
            sent += 1
        producer.poll(0)
        time.sleep(0.001)
    producer.flush(30)
    achieved = sent / (time.perf_counter() - begin)
    time.sleep(3)  # the last records are routed and read
    stop.set()
    thread.join(timeout=10)
    worker.terminate()
    worker.wait(timeout=30)
    return to_stamp, to_read, achieved


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    perfkit.common_arguments(parser, messages=100_000)
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of paced input per run (10)")
    parser.add_argument(
        "--rate", type=float, default=None, help="input rate; default half the measured maximum"
    )
    parser.add_argument(
        "--worker-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="a flag for the worker, repeatable (e.g. --worker-arg=--commit-interval-records --worker-arg=1)",
    )
    args = parser.parse_args()
    p50s, p99s, r50s, r99s = [], [], [], []
    with perfkit.broker() as b:
        if args.rate is None:
            maximum = median([max_rate(b.bootstrap_servers, args.messages) for _ in range(args.repeat)])
            rate = maximum / 2
            print(
                f"maximum throughput {maximum:,.0f} records/s (median of {args.repeat}); pacing at {rate:,.0f}/s"
            )
        else:
            rate = args.rate
        for rep in range(args.repeat):
            stamp, read, achieved = latency_run(b.bootstrap_servers, rate, args.seconds, args.worker_arg)
            p50s.append(percentile(stamp, 50))
            p99s.append(percentile(stamp, 99))
            r50s.append(percentile(read, 50))
            r99s.append(percentile(read, 99))
            print(
                f"run {rep + 1}: {len(stamp):,} routed records measured at {achieved:,.0f}/s in: to routed-at "
                f"p50 {p50s[-1]:.0f} ms p99 {p99s[-1]:.0f} ms; to read from the group topic p50 {r50s[-1]:.0f} ms "
                f"p99 {r99s[-1]:.0f} ms",
                flush=True,
            )
    print(f"\nend-to-end latency at {rate:,.0f} records/s, 1,000 expressions, {args.repeat} runs (median):")
    print(f"  producer timestamp -> subroute.routed-at: p50 {spread(p50s)} ms, p99 {spread(p99s)} ms")
    print(f"  producer timestamp -> read from the group topic: p50 {spread(r50s)} ms, p99 {spread(r99s)} ms")


if __name__ == "__main__":
    main()
