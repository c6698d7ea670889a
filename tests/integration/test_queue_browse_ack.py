"""Seed 001 (AMPS queues) on the real broker: ``subroute queue browse`` (a read-only view of what a group has not
confirmed) and ``subroute queue ack`` (a filtered ``sow_delete``: settle matching unconfirmed messages so no member
delivers them), with members attached, across a rebalance, dry, and with dead letters written once."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import TopicPartition

from subroute import wire
from subroute.cli import main as cli
from subroute.client import QueueConsumer, QueueMessage
from subroute.kafka.clients import admin_client, reader, watermarks
from subroute.kafka.groups import describe_groups
from tests.integration.client_support import committed, put, queue, take, text
from tests.integration.harness import Env, apply, make_env, read

pytestmark = pytest.mark.kafka

JOBS = """
apps:
  Jobs:
    inputs: [INPUT]
    partitions: PARTITIONS
    properties: {Kind: string, Size: int}
    groups:
      workers: {}
"""


def setup(kafka: object, unique: str, partitions: int = 1) -> Env:
    env = make_env(kafka.bootstrap_servers, unique)  # type: ignore[attr-defined]
    assert apply(env, JOBS.replace("PARTITIONS", str(partitions))) == 0
    return env


def jobs(env: Env, names: list[str], *, partition: int = 0, base: int = 0, timestamp: int = 0) -> None:
    """One record per name: ``bad-*`` ones with Kind=bad, the others Kind=good; Size is the position."""
    for i, name in enumerate(names):
        kind = b"bad" if name.startswith("bad") else b"good"
        headers = [("Kind", kind), ("Size", str(base + i).encode())]
        put(
            env,
            "Jobs",
            "workers",
            [(name, base + i)],
            partition=partition,
            headers=headers,
            timestamp=timestamp,
        )


def subroute(env: Env, *args: str) -> int:
    return cli([*args, *env.common()])


def ends(env: Env, *topics: str) -> dict[tuple[str, int], int]:
    consumer = reader(env.settings, "test-ends")
    try:
        metadata = consumer.list_topics(timeout=10)
        partitions = [
            TopicPartition(t, p)
            for t in topics
            if (info := metadata.topics.get(t)) is not None and info.error is None
            for p in info.partitions
        ]
        return {tp: end for tp, (_, end) in watermarks(consumer, partitions).items()} if partitions else {}
    finally:
        consumer.close()


def drain(*members: QueueConsumer, quiet: float = 3.0) -> list[QueueMessage]:
    """Poll the members in turn, acknowledging everything, until none has delivered anything for ``quiet`` s."""
    got: list[QueueMessage] = []
    last = time.monotonic()
    while time.monotonic() - last < quiet:
        for member in members:
            message = member.poll(0.2)
            if message is not None:
                got.append(message)
                assert member.ack(message)
                last = time.monotonic()
    return got


def wait_for_entry(member: QueueConsumer, timeout: float = 15.0) -> None:
    """Poll (its backlog full, so nothing is delivered) until the member has read the operator's entry."""
    deadline = time.monotonic() + timeout
    while not member.settle_entries and time.monotonic() < deadline:
        assert member.poll(0.2) is None
    assert member.settle_entries, "the member never read the settle entry"


# --- browse -------------------------------------------------------------------------------------------------------


