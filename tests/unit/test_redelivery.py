"""What the worker does with records whose delivery failed (at-least-once), decided without Kafka."""

from __future__ import annotations

from confluent_kafka import KafkaError

from subroute import wire
from subroute.routing.envelope import OutRecord
from subroute.worker.redelivery import MAX_ATTEMPTS, Failure, backoff, plan, resolve

PREFIX = "sr"


def record(topic: str, app: str = "shop", value: bytes | None = b"v") -> OutRecord:
    headers = [(wire.SOURCE, b"in/0/7"), (wire.APP, app.encode()), (wire.GROUP, b"g")]
    return (topic, value, b"k", headers, 1234)


def failure(rec: OutRecord, code: int, retriable: bool = False) -> Failure:
    return Failure(rec, code, retriable, f"error {code}")


def test_a_retriable_failure_is_retried_alone_then_dead_lettered_once_attempts_run_out() -> None:
    lost = record("sr.shop.g")
    for attempt in range(MAX_ATTEMPTS - 1):
        step = plan([failure(lost, KafkaError._MSG_TIMED_OUT)], attempt, PREFIX)
        assert step.retry == [lost] and not step.dead_letter and not step.rewind
    step = plan([failure(lost, KafkaError._MSG_TIMED_OUT)], MAX_ATTEMPTS - 1, PREFIX)
    assert step.retry == []
    [(stub, why)] = step.dead_letter
    assert why.record == lost
    topic, value, key, headers, timestamp = stub
    assert (topic, value, key, timestamp) == (wire.dlq_topic(PREFIX, "shop"), None, b"k", 1234)
    assert (wire.DLQ_REASON, b"undeliverable") in headers and (wire.SOURCE, b"in/0/7") in headers


def test_a_missing_topic_is_recreated_once_and_retried() -> None:
    gone = record("sr.shop.g")
    step = plan([failure(gone, KafkaError.UNKNOWN_TOPIC_OR_PART, retriable=True)], 0, PREFIX)
    assert step.recreate == {"sr.shop.g"} and step.retry == [gone]
    step = plan([failure(gone, KafkaError._UNKNOWN_TOPIC)], 1, PREFIX)
    assert step.recreate == set() and step.retry == [gone]  # created once; retried while attempts last
    # Kafka 4 knows topics by id too: a producer still holding the deleted topic's id is told so, not retriably
    for code in (KafkaError.UNKNOWN_TOPIC_ID, KafkaError.INCONSISTENT_TOPIC_ID):
        step = plan([failure(gone, code)], 0, PREFIX)
        assert step.recreate == {"sr.shop.g"} and step.retry == [gone] and step.dead_letter == []


def test_a_record_too_large_for_its_topic_becomes_a_stub_at_once() -> None:
    big = record("sr.shop.g", value=b"x" * 10_000)
    step = plan([failure(big, KafkaError.MSG_SIZE_TOO_LARGE)], 0, PREFIX)
    [(stub, _)] = step.dead_letter
    assert stub[1] is None and (wire.DLQ_REASON, b"too-large") in stub[3]


def test_a_permanent_failure_of_one_destination_dead_letters_only_its_records() -> None:
    denied, fine = record("sr.shop.secret"), record("sr.shop.g")
    step = plan([failure(denied, KafkaError.TOPIC_AUTHORIZATION_FAILED)], 0, PREFIX)
    assert [why.record for _, why in step.dead_letter] == [denied] and fine not in step.retry


def test_only_a_failed_dead_letter_rewinds_the_batch() -> None:
    stub = record(wire.dlq_topic(PREFIX, "shop"), value=None)
    assert plan([failure(stub, KafkaError.TOPIC_AUTHORIZATION_FAILED)], 0, PREFIX).rewind
    assert not plan([failure(record("sr.shop.g"), KafkaError.TOPIC_AUTHORIZATION_FAILED)], 0, PREFIX).rewind


def test_backoff_grows_and_is_bounded() -> None:
    waits = [backoff(a) for a in range(1, 12)]
    assert waits == sorted(waits) and waits[0] > 0 and max(waits) <= 5.0


def test_a_failure_takes_the_headers_of_the_record_it_was() -> None:
    # A delivery report has topic, key and value, not the headers: each failure is matched to a sent record.
    first, second = record("sr.shop.g"), record("sr.shop.g")
    second = (second[0], second[1], second[2], [(wire.SOURCE, b"in/0/8"), (wire.APP, b"shop")], 99)
    reported = [failure(("sr.shop.g", b"v", b"k", [], 1), KafkaError._MSG_TIMED_OUT) for _ in range(2)]
    resolved = resolve(reported, [first, record("sr.shop.other"), second])
    assert sorted(f.record[3][0][1] or b"" for f in resolved) == [b"in/0/7", b"in/0/8"]
    unknown = resolve([failure(("sr.shop.x", b"?", None, [], 1), KafkaError._MSG_TIMED_OUT)], [first])
    assert unknown[0].record[0] == "sr.shop.x"  # kept as reported
