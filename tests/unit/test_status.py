"""``subroute status``'s document from what Kafka said (router/admin/status.py): pure, no broker."""

from __future__ import annotations

from subroute.admin.status import build
from subroute.cli.status import _table
from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig
from subroute.kafka.groups import Commit, GroupDescription, Member
from subroute.routing.backlog import NO_MATCH, Waiting
from subroute.wire import CAPACITY, NO_CONSUMER, version_metadata


def test_status_document() -> None:
    config = Config(
        apps={"A": AppConfig("A", ("in",))},
        groups={
            ("A", "g"): GroupConfig(
                "A",
                "g",
                (SubscriptionConfig("x", max_unconfirmed=3), SubscriptionConfig("y", max_unconfirmed=9)),
            )
        },
        version=8,
    )
    offsets = {
        ("p.A.g", 0): (0, 4),
        ("p.A.g.p9", 0): (2, 3),  # a band: counts from its log start without a commit
        ("p.A.pending", 0): (1, 6),
        ("p.A.dlq", 0): (0, 2),
        ("in", 0): (0, 100),
        ("in", 1): (0, 50),
    }
    groups = {
        "p.A.g": GroupDescription("p.A.g", "stable", (Member("m1", "c1", "/h", (("p.A.g", 0),)),)),
        "p.router": GroupDescription(
            "p.router",
            "stable",
            (
                Member("w1", "worker-1", "/h1", (("in", 0), ("p.A.pending", 0))),
                Member("w2", "worker-2", "/h2", (("in", 1),)),
            ),
        ),
    }
    commits = {
        "p.A.g": {("p.A.g", 0): Commit(1, None)},
        "p.router": {
            ("in", 0): Commit(100, version_metadata(8)),
            ("p.A.pending", 0): Commit(1, version_metadata(7)),
            ("in", 1): Commit(40, version_metadata(7)),
        },
    }
    waiting = Waiting()
    for reason in (CAPACITY, NO_MATCH, NO_MATCH):
        waiting.add(reason)
    waiting.exact = False
    document = build(config, "p", ["A"], groups, commits, offsets, ["in"], {"A": waiting}, {"A": (1, True)})
    assert document["router"]["input_lag"] == {"in": 10}  # 100/100 and 40/50 routed
    [app] = document["apps"]
    # what was counted, not the topics' offsets (5 on the pending topic, 2 on the dead-letter topic)
    assert (app["waiting"], app["waiting_exact"], app["dead_letters"], app["dead_letters_exact"]) == (
        3,
        False,
        1,
        True,
    )
    assert app["waiting_by_reason"] == {
        "no-consumer": 0,
        "capacity": 1,
        "no-match": 2,
        "reroute": 0,
        "expiring": 0,
    }
    assert not any("waiting" in key for key in app["groups"][0])  # the app's figures are not on group rows
    [group] = app["groups"]
    assert (group["members"], group["present"], group["lag"], group["max_unconfirmed"]) == (1, True, 4, 3)
    assert group["full"] is True and app["presence"] == "required"
    assert group["topics"] == ["p.A.g", "p.A.g.p9"] and group["clients"] == ["c1"]
    one, two = document["router"]["workers"]
    assert (one["config_version"], one["config_versions"], one["current"], one["backlog"]) == (
        8,
        [7, 8],
        True,
        0,
    )
    assert (two["config_version"], two["current"], two["backlog"]) == (7, False, 10)
    assert document["config_version"] == 8 and document["config_topic"] == "p.config"
    assert app["advice"] is None  # the one group is attached: nothing waits for a consumer


