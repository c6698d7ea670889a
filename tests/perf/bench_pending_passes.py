"""What reading past the head costs: ``python tests/perf/bench_pending_passes.py [--backlog N] [--every K]``.

An app ``billing`` with two groups, ``vip`` and ``general`` (``presence: required``), and a pending partition
pre-loaded with ``--backlog`` waiting records (default 100,000), one in ``--every`` (default 100) for vip, the rest
for general. One worker runs in this process; nobody is attached at first. Figures, each from the worker's own
batches (records of the pending partition given to the batch router, and the time spent routing them):

1. the first reading of the partition (a routing pass: every record decided, none can go);
2. ten quiet seconds (nothing changes): records read again (none expected);
3. vip attaches: the pass that routes its records past the general ones, and how long until the last arrives;
4. ten seconds with vip attached and confirming while new vip input arrives (its count falls at every
   measurement, which concerns no waiting record): records of the backlog read again (none expected);
5. a new config version (it concerns every waiting record): the pass over the whole backlog;
6. vip given a limit (``max_unconfirmed`` 100) and 500 more records at once: those beyond the limit wait for room
   behind the backlog, and every measurement that shows vip's confirms wakes a pass: the passes until the last
   arrives, and what they decided.
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

import perfkit
from confluent_kafka import Consumer, Producer

from subroute import wire
from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig
from subroute.kafka.clients import admin_client, close_producer, ensure_topics
from subroute.ops.metrics import RouterMetrics
from subroute.ops.settings import Settings
from subroute.routing.envelope import InputRecord
from subroute.worker.loop import Worker, WorkerOptions


class Attached:
    """A member of the vip consumer group that reads and commits what reaches the group topic."""

    def __init__(self, s: Settings, topic: str, group: str) -> None:
        self.received = 0
        self._stop = threading.Event()
        self._consumer = Consumer(perfkit.consumer_config(s, group))
        self._consumer.subscribe([topic])
        self._thread = perfkit.run_in_thread(self._run)

    def _run(self) -> None:
        while not self._stop.is_set():
            got = 0
            for message in self._consumer.consume(500, timeout=0.2):
                if message.error() is None:
                    got += 1
            if got:
                self.received += got
                self._consumer.commit(
                    asynchronous=False
                )  # confirmed: the worker sees room at its next measurement

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()


def config(topic: str, changed: bool = False, vip_limit: int | None = None) -> Config:
    """The app; ``changed``: general's subscription rewritten (a new version that routes the same)."""
    app = AppConfig("billing", (topic,), "bmq", {"tier": "string"}, presence="required")
    general = 'tier == "general" || tier == "nobody"' if changed else 'tier == "general"'
    vip = SubscriptionConfig('tier == "vip"', max_unconfirmed=vip_limit)
    groups = {
        ("billing", "vip"): GroupConfig("billing", "vip", (vip,)),
        ("billing", "general"): GroupConfig("billing", "general", (SubscriptionConfig(general),), 1),
    }
    return Config(apps={"billing": app}, groups=groups)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=100_000, help="waiting records (default 100,000)")
    parser.add_argument(
        "--every", type=int, default=100, help="one record in EVERY waits for vip (default 100)"
    )
    args = parser.parse_args()
    with perfkit.broker() as b:
        s = perfkit.settings(b.bootstrap_servers)
        topic = f"{s.topic_prefix}-orders"
        perfkit.create_topic(s, topic, 1)
        perfkit.write_config(s, config(topic))
        ensure_topics(admin_client(s), perfkit.output_topics(s, config(topic)))
        pending = wire.pending_topic(s.topic_prefix, "billing")
        vip_count = len(range(0, args.backlog, args.every))
        headers = [
            [
                (wire.CONFIG_VERSION, b"1"),
                (wire.PENDING_REASON, b"no-consumer"),
                ("tier", b"vip" if i % args.every == 0 else b"general"),
            ]
            for i in range(args.backlog)
        ]
        perfkit.produce_input(s, pending, headers)
        print(f"pending partition: {args.backlog:,} waiting records, {vip_count:,} of them for vip")

        worker = Worker(s, WorkerOptions(session_timeout_ms=perfkit.SESSION_TIMEOUT_MS), RouterMetrics())
        reads: list[tuple[float, float]] = []  # (when, seconds) per pending record given to the batch router
        routed = worker.batches._pending

        def counted(state: Any, message: InputRecord, *rest: Any) -> None:
            began = time.perf_counter()
            routed(state, message, *rest)
            if message.offset < args.backlog:
                reads.append((began, time.perf_counter() - began))

        worker.batches._pending = counted  # type: ignore[method-assign]
        decisions: list[
            float
        ] = []  # when each backlog record was decided (Router.route on the pending topic)
        decide = worker.batches.router.route

        def deciding(table: Any, message: Any, *rest: Any, **kw: Any) -> Any:
            if message.topic == pending and message.offset < args.backlog:
                decisions.append(time.perf_counter())
            return decide(table, message, *rest, **kw)

        worker.batches.router.route = deciding  # type: ignore[method-assign]
        starts: list[float] = []  # when each routing pass began
        begin = worker.pending._routing_pass

        def begun(*pass_args: Any) -> None:
            starts.append(time.perf_counter())
            begin(*pass_args)

        worker.pending._routing_pass = begun  # type: ignore[method-assign]
        thread = perfkit.run_in_thread(worker.run)

        vip: Attached | None = None

        def wait(condition: Any, what: str, timeout: float = 600) -> float:
            began = time.monotonic()
            while not condition():
                if time.monotonic() - began > timeout:
                    raise SystemExit(
                        f"timed out waiting for {what} (vip received {vip.received if vip else 0:,})"
                    )
                time.sleep(0.05)
            return time.monotonic() - began

        def since(mark: float) -> tuple[int, float]:
            """Backlog records read since ``mark``, and the seconds spent on them."""
            mine = [d for t, d in reads if t >= mark]
            return len(mine), sum(mine)

        def decided(mark: float) -> int:
            return sum(1 for t in decisions if t >= mark)

        def quiet_until_reads_stop() -> float:
            last = -1
            while last != len(reads):
                last = len(reads)
                time.sleep(1.0)
            return time.perf_counter()

        mark = time.perf_counter()
        wait(lambda: len(reads) >= args.backlog, "the first pass")
        quiet_until_reads_stop()
        count, spent = since(mark)
        print(
            f"1. first reading: {count:,} records read, {decided(mark):,} decided, {spent:.2f} s on them "
            f"({1e6 * spent / count:.1f} us a record read), {len(starts)} routing pass(es)"
        )

        mark = time.perf_counter()
        time.sleep(10)
        count, _ = since(mark)
        print(f"2. ten quiet seconds: {count:,} backlog records read again")

        vip = Attached(
            s,
            wire.group_topic(s.topic_prefix, "billing", "vip"),
            wire.consumer_group_id(s.topic_prefix, "billing", "vip"),
        )
        mark = time.perf_counter()
        present = worker.metrics.group_present.labels("billing", "vip")
        wait(lambda: present._value.get() == 1, "vip to count as present")
        took = wait(lambda: vip.received >= vip_count, "vip to receive its waiting records")
        quiet_until_reads_stop()
        count, spent = since(mark)
        print(
            f"3. vip attached: {vip_count:,} records routed past the general ones, the last {took:.2f} s after "
            f"the worker saw vip; the pass read {count:,} records, decided {decided(mark):,}, in {spent:.2f} s"
        )

        producer = Producer(s.client_config({"linger.ms": 5}))
        mark = time.perf_counter()
        stop_at = time.monotonic() + 10
        sent = 0
        while time.monotonic() < stop_at:
            producer.produce(topic, value=b"x", headers=[("tier", b"vip")])
            sent += 1
            producer.poll(0)
            time.sleep(0.005)
        producer.flush(30)
        close_producer(producer)
        wait(lambda: vip.received >= vip_count + sent, "vip to receive the new input")
        count, _ = since(mark)
        print(f"4. ten seconds of vip confirming {sent:,} new records: {count:,} backlog records read again")

        mark = time.perf_counter()
        version = worker.metrics.plan_version._value.get()
        perfkit.write_config(s, config(topic, changed=True))
        wait(lambda: worker.metrics.plan_version._value.get() > version, "the new config version")
        wait(lambda: since(mark)[0] >= args.backlog - vip_count, "the pass")
        quiet_until_reads_stop()
        count, spent = since(mark)
        print(
            f"5. a new config version: the pass read {count:,} records, decided {decided(mark):,}, in {spent:.2f} s"
        )

        mark = time.perf_counter()
        version = worker.metrics.plan_version._value.get()
        perfkit.write_config(s, config(topic, changed=True, vip_limit=100))
        wait(lambda: worker.metrics.plan_version._value.get() > version, "the limit in force")
        quiet_until_reads_stop()
        before = vip.received
        producer = Producer(s.client_config({"linger.ms": 5}))
        for _ in range(500):
            producer.produce(topic, value=b"x", headers=[("tier", b"vip")])
        producer.flush(30)
        close_producer(producer)
        mark = time.perf_counter()
        passes_before = len(starts)
        took = wait(lambda: vip.received >= before + 500, "vip to receive the 500")
        quiet_until_reads_stop()
        count, spent = since(mark)
        print(
            f"6. vip at its limit: 500 records through it in {took:.1f} s; {len(starts) - passes_before} passes "
            f"read {count:,} backlog records, decided {decided(mark):,}, in {spent:.2f} s"
        )

        vip.close()
        worker.stop()
        thread.join(60)


if __name__ == "__main__":
    main()
