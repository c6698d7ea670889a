"""The config store against the real broker: read to the end before ready, tail changes, batch builds, refuse
invalid records while the last good value stays, and the same versions in every reader."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Producer

from subroute.config.codec import SCHEMA_HEADER, encode
from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig
from subroute.config.store import (
    ConfigStore,
    ConfigVersionRefused,
    config_topic_spec,
    history,
    read_config,
)
from subroute.config.writer import ConcurrentChange, ConfigWriter
from subroute.kafka.clients import admin_client, ensure_topics
from subroute.ops.metrics import RouterMetrics
from subroute.ops.settings import Settings
from subroute.wire import Headers

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
    """Records written in one transaction, so the store (a read_committed reader) sees them become readable
    together. A produce batch held by linger.ms was not enough: a stall of the writing process longer than the
    linger sent the first record on its own, and the store built it as a version of its own."""
    producer = Producer(settings.client_config({"transactional.id": f"{settings.topic_prefix}-write-batch"}))
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values:
        key, data, headers = encode(value)
        producer.produce(settings.config_topic, key=key.encode(), value=data, headers=headers)
    producer.commit_transaction(30)
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


def test_a_version_with_a_bad_record_is_refused_and_the_last_good_stays(
    settings: Settings, store_factory: StoreFactory
) -> None:
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
    assert wait_until(lambda: metrics.config_refused._value.get() >= 1, 30)
    config, _ = store.snapshot()
    assert config.version == 2  # the last good version stays in force
    assert dict(config.groups) == {("billing", "vip"): VIP} and dict(config.apps) == {"billing": APP}
    assert [c.version for c in build.configs] == [2]

    # A good group record alone does not make the whole valid: the app record is still unreadable.
    refused = metrics.config_refused._value.get()
    write(settings, GENERAL)
    assert wait_until(lambda: metrics.config_refused._value.get() > refused, 30)
    assert store.snapshot()[0].version == 2
    with pytest.raises(ConfigVersionRefused, match=r"no subroute\.schema header"):
        read_config(settings)
    # A change that replaces every bad record makes a valid version again, decided on the whole config.
    write(settings, APP, VIP)
    assert store.wait_version(9, 30)
    assert set(store.snapshot()[0].groups) == {("billing", "vip"), ("billing", "general")}
    assert read_config(settings).version == 9


def test_a_fresh_reader_refuses_what_a_live_one_refused(
    settings: Settings, store_factory: StoreFactory
) -> None:
    """Validity is decided on the whole config of a version, never on which keys were there when a record
    arrived: a group that arrives before its app is refused by a live reader until the app comes, and a
    reader started later (after compaction, say) decides every version the same way."""
    live = Builds()
    store = store_factory(live)
    assert store.wait_ready(30)
    write(settings, VIP)  # its app is not there yet: refused
    assert store.wait_position(1, 30)
    write(settings, APP)
    assert store.wait_version(2, 30)
    assert dict(store.snapshot()[0].groups) == {("billing", "vip"): VIP}
    versions = history(settings)
    assert 1 not in versions and sorted(versions[2].groups) == [("billing", "vip")]
    assert [c.version for c in live.configs] == [0, 2]


def test_group_that_no_longer_fits_its_app_refuses_the_version_until_fixed(settings: Settings) -> None:
    retyped = AppConfig(name="billing", inputs=("orders",), properties={"CustomerId": "string"})
    fixed = GroupConfig("billing", "vip", (SubscriptionConfig('CustomerId == "0"', 10),))
    write(settings, APP, VIP, retyped, fixed)
    versions = history(settings)
    # 3 is refused: VIP compares CustomerId, now a string, with a number
    assert {v: sorted(c.groups) for v, c in versions.items()} == {
        0: [],
        1: [],
        2: [("billing", "vip")],
        4: [("billing", "vip")],
    }
    assert versions[4].groups[("billing", "vip")] == fixed


def test_history_matches_what_every_reader_sees(settings: Settings) -> None:
    write(settings, APP, VIP, "group/billing/vip", GENERAL)
    versions = history(settings)
    assert sorted(versions) == [0, 1, 2, 3, 4]
    assert versions[4] == read_config(settings)
    assert sorted(versions[2].groups) == [("billing", "vip")] and versions[3].groups == {}


def test_a_change_becomes_visible_whole(settings: Settings) -> None:
    """One change is one transaction, and readers publish a version only where a change ends: a change larger
    than one poll arrives over several, and no reader builds a config with part of it, even one told to
    publish what it has after every poll (``max_batch_delay=0``)."""
    with ConfigWriter(settings) as writer:
        writer.write([encode(APP)])
    build = Builds()
    store = ConfigStore(settings, build, max_batch_delay=0.0).start()
    try:
        assert store.wait_ready(30)
        first = store.snapshot()[0].version
        size = 1_200  # the reader takes at most 500 records per poll
        for round_ in range(3):
            groups = [GroupConfig("billing", f"g{round_}-{i}", order=i) for i in range(size)]
            with ConfigWriter(settings) as writer:
                writer.write([encode(g) for g in groups])
        assert wait_until(lambda: len(store.snapshot()[0].groups) == 3 * size, 60)
    finally:
        store.close()
    published = [len(c.groups) for c in build.configs if c.version > first]
    assert published and {n % size for n in published} == {0}, published


def test_a_killed_change_is_never_seen_and_the_next_writer_clears_it(
    settings: Settings, kafka: object, store_factory: StoreFactory
) -> None:
    if getattr(kafka, "is_tansu", False):
        pytest.skip("Tansu returns aborted transactional records to read_committed readers (docs/brokers.md)")
    with ConfigWriter(settings) as writer:
        writer.write([encode(APP)])
    store = store_factory(Builds())
    assert store.wait_ready(30)
    # A writer that dies mid-change: its records are on the log, its transaction never ends.
    script = f"""