def test_browse_lists_what_is_unconfirmed_oldest_first_without_joining_or_committing(
    kafka, unique, capsys
) -> None:
    env = setup(kafka, unique, partitions=2)
    now = int(time.time() * 1000)
    jobs(env, ["good-0", "bad-1"], partition=0, timestamp=now - 60_000)
    jobs(
        env, ["good-2", "bad-3"], partition=1, base=2, timestamp=now - 120_000
    )  # older, on the other partition
    put(
        env,
        "Jobs",
        "workers",
        [("retried", 9)],
        partition=0,
        headers=[("Kind", b"good"), (wire.DELIVERIES, b"2"), (wire.CANCELS, b"1")],
        timestamp=now - 30_000,
    )
    with queue(env, "Jobs", "workers") as member:  # confirms the oldest one
        first = take(member)
        assert member.ack(first)
        member.commit()
    confirmed = text(first)
    before = {p: committed(env, "Jobs", "workers", p) for p in (0, 1)}
    capsys.readouterr()

    assert subroute(env, "queue", "browse", "Jobs", "workers", "-o", "json") == 0
    document = json.loads(capsys.readouterr().out)
    listed = [r["value"]["text"] for r in document["records"]]
    assert confirmed not in listed and document["unconfirmed"] == 4
    stamps = [r["timestamp"] for r in document["records"]]
    assert stamps == sorted(stamps)  # oldest first, across partitions
    retried = next(r for r in document["records"] if r["value"]["text"] == "retried")
    assert (retried["deliveries"], retried["cancels"], retried["band"]) == (2, 1, 0)
    assert ["Kind", "good"] in retried["headers"] and retried["age_ms"] >= 30_000

    assert subroute(env, "queue", "browse", "Jobs", "workers", "--filter", 'Kind == "bad"', "-o", "json") == 0
    document = json.loads(capsys.readouterr().out)
    assert sorted(r["value"]["text"] for r in document["records"]) == ["bad-1", "bad-3"]
    assert document["matched"] == 2

    assert subroute(env, "queue", "browse", "Jobs", "workers", "--limit", "1", "-o", "json") == 0
    document = json.loads(capsys.readouterr().out)
    assert document["listed"] == 1 and document["records"][0]["timestamp"] == min(stamps)

    assert subroute(env, "queue", "browse", "Jobs", "workers") == 0  # the table for people
    assert "4 unconfirmed" in capsys.readouterr().out

    # read-only: no offset moved, and the group never had a member besides the one that left
    assert {p: committed(env, "Jobs", "workers", p) for p in (0, 1)} == before
    group = wire.consumer_group_id(env.prefix, "Jobs", "workers")
    assert describe_groups(admin_client(env.settings), [group])[group].members == ()


def test_a_bad_filter_is_refused_with_a_caret(kafka, unique, capsys) -> None:
    env = setup(kafka, unique)
    for command in ("browse", "ack"):
        capsys.readouterr()
        assert subroute(env, "queue", command, "Jobs", "workers", "--filter", 'Size == "x"') == 2
        err = capsys.readouterr().err
        assert "Size ==" in err and "^" in err, err
    assert subroute(env, "queue", "browse", "Jobs", "nobody") == 2


# --- ack ----------------------------------------------------------------------------------------------------------


def test_ack_with_a_member_attached_dry_run_first_then_dead_letters_once(kafka, unique, capsys) -> None:
    env = setup(kafka, unique)
    jobs(env, ["good-0", "bad-1", "good-2", "bad-3", "good-4", "bad-5"])
    dlq = wire.dlq_topic(env.prefix, "Jobs")
    watched = (env.topic("Jobs", "workers"), dlq, wire.settle_topic(env.prefix))
    with queue(env, "Jobs", "workers") as member:
        held = take(member)  # attached, holding good-0 (its backlog of 1 is full)
        assert text(held) == "good-0"

        before = ends(env, *watched)
        capsys.readouterr()
        filter_ = ("--filter", 'Kind == "bad"')
        assert subroute(env, "queue", "ack", "Jobs", "workers", *filter_, "--dead-letter", "--dry-run") == 0
        assert "would dead-letter (reason operator) and settle 3 " in capsys.readouterr().out
        assert ends(env, *watched) == before  # nothing written anywhere

        assert subroute(env, "queue", "ack", "Jobs", "workers", *filter_, "--dead-letter") == 0
        assert "settled 3 unconfirmed" in capsys.readouterr().out
        letters = read(env, dlq)
        assert sorted(m.value() for m in letters) == [b"bad-1", b"bad-3", b"bad-5"]
        assert {wire.reason_of(m.headers()) for m in letters} == {wire.OPERATOR}

        wait_for_entry(member)
        assert member.ack(held)
        delivered = [text(m) for m in drain(member)]
        assert delivered == ["good-2", "good-4"]  # none of the settled ones
        assert member.stats.settled == 3
        member.commit()

    assert committed(env, "Jobs", "workers") == 6  # settled ones are confirmed like acknowledged ones
    # Run again: what the first run settled is covered already; no second dead letter.
    assert subroute(env, "queue", "ack", "Jobs", "workers", *filter_, "--dead-letter") == 0
    assert len(read(env, dlq)) == 3
    # A plain Kafka consumer still sees every record: Kafka deletes none.
    assert len(read(env, env.topic("Jobs", "workers"))) == 6


