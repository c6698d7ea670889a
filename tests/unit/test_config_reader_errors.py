"""The config reader's account of why the brokers cannot be reached: librdkafka reports each failed attempt and
then "N/N brokers are down"; the worker's start-up message must name the failure, whatever order they came in."""

from __future__ import annotations

from confluent_kafka import KafkaError

from subroute.config.store import _TopicReader
from subroute.ops.settings import Settings

REFUSED = KafkaError(
    KafkaError._TRANSPORT, "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection refused"
)
ALL_DOWN = KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down")


def reader() -> _TopicReader:
    # Creating a consumer connects nothing until it is used.
    return _TopicReader(Settings(bootstrap_servers="127.0.0.1:9", topic_prefix="t"))


def test_brokers_down_after_the_cause_keeps_the_cause() -> None:
    r = reader()
    try:
        r._on_error(REFUSED)
        r._on_error(ALL_DOWN)
        assert r.broker_error is not None
        assert "Connection refused" in r.broker_error and "brokers are down" in r.broker_error
    finally:
        r.close()


def test_brokers_down_alone_is_said_and_a_later_cause_joins_it() -> None:
    r = reader()
    try:
        assert r.broker_error is None
        r._on_error(ALL_DOWN)
        assert r.broker_error == "1/1 brokers are down"
        r._on_error(REFUSED)
        assert r.broker_error is not None and r.broker_error.endswith("Connection refused")
    finally:
        r.close()
