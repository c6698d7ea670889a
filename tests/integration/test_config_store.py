"""The config store against the real broker: read to the end before ready, tail changes, batch builds, refuse
invalid records while the last good value stays, and the same versions in every reader."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Producer

from router.config.codec import SCHEMA_HEADER, Headers, encode
from router.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig
from router.config.store import ConfigStore, config_topic_spec, history, read_config
from router.kafka.io import admin_client, ensure_topics
from router.ops.metrics import RouterMetrics
from router.ops.settings import Settings

pytestmark = pytest.mark.kafka

APP = AppConfig(name="billing", inputs=("orders",), properties={"CustomerId": "int"})
VIP = GroupConfig("billing", "vip", (SubscriptionConfig("CustomerId == 0", 10),))
GENERAL = GroupConfig("billing", "general", (SubscriptionConfig("CustomerId >= 0", 5),), order=1)


class Builds:
    """A ``build`` that records what it was called with, and in which thread."""

    def __init__(self) -> None:
        self.configs: list[Config] = []
        self.threads: set[str] = set()

    def __call__(self, config: Config) -> str:
        self.configs.append(config)
        self.threads.add(threading.current_thread().name)
        return f"plan-{config.version}"


@pytest.fixture
def settings(kafka: object, unique: str) -> Settings:
    return Settings(bootstrap_servers=kafka.bootstrap_servers, topic_prefix=unique)  # type: ignore[attr-defined]


def write_batch(settings: Settings, values: list[GroupConfig]) -> None:
    """Records sent as one produce batch, so the store sees them arrive together."""
    producer = Producer(settings.client_config({"linger.ms": 200}))
    for value in values:
        key, data, headers = encode(value)
        producer.produce(settings.config_topic, key=key.encode(), value=data, headers=headers)
    assert producer.flush(10) == 0


def write(
    settings: Settings,
    *records: AppConfig | GroupConfig | str | tuple[str, bytes | None, Headers],
) -> None:
    """Config records in order: a model value, a key (tombstone), or a raw (key, value, headers)."""
    ensure_topics(admin_client(settings), [config_topic_spec(settings)])
    producer = Producer(settings.client_config({"linger.ms": 0}))
    for record in records:
        if isinstance(record, str):
            producer.produce(settings.config_topic, key=record.encode(), value=None)
        elif isinstance(record, tuple):
            key, value, headers = record
            producer.produce(settings.config_topic, key=key.encode(), value=value, headers=headers)
        else:
            key, value, headers = encode(record)
            producer.produce(settings.config_topic, key=key.encode(), value=value, headers=headers)
    assert producer.flush(10) == 0


StoreFactory = Callable[..., ConfigStore[str]]


@pytest.fixture
def store_factory(settings: Settings) -> Iterator[StoreFactory]:
    """Started stores, closed after the test."""
    stores: list[ConfigStore[str]] = []

    def make(build: Builds, metrics: RouterMetrics | None = None) -> ConfigStore[str]:
        store = ConfigStore(settings, build, metrics).start()
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


def test_read_config_on_a_missing_topic_is_empty(settings: Settings) -> None:
    assert read_config(settings) == Config()


def test_store_reads_the_backlog_before_it_is_ready_and_builds_once(
    settings: Settings, store_factory: type
) -> None:
    write(settings, APP, VIP, GENERAL, "group/billing/general", GENERAL)
    build = Builds()
    store = store_factory(build)
    assert store.wait_ready(30)
    config, plan = store.snapshot()
    assert config.version == 5 and plan == "plan-5"
    assert dict(config.apps) == {"billing": APP}
    assert dict(config.groups) == {("billing", "vip"): VIP, ("billing", "general"): GENERAL}
    # One build for the whole backlog: never a partial config first, and in the store's thread.
    assert [c.version for c in build.configs] == [5]
    assert build.threads == {"subroute-config-store"}


def test_store_on_an_empty_config_topic_is_ready_with_version_0(
    settings: Settings, store_factory: type
) -> None:
    store = store_factory(Builds())  # the store creates the missing topic
    assert store.wait_ready(30)
    assert store.snapshot()[0] == Config()
    assert settings.config_topic in admin_client(settings).list_topics(timeout=10).topics


def test_store_tails_changes_and_bumps_the_version(settings: Settings, store_factory: StoreFactory) -> None:
    write(settings, APP)
    build = Builds()
    store = store_factory(build)
    assert store.wait_ready(30) and store.snapshot()[0].version == 1

    write(settings, VIP)
    assert store.wait_version(2, 30)
    config, plan = store.snapshot()
    assert (config.version, plan, dict(config.groups)) == (2, "plan-2", {("billing", "vip"): VIP})

    write(settings, "group/billing/vip", "app/billing")
    assert store.wait_version(4, 30)
    config, _ = store.snapshot()
    assert (config.version, dict(config.apps), dict(config.groups)) == (4, {}, {})
    # Records written together are built together, at most once per record and never for a stale state.
    versions = [c.version for c in build.configs]
    assert versions == sorted(versions) and versions[0] == 1 and versions[-1] == 4 and len(versions) <= 4


def test_records_that_arrive_together_are_built_once(settings: Settings, store_factory: StoreFactory) -> None:
    write(settings, APP)
    build = Builds()
    store = store_factory(build)
    assert store.wait_ready(30)
    write_batch(settings, [GroupConfig("billing", f"g{i}", order=i) for i in range(50)])
    assert store.wait_version(51, 30)
    assert len(store.snapshot()[0].groups) == 50
    assert [c.version for c in build.configs] == [1, 51]


def test_refused_record_keeps_the_last_good_config(settings: Settings, store_factory: StoreFactory) -> None:
    write(settings, APP, VIP)
    metrics = RouterMetrics()
    build = Builds()
    store = store_factory(build, metrics)
    assert store.wait_ready(30)

    bad_expression = GroupConfig("billing", "vip", (SubscriptionConfig("CustomerId ==", 10),))
    key, value, headers = encode(AppConfig(name="billing", inputs=("orders",)))
    write(
        settings,
        bad_expression,  # does not compile
        (key, b"\x01\x02garbage", headers),  # undecodable
        (key, value, [(SCHEMA_HEADER, b"subroute.AppConfig/99")]),  # from a newer writer
        (key, value, []),  # no schema header
    )
    assert store.wait_position(6, 30)
    config, _ = store.snapshot()
    assert config.version == 2  # nothing changed, so nothing was rebuilt
    assert dict(config.groups) == {("billing", "vip"): VIP} and dict(config.apps) == {"billing": APP}
    assert metrics.config_refused._value.get() == 4
    assert [c.version for c in build.configs] == [2]

    # A good record after the refused ones is taken, with a version that counts every record read.
    write(settings, GENERAL)
    assert store.wait_version(7, 30)
    assert set(store.snapshot()[0].groups) == {("billing", "vip"), ("billing", "general")}


def test_group_that_no_longer_fits_its_app_is_left_out_until_fixed(settings: Settings) -> None:
    retyped = AppConfig(name="billing", inputs=("orders",), properties={"CustomerId": "string"})
    fixed = GroupConfig("billing", "vip", (SubscriptionConfig('CustomerId == "0"', 10),))
    write(settings, APP, VIP, retyped, fixed)
    versions = history(settings)
    assert [sorted(c.groups) for c in versions] == [
        [],
        [],
        [("billing", "vip")],
        [],  # VIP compares CustomerId, now a string, with a number
        [("billing", "vip")],
    ]
    assert versions[4].groups[("billing", "vip")] == fixed


def test_history_matches_what_every_reader_sees(settings: Settings) -> None:
    write(settings, APP, VIP, "group/billing/vip", GENERAL)
    versions = history(settings)
    assert [c.version for c in versions] == [0, 1, 2, 3, 4]
    assert versions[-1] == read_config(settings)
    assert sorted(versions[2].groups) == [("billing", "vip")] and versions[3].groups == {}
