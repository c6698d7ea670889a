#!/usr/bin/env python
"""Work through a group's queue with QueueConsumer: ack what is done, cancel what failed.

Each message is handed to one member of the group. ``ack`` removes it from the queue (its offset is committed);
``cancel`` gives it back: it is written again to the group's topic, for another member when there is one, with
``subroute.deliveries`` raised, and a message cancelled ``max_cancels`` times goes to the app's dead-letter topic
instead. ``lease`` cancels a message that is neither acked nor cancelled in time (a worker that hangs).

Here a job that says ``"fail_once": true`` fails on its first delivery (say, a service it needs is down): it is
cancelled, comes back with ``deliveries=1`` and is acked then.

Run it against a broker with examples/jobs.yaml applied and a router worker running (see examples/publish.py):

    python examples/queue_consumer.py --bootstrap 127.0.0.1:9092 --app jobs --group workers

It runs until Ctrl-C, or until it has acked ``--count`` messages. Start it twice to see a group of two members.
"""

import argparse
import json

from subroute.client import QueueConsumer, QueueMessage
from subroute.config.store import read_app
from subroute.ops.settings import Settings


class TransientError(Exception):
    pass


def handle(message: QueueMessage) -> None:
    """The application's work."""
    job = json.loads(message.value or b"{}")
    if job.get("fail_once") and message.deliveries == 0:
        raise TransientError("the service the job needs did not answer")


def describe(message: QueueMessage) -> str:
    value = (message.value or b"").decode(errors="replace")
    return f"{message.topic} [{message.partition}] at offset {message.offset} deliveries={message.deliveries} {value}"


def main(args: argparse.Namespace) -> None:
    settings = Settings(bootstrap_servers=args.bootstrap, topic_prefix=args.prefix)
    app = read_app(settings, args.app)  # the app as configured: the client reads no configuration itself

    acked = 0
    with QueueConsumer(settings, args.app, args.group, app_config=app, lease=args.lease) as queue:
        try:
            for message in queue:
                try:
                    handle(message)
                except TransientError as exc:
                    queue.cancel(message)  # back to the queue, raising subroute.deliveries and .cancels
                    print(f"cancelled {describe(message)}: {exc}")
                    continue
                if not queue.ack(message):  # False: its lease ran out first, it was given back
                    print(f"too late for {describe(message)}")
                    continue
                print(f"acked {describe(message)}")
                acked += 1
                if acked == args.count:
                    break
        except KeyboardInterrupt:
            pass  # leaving the with block commits what is acked and leaves the group


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Work through a group's queue: ack, cancel")
    parser.add_argument("--bootstrap", required=True, help="Bootstrap broker(s) (host[:port])")
    parser.add_argument("--prefix", default="subroute", help="Topic prefix (default subroute)")
    parser.add_argument("--app", required=True, help="App")
    parser.add_argument("--group", required=True, help="Consumer group of the app")
    parser.add_argument("--lease", type=float, default=30.0, help="Lease in seconds (default 30)")
    parser.add_argument("--count", type=int, default=None, help="Stop after acking this many messages")

    main(parser.parse_args())
