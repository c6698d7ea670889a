#!/usr/bin/env python
"""Read a group's topic with a plain Kafka consumer, headers included: what a Java, Go or any other team does.

It uses confluent_kafka alone, nothing of subroute: a group topic is an ordinary topic. Its name and the
consumer group whose commits confirm its records are both ``<prefix>.<app>.<group>`` (a group of an app with
``priority:`` also has band topics ``<prefix>.<app>.<group>.p1`` ... ``.p9``: subscribe to them too). Each
record is the producer's value and headers, byte for byte, followed by the router's headers (read them by name:
``subroute.source``, ``subroute.app``, ``subroute.group``, ``subroute.subscription``,
``subroute.config-version``, ``subroute.routed-at``; README.md, "The header contract"). Committing after
processing confirms the record: it leaves the group's lag, which the router counts against ``max_unconfirmed``.
None of the queue verbs of QueueConsumer (cancel, leases, dead letters) apply here.

Run it against a broker with examples/jobs.yaml applied, a router worker running and reports published (see
examples/publish.py):

    python examples/plain_consumer.py --bootstrap 127.0.0.1:9092 --app audit --group reports

It runs until Ctrl-C, or until it has read ``--count`` records.
"""

import argparse

from confluent_kafka import Consumer, KafkaException


def main(args: argparse.Namespace) -> None:
    # The group topic, and the consumer group whose commits confirm its records.
    name = f"{args.prefix}.{args.app}.{args.group}"
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,  # commit after processing, as a queue's consumer confirms
        }
    )
    consumer.subscribe([name])

    read = 0
    try:
        while read != args.count:
            record = consumer.poll(timeout=1.0)
            if record is None:
                continue
            if record.error():
                raise KafkaException(record.error())
            where = f"{record.topic()} [{record.partition()}] at offset {record.offset()}"
            print(f"{where}, key {record.key()!r}:")
            for header, value in record.headers() or []:
                print(f"    {header}: {value.decode(errors='replace') if value is not None else None}")
            print(f"    value: {(record.value() or b'').decode(errors='replace')}")
            consumer.commit(message=record, asynchronous=False)
            read += 1
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()  # leave the group at once, rather than when the session times out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Read a group's topic with a plain Kafka consumer")
    parser.add_argument("--bootstrap", required=True, help="Bootstrap broker(s) (host[:port])")
    parser.add_argument("--prefix", default="subroute", help="Topic prefix (default subroute)")
    parser.add_argument("--app", required=True, help="App")
    parser.add_argument("--group", required=True, help="Consumer group of the app")
    parser.add_argument("--count", type=int, default=None, help="Stop after reading this many records")

    main(parser.parse_args())
