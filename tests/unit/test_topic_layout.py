"""The topics a config needs, as config apply, the worker and the client all ask for them."""

from __future__ import annotations

import argparse

import pytest

from subroute.config.model import AppConfig, Config, GroupConfig
from subroute.config.topics import TopicPolicy, app_topics
from subroute.ops.settings import Settings, SettingsError


def _config() -> Config:
    apps = {
        "plain": AppConfig(name="plain", inputs=("orders",)),
        "ranked": AppConfig(name="ranked", inputs=("^ord",), priority="1", partitions=3),
    }
    groups = {
        ("plain", "g"): GroupConfig(app="plain", name="g"),
        ("ranked", "h"): GroupConfig(app="ranked", name="h"),
    }
    return Config(apps=apps, groups=groups)


def test_every_topic_with_bands_sizes_and_retention() -> None:
    specs = {s.name: s for s in app_topics(_config(), "p", lambda inputs: 4)}
    ranked_bands = {"p.ranked.h", *(f"p.ranked.h.p{band}" for band in range(1, 10))}
    assert (
        set(specs)
        == {"p.plain.pending", "p.plain.dlq", "p.plain.g", "p.ranked.pending", "p.ranked.dlq"} | ranked_bands
    )
    assert {specs[n].partitions for n in ranked_bands} == {3}  # the app's own size wins
    assert specs["p.plain.g"].partitions == 4  # else its largest input's
    for parked in ("p.plain.pending", "p.plain.dlq", "p.ranked.dlq"):
        assert dict(specs[parked].config) == {"retention.ms": "-1", "retention.bytes": "-1"}
    assert dict(specs["p.plain.g"].config) == {}  # group topics keep the broker's retention
    assert {spec.replication_factor for spec in specs.values()} == {-1}  # and its replication factor


def test_parked_retention_is_a_setting() -> None:
    args = argparse.Namespace(parked_retention_ms=None)
    assert Settings.from_args(args, {}).parked_retention_ms == -1
    assert (
        Settings.from_args(args, {"SUBROUTE_PARKED_RETENTION_MS": "86400000"}).parked_retention_ms
        == 86_400_000
    )
    assert Settings.from_args(argparse.Namespace(parked_retention_ms="5"), {}).parked_retention_ms == 5
    specs = app_topics(_config(), "p", lambda inputs: 1, TopicPolicy(parked_retention_ms=5))
    assert dict(next(s for s in specs if s.name == "p.plain.dlq").config)["retention.ms"] == "5"
    for bad in ("abc", "-7"):
        with pytest.raises(SettingsError, match="SUBROUTE_PARKED_RETENTION_MS"):
            Settings.from_args(args, {"SUBROUTE_PARKED_RETENTION_MS": bad})


def test_group_retention_and_replication_are_settings_that_reach_every_topic() -> None:
    none = argparse.Namespace()
    assert (
        Settings.from_args(none, {}).group_retention_ms,
        Settings.from_args(none, {}).replication_factor,
    ) == (
        None,
        -1,
    )
    settings = Settings.from_args(
        argparse.Namespace(replication_factor="3"), {"SUBROUTE_GROUP_RETENTION_MS": "3600000"}
    )
    policy = TopicPolicy.of(settings)
    assert policy == TopicPolicy(replication_factor=3, parked_retention_ms=-1, group_retention_ms=3_600_000)
    specs = {s.name: s for s in app_topics(_config(), "p", lambda inputs: 1, policy)}
    assert {s.replication_factor for s in specs.values()} == {3}
    assert dict(specs["p.plain.g"].config) == {"retention.ms": "3600000"}
    assert dict(specs["p.ranked.h.p9"].config) == {"retention.ms": "3600000"}  # band topics too
    assert dict(specs["p.plain.pending"].config)["retention.ms"] == "-1"  # parked topics keep their own
    for variable, bad in (
        ("SUBROUTE_TOPIC_REPLICATION_FACTOR", "0"),
        ("SUBROUTE_GROUP_RETENTION_MS", "soon"),
    ):
        with pytest.raises(SettingsError, match=variable):
            Settings.from_args(none, {variable: bad})
