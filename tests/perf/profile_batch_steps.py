"""The worker's per-batch steps around the decisions, without Kafka: ``python tests/perf/profile_batch_steps.py
[--size 10000] [--messages 2000] [--repeat 41]``.

Issue 26: where the poll loop's CPU per record goes besides the client's calls. A batch of ``--messages``
confluent-kafka ``Message``s is made in this process (perfkit's order headers, a 200-byte value, four
partitions) and routed under perfkit's subscription configuration at ``--size`` subscriptions, and each step
``BatchRouter.route_batch`` takes is timed alone, CPU µs per record, the median of ``--repeat`` passes:

* read: the batch read into ``InputRecord``s with each input partition's offsets (``native_inputs.read_inputs``),
  beside its Python reference (``InputRecord.of`` per record, as the worker read before);
* header check: whether any header is named like the router's own (``batch._names_any_routers_header``),
  beside a Python scan of every header name (the check before);
* decide: ``Router.route_batch``, the native decisions;
* assemble: the routed records made (``native_envelope.input_records``);
* count: each result's decisions gathered into the batch's tally (``batch._count``);
* metrics: the decisions counted by label and added to the metrics (``count_labels``, ``BatchTally.publish``).

The ``produce()`` calls, the delivery reports and the consumer's calls are not here: ``profile_worker_loop.py``
times the whole loop on a broker.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable

import perfkit
from confluent_kafka import Message

from subroute.ops.metrics import RouterMetrics
from subroute.routing.decisions import Router
from subroute.routing.envelope import Envelopes, InputRecord
from subroute.routing.native_envelope import input_records
from subroute.routing.native_inputs import read_inputs
from subroute.routing.native_routing import build_table
from subroute.wire import HEADER_PREFIX
from subroute.worker.batch import _count, _names_any_routers_header
from subroute.worker.tally import BatchTally, count_labels


def cpu_us_per_record(step: Callable[[], object], records: int, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.process_time()
        step()
        samples.append((time.process_time() - start) / records * 1e6)
    return perfkit.median(samples)


def read_in_python(batch: list[Message]) -> list[InputRecord]:
    """The reading before ``read_inputs``: each record by ``InputRecord.of``, each partition's offsets kept."""
    inputs, first, end = [], {}, {}
    for raw in batch:
        if raw.error() is not None:
            continue
        message = InputRecord.of(raw)
        first.setdefault((message.topic, message.partition), message.offset)
        inputs.append(message)
    for message in inputs:
        end[(message.topic, message.partition)] = message.offset + 1
    return inputs


def scan_in_python(inputs: list[InputRecord]) -> bool:
    """The check before: every header name looked at in Python."""
    for message in inputs:
        for name, _ in message.headers_list:
            if name.startswith(HEADER_PREFIX):
                return True
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000, help="subscriptions (10,000)")
    parser.add_argument("--messages", type=int, default=2_000, help="records per batch (2,000: the worker's)")
    parser.add_argument("--repeat", type=int, default=41, help="passes per figure, median reported (41)")
    args = parser.parse_args()
    table = build_table(perfkit.subscription_config(args.size, "orders"))
    gc.freeze()  # as the worker does after each build
    batch = [
        Message(
            topic="orders",
            partition=i % 4,
            offset=i // 4,
            value=b"x" * 200,
            headers=headers,
            timestamp=(1, 1_700_000_000_000 + i),
        )
        for i, headers in enumerate(perfkit.message_headers(args.messages, seed=5))
    ]
    inputs = read_inputs(batch, {}).inputs
    router, metrics = Router(), RouterMetrics()
    results = router.route_batch(table, inputs, {}, 0)
    routed = [result.routed for result in results]
    envelopes = Envelopes("bench", table)
    tally = BatchTally()
    for result in results:
        _count(result, tally)

    def counted() -> None:
        tally.publish(metrics, count_labels(tally.decisions))

    def count() -> None:
        gathered = BatchTally()
        for result in results:
            _count(result, gathered)

    steps: list[tuple[str, Callable[[], object]]] = [
        ("read (native)", lambda: read_inputs(batch, {})),
        ("read (Python reference)", lambda: read_in_python(batch)),
        ("header check (batch, in C)", lambda: _names_any_routers_header(inputs)),
        ("header check (Python scan)", lambda: scan_in_python(inputs)),
        ("decide", lambda: router.route_batch(table, inputs, {}, 0)),
        ("assemble", lambda: input_records(inputs, routed, 1_700_000_000_000, envelopes)),
        ("count", count),
        ("metrics", counted),
    ]
    print(
        f"{args.messages:,} records, {args.size:,} subscriptions, CPU µs per record, median of {args.repeat} "
        f"passes ({sum(len(r) for r in routed) / len(routed):.1f} routed decisions per record)"
    )
    for name, step in steps:
        print(f"  {name:28} {cpu_us_per_record(step, args.messages, args.repeat):6.3f}")


if __name__ == "__main__":
    main()