import os, signal
from subroute.config.codec import encode
from subroute.config.model import GroupConfig
from subroute.config.writer import writer_id
from subroute.kafka.clients import producer
from subroute.ops.settings import Settings
settings = Settings(bootstrap_servers={settings.bootstrap_servers!r}, topic_prefix={settings.topic_prefix!r})
p = producer(settings, **{{"transactional.id": writer_id(settings), "linger.ms": 0}})
p.init_transactions(30)
p.begin_transaction()
for i in range(5):
    key, value, headers = encode(GroupConfig("billing", f"half{{i}}"))
    p.produce(settings.config_topic, key=key.encode(), value=value, headers=headers)
assert p.flush(30) == 0
os.kill(os.getpid(), signal.SIGKILL)
"""
    done = subprocess.run([sys.executable, "-c", script], timeout=60, capture_output=True)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    # The next change takes the writer id, which aborts the dead one's transaction at once.
    with ConfigWriter(settings) as writer:
        assert writer.read().values() == {"app/billing": APP}
        writer.write([encode(VIP)])
    assert wait_until(lambda: ("billing", "vip") in store.snapshot()[0].groups, 30)
    assert set(store.snapshot()[0].groups) == {("billing", "vip")}
    assert set(read_config(settings).groups) == {("billing", "vip")}


def test_concurrent_changes_one_commits_the_other_writes_nothing(settings: Settings) -> None:
    with ConfigWriter(settings) as writer:
        writer.write([encode(APP)])
    first = ConfigWriter(settings)
    assert first.read().values() == {"app/billing": APP}
    second = ConfigWriter(settings)  # opens while the first is between its read and its write
    assert second.read().values() == {"app/billing": APP}
    second.write([encode(GENERAL)])
    second.close()
    with pytest.raises(ConcurrentChange, match="another config change started"):
        first.write([encode(VIP)])
    first.close()
    assert set(read_config(settings).groups) == {("billing", "general")}


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_version_applied_before_a_newer_rule_stays_in_force_with_a_warning(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """Written before the CLI refused an undeclared property used as a number (as an older release did): a worker
    started on it routes under it, as before, and warns with the expression and its fix."""
    group = GroupConfig("billing", "low", (SubscriptionConfig("Tier > 3", 1),))
    with ConfigWriter(settings) as writer:  # the writer does not validate: what an older CLI wrote
        writer.write([encode(APP), encode(group)])
    assert read_config(settings).groups[("billing", "low")] == group
    store = ConfigStore(settings, Builds()).start()
    try:
        assert store.wait_ready(30)
        assert store.snapshot()[0].groups[("billing", "low")] == group
    finally:
        store.close()
    [warned] = [r for r in caplog.records if "can never match" in r.getMessage()]
    assert "Tier" in str(warned.fields["problems"]) and "declare its type" in str(warned.fields["problems"])  # type: ignore[attr-defined]