def test_ack_holds_across_a_rebalance_and_for_a_message_given_back(kafka, unique, capsys) -> None:
    env = setup(kafka, unique, partitions=2)
    jobs(env, ["bad-0", "good-1", "bad-2", "good-3"], partition=0)
    jobs(env, ["bad-4", "good-5", "bad-6", "good-7"], partition=1, base=4)
    first = queue(env, "Jobs", "workers")
    second: QueueConsumer | None = None
    try:
        held = take(first)  # delivered before the ack: stays this member's, as AMPS leaves a lease
        assert text(held).startswith("bad")
        assert subroute(env, "queue", "ack", "Jobs", "workers", "--filter", 'Kind == "bad"') == 0
        assert "settled 4 unconfirmed" in capsys.readouterr().out  # the held one too: it is unconfirmed
        wait_for_entry(first)
        assert first.cancel(held)  # given back after the ack: settled, not returned to the queue
        assert first.stats.settled == 1

        second = queue(env, "Jobs", "workers")  # joins: the partitions are shared out again
        delivered = [text(m) for m in drain(first, second, quiet=5.0)]
        assert len(first.assignment) == 1 and len(second.assignment) == 1
        assert sorted(set(delivered)) == ["good-1", "good-3", "good-5", "good-7"]
        assert not [name for name in delivered if name.startswith("bad")]
    finally:
        first.close()
        if second is not None:
            second.close()
    assert {committed(env, "Jobs", "workers", p) for p in (0, 1)} == {4}
    # Nothing returned to the queue, nothing dead-lettered
    assert len(read(env, env.topic("Jobs", "workers"))) == 8
    assert read(env, wire.dlq_topic(env.prefix, "Jobs")) == []


def test_ack_covers_only_what_was_there_and_clear_removes_the_entries(kafka, unique, capsys) -> None:
    env = setup(kafka, unique)
    jobs(env, ["bad-0"])
    assert subroute(env, "queue", "ack", "Jobs", "workers", "--filter", 'Kind == "bad"') == 0
    jobs(env, ["bad-1"], base=1)  # arrives after: a new message, not settled
    with queue(env, "Jobs", "workers") as member:
        assert [text(m) for m in drain(member)] == ["bad-1"]
        member.commit()
    capsys.readouterr()
    assert subroute(env, "queue", "browse", "Jobs", "workers", "-o", "json") == 0
    assert json.loads(capsys.readouterr().out)["unconfirmed"] == 0
    assert subroute(env, "queue", "ack", "Jobs", "workers", "--clear", "--dry-run") == 0
    assert "would remove 1 settle entries" in capsys.readouterr().out
    assert subroute(env, "queue", "ack", "Jobs", "workers", "--clear") == 0
    assert "removed 1 settle entries" in capsys.readouterr().out
    settles = [m for m in read(env, wire.settle_topic(env.prefix)) if m.value() is not None]
    assert len(settles) == 1  # the entry, then its tombstone (compaction removes both in time)
    assert read(env, wire.settle_topic(env.prefix))[-1].value() is None
