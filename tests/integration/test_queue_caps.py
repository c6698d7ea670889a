"""Seed 001 (AMPS MaxPerSubscriptionBacklog) on the real broker: a group's ``max_leased_per_member`` caps what
one member holds leased, whatever its ``max_backlog`` asks; the smaller of the two wins."""

from __future__ import annotations

import pytest

from subroute.config.store import ConfigStore, read_config, read_group
from tests.integration.client_support import put, queue, take, text
from tests.integration.harness import apply, make_env

pytestmark = pytest.mark.kafka

CAPPED = """
apps:
  Jobs:
    inputs: [INPUT]
    groups:
      workers: {max_leased_per_member: 2}
"""


def test_the_groups_cap_wins_over_a_larger_backlog(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, CAPPED) == 0
    put(env, "Jobs", "workers", [(f"w{i}", i) for i in range(4)])
    group = read_group(env.settings, "Jobs", "workers")
    with queue(env, "Jobs", "workers", max_backlog=10, group_config=group) as q:
        assert q.backlog_limit == 2
        first, second = take(q), take(q)
        assert [text(first), text(second)] == ["w0", "w1"]
        assert q.poll(1.0) is None  # two held: the group allows no third, whatever the member asked
        assert q.buffered >= 1
        q.ack(first)
        assert text(take(q)) == "w2"
        assert q.outstanding == 2


def test_a_smaller_backlog_wins_over_the_groups_cap(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, CAPPED) == 0
    put(env, "Jobs", "workers", [("w0", 0), ("w1", 1)])
    with queue(env, "Jobs", "workers", group_config=read_group(env.settings, "Jobs", "workers")) as q:
        assert q.backlog_limit == 1  # AMPS's default max_backlog of 1
        take(q)
        assert q.poll(1.0) is None


def test_a_cap_applied_later_reaches_a_running_member(kafka, unique) -> None:
    """With ``current_config``, the cap in force applies: lowered under a member holding more, it takes nothing
    back and delivers nothing new until the member is under it (AMPS's replace of max_backlog)."""
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, CAPPED.replace("{max_leased_per_member: 2}", "{}")) == 0
    put(env, "Jobs", "workers", [(f"w{i}", i) for i in range(5)])
    with ConfigStore(env.settings, build=lambda config: None) as store:
        assert store.wait_version(read_config(env.settings).version, timeout=30)
        with queue(env, "Jobs", "workers", max_backlog=3, current_config=lambda: store.snapshot()[0]) as q:
            held = [take(q), take(q), take(q)]
            assert q.backlog_limit == 3
            assert apply(env, CAPPED.replace("2}", "1}")) == 0
            assert store.wait_version(read_config(env.settings).version, timeout=30)
            assert q.backlog_limit == 1
            assert all(q.ack(m) for m in held[:2])  # one still held: at the cap of 1
            assert q.poll(1.0) is None
            assert q.ack(held[2])
            assert text(take(q)) == "w3"
