"""The config topic read into ``Config`` values: one-shot (``read_config``, ``history``) or tailed (``ConfigStore``).

Readers take all partitions by assignment, without a consumer group, from the beginning. "Caught up" is decided
from what fetches report (end-of-partition events, or the high watermark cached from the last fetch), never from
ListOffsets alone, which some brokers answer short. The last value per key wins, a tombstone deletes, and an
invalid record is refused: the key keeps its last good value, the error is logged and counted.

``Config.version`` is the number of config records read so far (the sum over partitions of the next offset), so
every reader that has read the same records names the same configuration by the same number.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Generic, TypeVar, cast

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition

from router.config.codec import ConfigDecodeError, ConfigValue, app_key, decode, to_record
from router.config.model import AppConfig, Config, GroupConfig
from router.config.validation import check_limits, validate_app, validate_group
from router.kafka import io as kafka_io
from router.ops.metrics import RouterMetrics
from router.ops.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")

# Compacted, and one partition: the config topic is then one total order, and its offset is the version.
CONFIG_TOPIC_CONFIG = {"cleanup.policy": "compact"}


def config_topic_spec(settings: Settings) -> kafka_io.TopicSpec:
    return kafka_io.TopicSpec(settings.config_topic, 1, CONFIG_TOPIC_CONFIG)


class ConfigTopicInvalid(RuntimeError):
    """The config topic exists but is not one compacted partition: no worker may route from it."""


def check_config_topic(topic: str, partitions: int, config: Mapping[str, str]) -> None:
    """Refuse a config topic that is not one compacted partition, saying what it is and what it must be.

    One partition makes the topic one total order whose offsets are the config versions; compaction keeps each
    key's last value forever, where deletion by retention would silently drop apps from a restarted worker.
    """
    policies = {p.strip() for p in config.get("cleanup.policy", "").split(",")}
    faults = []
    if partitions != 1:
        faults.append(f"{partitions} partitions")
    if "compact" not in policies:
        faults.append(f"cleanup.policy={config.get('cleanup.policy', 'unknown')}")
    if faults:
        raise ConfigTopicInvalid(
            f"config topic {topic!r} has {' and '.join(faults)}: it must have exactly one partition and "
            "cleanup.policy=compact (its offsets are the config versions; compaction keeps every key's last "
            "value). Recreate it that way, or point --config-topic at one that is."
        )


class ConfigState:
    """Applies config records in topic order and yields the ``Config`` they add up to."""

    def __init__(self, metrics: RouterMetrics | None = None) -> None:
        self._values: dict[str, ConfigValue] = {}
        self._next_offsets: dict[int, int] = {}
        self._metrics = metrics
        # (app key, group key) -> (app, group, valid) for the objects last checked: skips recompiling unchanged groups.
        self._group_checks: dict[str, tuple[AppConfig, GroupConfig, bool]] = {}

    @property
    def version(self) -> int:
        return sum(self._next_offsets.values())

    def next_offset(self, partition: int) -> int | None:
        return self._next_offsets.get(partition)

    def apply(self, message: Message) -> bool:
        """Apply one record; True when the state changed. Refused records leave the state as it was."""
        partition, offset = message.partition() or 0, message.offset() or 0
        self._next_offsets[partition] = max(self._next_offsets.get(partition, 0), offset + 1)
        try:
            key, value = decode(message.key(), message.value(), message.headers())
        except ConfigDecodeError as exc:
            self._refuse(partition, offset, str(exc))
            return False
        text_key = str(key)
        if value is None:
            return self._values.pop(text_key, None) is not None
        app: ConfigValue | None = None
        if isinstance(value, AppConfig):
            errors = validate_app(value)
        else:
            app = self._values.get(app_key(value.app))
            errors = validate_group(value, app if isinstance(app, AppConfig) else None)
        if not errors:
            # Limits that span records (subscriptions per app and in total) hold for the state after it.
            errors = check_limits([*(v for k, v in self._values.items() if k != text_key), value])
        if errors:
            self._refuse(partition, offset, "\n".join(str(e) for e in errors))
            return False
        old = self._values.get(text_key)
        if old is not None and to_record(old) == to_record(value):
            return False
        self._values[text_key] = value
        if isinstance(value, GroupConfig) and isinstance(app, AppConfig):
            # Just checked against its app: config() need not compile its expressions a second time.
            self._group_checks[text_key] = (app, value, True)
        return True

    def _refuse(self, partition: int, offset: int, reason: str) -> None:
        log.error(
            "config record refused; the last good value of its key stays in force",
            extra={"partition": partition, "offset": offset, "reason": reason},
        )
        if self._metrics is not None:
            self._metrics.config_refused.inc()

    def config(self) -> Config:
        """The current state. Groups whose app is missing, or whose expressions no longer compile under their
        app's current properties, are left out (and logged) until a record fixes them."""
        apps = {v.name: v for v in self._values.values() if isinstance(v, AppConfig)}
        groups: dict[tuple[str, str], GroupConfig] = {}
        checks: dict[str, tuple[AppConfig, GroupConfig, bool]] = {}
        for key, value in self._values.items():
            if not isinstance(value, GroupConfig):
                continue
            app = apps.get(value.app)
            if app is None:
                continue  # tombstoned app, or a hand-written group record without one
            previous = self._group_checks.get(key)
            if previous is not None and previous[0] is app and previous[1] is value:
                valid = previous[2]
            else:
                errors = validate_group(value, app)
                valid = not errors
                if errors:
                    log.warning(
                        "config group left out: it does not fit its app",
                        extra={"key": key, "reason": "\n".join(str(e) for e in errors)},
                    )
            checks[key] = (app, value, valid)
            if valid:
                groups[(value.app, value.name)] = value
        self._group_checks = checks
        return Config(self.version, MappingProxyType(apps), MappingProxyType(groups))


