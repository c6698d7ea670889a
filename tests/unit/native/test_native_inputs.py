"""Property test: the native reading of a consumed batch (router/routing/native_inputs.py) reads every record as
``InputRecord.of`` reads it, sorts them into input and pending records and errors as the worker's batch did record
by record, and gives each input partition's first offset and the one after its last, in batch order: for
records with and without headers, key, value or timestamp, partitions interleaved, and error messages among
them."""

from __future__ import annotations

from confluent_kafka import KafkaError, Message
from hypothesis import given, settings
from hypothesis import strategies as st

from subroute.routing.envelope import InputRecord
from subroute.routing.native_inputs import read_inputs

PENDING = {"shop.billing.pending": "billing"}
TOPICS = st.sampled_from(["orders", "payments", "shop.billing.pending", "é-topic"])
HEADERS = st.none() | st.lists(
    st.tuples(st.sampled_from(["Region", "App", "subroute.app", "x"]), st.none() | st.binary(max_size=6)),
    max_size=4,
)


@st.composite
def batches(draw: st.DrawFn) -> list[Message]:
    batch: list[Message] = []
    next_offset: dict[tuple[str, int], int] = {}
    for _ in range(draw(st.integers(0, 30))):
        topic, partition = draw(TOPICS), draw(st.integers(0, 3))
        offset = next_offset.get((topic, partition), draw(st.integers(0, 1_000)))
        next_offset[(topic, partition)] = offset + draw(st.integers(1, 3))  # gaps: compacted or transactional
        if draw(st.integers(0, 9)) == 0:
            code = draw(st.sampled_from([KafkaError._PARTITION_EOF, KafkaError.UNKNOWN_TOPIC_OR_PART]))
            batch.append(Message(topic=topic, partition=partition, offset=offset, error=KafkaError(code)))
            continue
        batch.append(
            Message(
                topic=topic,
                partition=partition,
                offset=offset,
                key=draw(st.none() | st.binary(max_size=4)),
                value=draw(st.none() | st.binary(max_size=8)),
                headers=draw(HEADERS),
                timestamp=draw(st.sampled_from([(0, -1), (1, 1_700_000_000_000), (2, 5)])),
            )
        )
    return batch


def reference(
    batch: list[Message],
) -> tuple[list[InputRecord], list[InputRecord], list[Message], list[tuple[str, int, int, int]]]:
    """What the worker's batch did before the native reading: each record read by ``InputRecord.of``."""
    inputs: list[InputRecord] = []
    pending: list[InputRecord] = []
    errors: list[Message] = []
    first: dict[tuple[str, int], int] = {}
    end: dict[tuple[str, int], int] = {}
    for raw in batch:
        if raw.error() is not None:
            errors.append(raw)
            continue
        message = InputRecord.of(raw)
        if message.topic in PENDING:
            pending.append(message)
            continue
        inputs.append(message)
        first.setdefault((message.topic, message.partition), message.offset)
        end[(message.topic, message.partition)] = message.offset + 1
    return inputs, pending, errors, [(t, p, o, end[(t, p)]) for (t, p), o in first.items()]


@settings(max_examples=300, deadline=None)
@given(batches())
def test_native_reading_reads_as_input_record_of_does(batch: list[Message]) -> None:
    inputs, pending, errors, spans = reference(batch)
    read = read_inputs(batch, PENDING)
    assert read.inputs == inputs
    assert read.pending == pending
    assert [id(m) for m in read.errors] == [id(m) for m in errors]
    assert [(s.topic, s.partition, s.first, s.end) for s in read.spans] == spans
    assert all(type(record) is InputRecord for record in (*read.inputs, *read.pending))


def test_a_record_without_headers_gets_a_list_of_its_own() -> None:
    """As ``InputRecord.of`` makes it: a list of the record's own, not one shared by every record without."""
    read = read_inputs([Message(topic="orders", partition=0, offset=i) for i in range(2)], {})
    first, second = read.inputs
    assert first.headers == [] and second.headers == [] and first.headers is not second.headers
