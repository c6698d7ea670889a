#!/usr/bin/env python
"""Publish messages to an app's input, with headers: what a producing service does.

``publish()`` writes each value to the app's ``default_publish`` topic (one of its inputs) and returns once the
broker has acknowledged it. The headers are the message's properties: the router evaluates every app's filter
and subscriptions on them and routes one copy to each app that takes the message (in examples/jobs.yaml, app
``jobs`` takes every job, app ``audit`` only ``Kind == "report"``).

Run it against a broker with examples/jobs.yaml applied and a router worker running:

    subroute dev broker --port 9092 &
    subroute config apply -f examples/jobs.yaml
    subroute worker &
    python examples/publish.py --bootstrap 127.0.0.1:9092 --app jobs --header Kind=report '{"job": 1}'

Then take the jobs with examples/queue_consumer.py and read the reports with examples/plain_consumer.py.
"""

import argparse

from subroute.client import publish
from subroute.config.store import read_app
from subroute.ops.settings import Settings


def main(args: argparse.Namespace) -> None:
    settings = Settings(bootstrap_servers=args.bootstrap, topic_prefix=args.prefix)
    app = read_app(settings, args.app)  # the app as configured: where to publish
    headers = dict(header.split("=", 1) for header in args.header)

    for value in args.values:
        topic, partition, offset = publish(settings, args.app, value.encode(), headers, app_config=app)
        print(f"published to {topic} [{partition}] at offset {offset}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Publish messages to an app's input, with headers")
    parser.add_argument("--bootstrap", required=True, help="Bootstrap broker(s) (host[:port])")
    parser.add_argument("--prefix", default="subroute", help="Topic prefix (default subroute)")
    parser.add_argument("--app", required=True, help="App to publish to (its default_publish topic)")
    parser.add_argument(
        "--header", action="append", default=[], metavar="NAME=VALUE", help="Message header, repeatable"
    )
    parser.add_argument("values", nargs="+", metavar="VALUE", help="Message value, one message each")

    main(parser.parse_args())
