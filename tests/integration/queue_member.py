"""One member of a consumer group as its own process, for the tests of redelivery to another member.

``python -m tests.integration.queue_member BOOTSTRAP PREFIX APP GROUP [HOLD]``: a QueueConsumer that acknowledges
every message it gets (after HOLD seconds, default 0) and writes one JSON line per event on stdout:
``{"assigned": [[topic, partition], ...]}`` when its assignment changes, ``{"value": ..., "partition": ...,
"deliveries": ..., "cancels": ...}`` per message, ``{"acked": value, "at": time.monotonic()}`` after each ack (the
clock is the machine's, comparable across processes). It stops, closing the consumer (commit, leave the group),
when its stdin is closed.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from subroute.client import QueueConsumer
from subroute.config.store import read_app
from subroute.ops.settings import Settings

# As tests.integration.client_support.CONSUMER_CONFIG (not imported: that module needs the test harness).
CONSUMER_CONFIG = {"session.timeout.ms": 6000}


def main(argv: list[str]) -> int:
    bootstrap, prefix, app, group = argv[:4]
    hold = float(argv[4]) if len(argv) > 4 else 0.0
    settings = Settings(bootstrap_servers=bootstrap, topic_prefix=prefix)
    stop = threading.Event()

    def wait_for_eof() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=wait_for_eof, daemon=True).start()
    assigned: list[list[object]] = []
    with QueueConsumer(
        settings, app, group, app_config=read_app(settings, app), consumer_config=CONSUMER_CONFIG
    ) as queue:
        while not stop.is_set():
            message = queue.poll(0.2)
            now = sorted([t, p] for t, p in queue.assignment)
            if now != assigned:
                assigned = now
                print(json.dumps({"assigned": assigned}), flush=True)
            if message is None:
                continue
            value = message.value.decode() if message.value is not None else None
            line = {
                "value": value,
                "partition": message.partition,
                "deliveries": message.deliveries,
                "cancels": message.cancels,
            }
            print(json.dumps(line), flush=True)
            time.sleep(hold)  # processing
            queue.ack(message)
            print(json.dumps({"acked": value, "at": time.monotonic()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
