"""The topics a config needs, as config apply, the worker and the client all ask for them."""

from __future__ import annotations

import argparse

import pytest

from subroute.config.model import AppConfig, Config, GroupConfig
from subroute.kafka.topics import app_topics
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
    specs = {s.name: s for s in app_topics(_config(), "p", lambda inputs: 4, parked_retention_ms=-1)}
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


def test_parked_retention_is_a_setting() -> None:
    args = argparse.Namespace(parked_retention_ms=None)
    assert Settings.from_args(args, {}).parked_retention_ms == -1
    assert (
        Settings.from_args(args, {"SUBROUTE_PARKED_RETENTION_MS": "86400000"}).parked_retention_ms
        == 86_400_000
    )
    assert Settings.from_args(argparse.Namespace(parked_retention_ms="5"), {}).parked_retention_ms == 5
    specs = app_topics(_config(), "p", lambda inputs: 1, parked_retention_ms=5)
    assert dict(next(s for s in specs if s.name == "p.plain.dlq").config)["retention.ms"] == "5"
    for bad in ("abc", "-7"):
        with pytest.raises(SettingsError, match="SUBROUTE_PARKED_RETENTION_MS"):
            Settings.from_args(args, {"SUBROUTE_PARKED_RETENTION_MS": bad})