class Pacer:
    """Lets long work in a background thread give way to routing: called between steps of the work, it sleeps
    ``rest`` seconds once ``work`` seconds have passed since it last slept.

    The routing thread takes the GIL briefly and very often while it waits on Kafka: confluent-kafka's producer
    takes it once per delivered record during ``flush()``. Beside a thread that keeps the GIL busy, each take
    waits its turn, and a 2,000-record flush took 60-500 ms instead of 20-40 (a config change stopped routing
    that long). While this thread sleeps, routing has the interpreter to itself. A shorter switch interval
    (``sys.setswitchinterval``) did not help; see docs/performance.md, "Config swap".
    """

    def __init__(self, work: float = 0.001, rest: float = 0.001) -> None:
        self.work = work
        self.rest = rest
        self._since = time.perf_counter()

    def __call__(self) -> None:
        if time.perf_counter() - self._since >= self.work:
            time.sleep(self.rest)
            self._since = time.perf_counter()


ClientConfig = dict[str, str | int | float | bool]


def _client_config(settings: Settings, mandatory: ClientConfig) -> ClientConfig:
    """Pass-through properties (TLS, SASL...) plus the settings this reader cannot work without."""
    # Tailing: see a change within ~0.1 s unless the operator tunes it.
    return cast(ClientConfig, settings.client_config(mandatory, defaults={"fetch.wait.max.ms": 100}))


class _TopicReader:
    """All partitions of the config topic by assignment, with per-partition "at the end" tracking."""

    def __init__(self, settings: Settings) -> None:
        self.topic = settings.config_topic
        self._consumer = Consumer(
            _client_config(
                settings,
                {
                    # Required by the client, never joined: partitions are assigned, offsets never committed.
                    "group.id": f"{settings.topic_prefix}.config-reader",
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "enable.partition.eof": True,
                    "auto.offset.reset": "earliest",
                },
            )
        )
        self._at_end: dict[int, bool] = {}

    @property
    def assigned(self) -> bool:
        return bool(self._at_end)

    def assign(self, timeout: float = 10.0) -> bool:
        """Assign every partition from the beginning; False when the topic does not exist (yet)."""
        metadata = self._consumer.list_topics(self.topic, timeout=timeout)
        info = metadata.topics.get(self.topic)
        if info is None or info.error is not None or not info.partitions:
            return False
        partitions = sorted(info.partitions)
        self._consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in partitions])
        self._at_end = dict.fromkeys(partitions, False)
        return True

    def poll(self, timeout: float) -> list[Message]:
        """The next records (not applied); updates which partitions are at their end."""
        records: list[Message] = []
        for message in self._consumer.consume(500, timeout=timeout):
            error = message.error()
            if error is None:
                self._at_end[message.partition() or 0] = False
                records.append(message)
            elif error.code() == KafkaError._PARTITION_EOF:
                self._at_end[message.partition() or 0] = True
            elif error.fatal():
                raise KafkaException(error)
            else:  # transient (broker restart, leader change): the client retries by itself
                log.warning("config topic read error", extra={"error": str(error)})
        return records

    def caught_up(self, state: ConfigState) -> bool:
        """Every partition has reached the high watermark reported by its last fetch."""
        for partition, at_end in self._at_end.items():
            if at_end:
                continue
            _low, high = self._consumer.get_watermark_offsets(
                TopicPartition(self.topic, partition), cached=True
            )
            consumed = state.next_offset(partition) or 0
            if high < 0 or consumed < high:
                return False
            self._at_end[partition] = True
        return self.assigned

    def close(self) -> None:
        self._consumer.close()


