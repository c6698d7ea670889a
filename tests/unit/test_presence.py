"""Presence from consumer-group descriptions, without a broker: an admin client stand-in answers
``describe_consumer_groups`` as Apache Kafka and Tansu do (docs/brokers.md)."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field

from confluent_kafka import ConsumerGroupState

from subroute.config.model import AppConfig, Config, GroupConfig
from subroute.ops.settings import Settings
from subroute.routing.capacity import groups_needing_presence
from subroute.worker.capacity import CapacityMonitor, measure_presence


@dataclass
class Description:
    state: ConsumerGroupState
    members: list[object] = field(default_factory=list)


class Admin:
    """Answers each group id with a Description, or fails it with an exception."""

    def __init__(self, answers: dict[str, Description | Exception]) -> None:
        self.answers = answers

    def describe_consumer_groups(self, ids: list[str], **_: object) -> dict[str, Future[Description]]:
        futures: dict[str, Future[Description]] = {}
        for group_id in ids:
            future: Future[Description] = Future()
            answer = self.answers[group_id]
            if isinstance(answer, Exception):
                future.set_exception(answer)
            else:
                future.set_result(answer)
            futures[group_id] = future
        return futures


STABLE, EMPTY, DEAD = ConsumerGroupState.STABLE, ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD
LIVE = Description(STABLE, [object()])


def test_members_present_empty_absent_and_a_live_group_without_members_unreported() -> None:
    admin = Admin(
        {
            "p.a.live": LIVE,
            "p.a.empty": Description(EMPTY),
            "p.a.dead": Description(DEAD),
            "p.a.gone": RuntimeError("KafkaError{code=GROUP_ID_NOT_FOUND}"),
            "p.a.slow": RuntimeError("KafkaError{code=_TIMED_OUT}"),
            "p.a.tansu": Description(STABLE),
            "p.a.leaving": Description(ConsumerGroupState.PREPARING_REBALANCING),
        }
    )
    groups = [("a", g) for g in ("live", "empty", "dead", "gone", "slow", "tansu", "leaving")]
    found = measure_presence(admin, "p", groups)  # type: ignore[arg-type]
    assert found == {
        ("a", "live"): True,
        ("a", "empty"): False,
        ("a", "dead"): False,
        ("a", "gone"): False,
        ("a", "tansu"): None,  # STABLE with nobody: the broker does not say
        ("a", "leaving"): False,  # Apache Kafka, as the last member leaves: really nobody
    }  # "slow" failed: left out, the caller keeps what it knew


def monitor(answers: dict[str, Description | Exception]) -> tuple[CapacityMonitor, Admin]:
    config = Config(
        1,
        {"a": AppConfig("a", ("t",)), "b": AppConfig("b", ("t",), presence="ignored")},
        {(a, g): GroupConfig(a, g) for a, g in (("a", "x"), ("a", "y"), ("b", "z"))},
    )
    watcher = CapacityMonitor(Settings(topic_prefix="p"), interval=3.0)
    watcher.watch(config)
    return watcher, Admin(answers)


def test_only_presence_required_apps_are_measured() -> None:
    config = Config(1, {"b": AppConfig("b", ("t",), presence="ignored")}, {("b", "z"): GroupConfig("b", "z")})
    assert groups_needing_presence(config) == []


def test_absent_groups_are_published_and_a_failed_refresh_keeps_what_was_known() -> None:
    watcher, admin = monitor({"p.a.x": LIVE, "p.a.y": Description(EMPTY)})
    watcher._refresh_presence(admin)  # type: ignore[arg-type]
    assert watcher.measurement().absent == {("a", "y")}
    admin.answers = {"p.a.x": RuntimeError("timed out"), "p.a.y": RuntimeError("timed out")}
    watcher._refresh_presence(admin)  # type: ignore[arg-type]
    assert watcher.measurement().absent == {("a", "y")}
    admin.answers = {"p.a.x": Description(EMPTY), "p.a.y": LIVE}
    watcher._refresh_presence(admin)  # type: ignore[arg-type]
    assert watcher.measurement().absent == {("a", "x")}


def test_membership_not_reported_turns_presence_off_with_one_warning(caplog) -> None:
    watcher, admin = monitor({"p.a.x": Description(EMPTY), "p.a.y": Description(EMPTY)})
    watcher._refresh_presence(admin)  # type: ignore[arg-type]
    assert watcher.measurement().absent == {("a", "x"), ("a", "y")}  # before anyone joined: nobody there
    admin.answers["p.a.x"] = Description(STABLE)  # a consumer joined, and the broker lists no member
    watcher._refresh_presence(admin)  # type: ignore[arg-type]
    assert watcher.membership_unreported and watcher.measurement().absent == frozenset()  # at once
    watcher._refresh_presence(admin)  # type: ignore[arg-type]
    assert watcher.measurement().absent == frozenset()
    assert sum("presence cannot be measured" in r.getMessage() for r in caplog.records) == 1


def test_presence_refresh_zero_counts_every_group_present() -> None:
    watcher = CapacityMonitor(Settings(topic_prefix="p"), interval=3.0, presence_interval=0)
    watcher.watch(Config(1, {"a": AppConfig("a", ("t",))}, {("a", "x"): GroupConfig("a", "x")}))
    watcher._refresh_presence(Admin({}))  # type: ignore[arg-type]
    assert watcher.measurement().absent == frozenset()