def test_records_that_may_wait_for_a_consumer_come_with_what_to_do() -> None:
    config = Config(
        apps={"A": AppConfig("A", ("in",))},
        groups={("A", "g"): GroupConfig("A", "g"), ("A", "h"): GroupConfig("A", "h", order=1)},
        version=3,
    )
    offsets = {("p.A.pending", 0): (0, 5), ("p.A.g", 0): (0, 0), ("p.A.h", 0): (0, 0)}
    attached = GroupDescription("p.A.h", "stable", (Member("m1", "c1", "/h", (("p.A.h", 0),)),))
    waiting = Waiting()
    waiting.add(NO_CONSUMER)
    document = build(config, "p", ["A"], {"p.A.h": attached}, {}, offsets, waiting={"A": waiting})
    [app] = document["apps"]
    assert app["advice"].startswith(
        "records of app A wait for a consumer: no live member in Kafka consumer group(s) p.A.g;"
    )
    # records that matched nothing wait for a config, not a consumer
    [app] = build(config, "p", ["A"], {"p.A.h": attached}, {}, offsets, waiting={"A": Waiting()})["apps"]
    assert app["advice"] is None
    ignored = Config(apps={"A": AppConfig("A", ("in",), presence="ignored")}, groups=config.groups, version=3)
    [app] = build(ignored, "p", ["A"], {}, {}, offsets, waiting={"A": waiting})["apps"]
    assert app["advice"] is None  # presence: ignored never waits for a consumer


def test_the_table_shows_the_split_once_per_app_and_floors_as_floors() -> None:
    config = Config(
        apps={"A": AppConfig("A", ("in",))},
        groups={("A", "g"): GroupConfig("A", "g"), ("A", "h"): GroupConfig("A", "h", order=1)},
        version=2,
    )
    waiting = Waiting()
    for reason in (NO_MATCH, NO_MATCH, CAPACITY):
        waiting.add(reason)
    offsets = {("p.A.g", 0): (0, 4), ("p.A.h", 0): (0, 0)}
    exact = build(config, "p", ["A"], {}, {}, offsets, waiting={"A": waiting}, dead_letters={"A": (2, True)})
    lines = _table(exact).splitlines()
    assert lines[2] == (
        "app  waiting  no-consumer  capacity  no-match  reroute  expiring (<5m)  dead letters"
    )
    assert lines[3].split() == ["A", "3", "0", "1", "2", "0", "0", "2"]
    groups = [line.split() for line in lines if line.startswith("A ")][1:]
    assert groups == [["A", "g", "0", "(dead)", "4", "-"], ["A", "h", "0", "(dead)", "0", "-"]]
    assert "≥" not in _table(exact)

    waiting.exact = False
    floor = build(config, "p", ["A"], {}, {}, offsets, waiting={"A": waiting}, dead_letters={"A": (2, True)})
    table = _table(floor)
    assert table.splitlines()[3].split() == ["A", "≥3", "≥0", "≥1", "≥2", "≥0", "≥0", "2"]
    assert "≥N: the read stopped at --max-read records of the topic; at least N" in table


def test_apps_reading_avro_through_the_schema_registry_are_named_with_what_a_registry_outage_does() -> None:
    framed = AppConfig("F", ("in",), properties={"P": "int"}, format="avro", paths={"P": "/p"})
    plain = AppConfig(
        "S", ("in",), properties={"P": "int"}, format="avro", paths={"P": "/p"}, schema='"long"'
    )
    config = Config(apps={"F": framed, "S": plain, "A": AppConfig("A", ("in",))}, groups={}, version=1)
    document = build(config, "p", ["A", "F", "S"], {}, {}, {})
    rows = {app["app"]: (app["body_format"], app["needs_schema_registry"]) for app in document["apps"]}
    assert rows == {"A": ("none", False), "F": ("avro", True), "S": ("avro", False)}
    notes = [line for line in _table(document).splitlines() if line.startswith("note:")]
    assert notes == [
        "note: F read Avro in Confluent's wire format: while a worker cannot read the schema registry their input "
        "records wait (counted above as not routed yet), the worker is not ready and "
        "subroute_schema_registry_unavailable is 1 (docs/runbook.md#subrouteschemaregistryunavailable)"
    ]