def _read(
    settings: Settings, timeout: float, on_record: Callable[[ConfigState], None] | None = None
) -> Config:
    state = ConfigState()
    reader = _TopicReader(settings)
    try:
        if not reader.assign():
            return state.config()  # no config topic yet: nothing configured
        deadline = time.monotonic() + timeout
        while not reader.caught_up(state):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"could not read the config topic {reader.topic} to its end within {timeout:g} s "
                    f"({state.version} records read): is the broker at {settings.bootstrap_servers} healthy?"
                )
            for message in reader.poll(0.5):
                state.apply(message)
                if on_record is not None:
                    on_record(state)
        return state.config()
    finally:
        reader.close()


def read_config(settings: Settings, *, timeout: float = 30.0) -> Config:
    """The whole config topic read once to its end (an empty ``Config`` when the topic does not exist)."""
    return _read(settings, timeout)


class AppNotConfigured(LookupError):
    """No app of that name in the config in force."""


def read_app(settings: Settings, app: str, *, timeout: float = 30.0) -> AppConfig:
    """One app as configured now (the config topic read to its end): what the consumer client is given."""
    found = read_config(settings, timeout=timeout).apps.get(app)
    if found is None:
        raise AppNotConfigured(f"app {app!r} is not configured under topic prefix {settings.topic_prefix!r}")
    return found


def history(settings: Settings, *, timeout: float = 30.0) -> list[Config]:
    """The ``Config`` at every version, oldest first (``result[0]`` is the empty version 0).

    On an uncompacted single-partition config topic ``result[v].version == v``; compaction leaves gaps.
    """
    configs = [Config()]
    _read(settings, timeout, lambda state: configs.append(state.config()))
    return configs


class ConfigStore(Generic[T]):
    """Reads the config topic to its end, then tails it, in a background thread.

    Every change calls ``build(config)`` in the store thread (the plan is compiled off the hot path), then
    publishes ``(config, built)`` as one reference. Records that arrive together are built once, for the
    state after the last of them. Use ``start()`` (or ``with``), then ``wait_ready`` and ``snapshot``.
    """

    def __init__(
        self,
        settings: Settings,
        build: Callable[[Config], T],
        metrics: RouterMetrics | None = None,
        *,
        max_batch_delay: float = 1.0,
    ) -> None:
        self._settings = settings
        self._build = build
        self._metrics = metrics
        self._max_batch_delay = max_batch_delay
        self._condition = threading.Condition()
        self._snapshot: tuple[Config, T] | None = None
        self._position = 0
        self._error: BaseException | None = None
        self._stopped_by: BaseException | None = None  # what ended the store thread, if anything did
        self._heartbeat = time.monotonic()  # the store thread's last poll of the config topic
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="subroute-config-store", daemon=True)

    # --- for the worker ---------------------------------------------------------------------------------------

    def start(self) -> ConfigStore[T]:
        self._thread.start()
        return self

    @property
    def ready(self) -> bool:
        """True once the config topic has been read to its end and built."""
        with self._condition:
            return self._snapshot is not None

    def snapshot(self) -> tuple[Config, T]:
        """The config in force and what ``build`` made of it; one reference, so never half-updated."""
        current = self._snapshot
        if current is None:
            raise RuntimeError("the config store is not ready: wait_ready() first")
        return current

    def wait_ready(self, timeout: float | None = None) -> bool:
        with self._condition:
            return self._condition.wait_for(lambda: self._snapshot is not None, timeout)

    def wait_version(self, version: int, timeout: float | None = None) -> bool:
        """Wait until a config of at least ``version`` is published."""
        with self._condition:
            return self._condition.wait_for(
                lambda: self._snapshot is not None and self._snapshot[0].version >= version, timeout
            )

    @property
    def position(self) -> int:
        """Config records read so far, refused ones included (the published version may be lower)."""
        with self._condition:
            return self._position

    def wait_position(self, position: int, timeout: float | None = None) -> bool:
        with self._condition:
            return self._condition.wait_for(lambda: self._position >= position, timeout)

    @property
    def error(self) -> BaseException | None:
        """The last build failure, or the error that stopped the store thread."""
        return self._error

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def following(self, within: float = 60.0) -> bool:
        """True while the store thread runs and has polled the config topic in the last ``within`` seconds.

        False once the thread died (the config in force no longer follows the topic) or while it hangs; the
        worker's liveness and readiness say so, instead of routing on a frozen config unnoticed.
        """
        if self._stopped_by is not None or (self._thread.ident is not None and not self._thread.is_alive()):
            return False
        return time.monotonic() - self._heartbeat < within

    def close(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def __enter__(self) -> ConfigStore[T]:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the store thread -------------------------------------------------------------------------------------

    def _run(self) -> None:
        state = ConfigState(self._metrics)
        reader: _TopicReader | None = None
        try:
            reader = _TopicReader(self._settings)
            self._wait_for_topic(reader)
            pending = True  # a config must be published once the topic is read to its end, even an empty one
            dirty_since = time.monotonic()
            while not self._stop.is_set():
                records = reader.poll(0.2)
                self._heartbeat = time.monotonic()
                # Records that arrive together are validated one after the other: once routing runs, give way
                # to it between them.
                pause = Pacer() if self._snapshot is not None else None
                for message in records:
                    if state.apply(message) and not pending:
                        pending, dirty_since = True, time.monotonic()
                    if pause is not None:
                        pause()
                with self._condition:
                    self._position = state.version
                    self._condition.notify_all()
                if not pending:
                    continue
                caught_up = reader.caught_up(state)
                if self._snapshot is None and not caught_up:
                    continue  # never publish a partial first config
                # Batch what arrives together, but do not hold a change back longer than max_batch_delay.
                if caught_up or not records or time.monotonic() - dirty_since > self._max_batch_delay:
                    self._publish(state)
                    pending = False
        except BaseException as exc:  # the worker must see that its config no longer follows the topic
            log.exception(
                "config store stopped: %s: %s",
                type(exc).__name__,
                exc,
                extra={"fields": {"error": repr(exc)}},
            )
            self._error = self._stopped_by = exc
        finally:
            if reader is not None:
                reader.close()

    def _wait_for_topic(self, reader: _TopicReader) -> None:
        """Create the config topic if it is missing (a worker may start before the first apply), then assign."""
        admin = kafka_io.admin_client(self._settings)
        while not self._stop.is_set():
            self._heartbeat = time.monotonic()
            try:
                kafka_io.ensure_topics(admin, [config_topic_spec(self._settings)])
                check_config_topic(
                    self._settings.config_topic, *kafka_io.topic_settings(admin, self._settings.config_topic)
                )
                if reader.assign():
                    return
            except (KafkaException, TimeoutError) as exc:
                log.warning("config topic not available yet, retrying", extra={"error": str(exc)})
            self._stop.wait(1.0)

    def _publish(self, state: ConfigState) -> None:
        config = state.config()
        try:
            built = self._build(config)
        except Exception as exc:  # keep the last good plan; a later change may build
            log.exception(
                "building the plan failed; the previous config stays in force",
                extra={"version": config.version},
            )
            self._error = exc
            return
        with self._condition:
            self._snapshot = (config, built)
            self._condition.notify_all()
        log.info("config version in force", extra={"version": config.version})
