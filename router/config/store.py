"""The config topic read into ``Config`` values: one-shot (``read_config``, ``history``) or tailed (``ConfigStore``).

Readers take all partitions by assignment, without a consumer group, from the beginning. "Caught up" is decided
from what fetches report (end-of-partition events, or the high watermark cached from the last fetch), never from
ListOffsets alone, which some brokers answer short. The last value per key wins, a tombstone deletes, and an
invalid record is refused: the key keeps its last good value, the error is logged and counted.

``Config.version`` is the number of config records read so far (the sum over partitions of the next offset), so
every reader that has read the same records names the same configuration by the same number.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Generic, TypeVar, cast

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition

from subroute import wire
from subroute.config.codec import ConfigDecodeError, ConfigValue, decode, ends_change, key_of, to_record
from subroute.config.model import AppConfig, Config, GroupConfig
from subroute.config.validation import StateValidator
from subroute.errors import SubrouteError
from subroute.kafka import clients
from subroute.ops.metrics import RouterMetrics
from subroute.ops.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")

# Compacted, and one partition: the config topic is then one total order, and its offset is the version.
CONFIG_TOPIC_CONFIG = {"cleanup.policy": "compact"}


def config_topic_spec(settings: Settings) -> clients.TopicSpec:
    return clients.TopicSpec(settings.config_topic, 1, CONFIG_TOPIC_CONFIG, settings.replication_factor)


class ConfigTopicInvalid(SubrouteError, RuntimeError):
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
    """The config topic's records in order, and the ``Config`` they add up to at each position.

    A version's validity is decided on the whole configuration at that position (``validate_state``), never
    on which other keys happened to be present when one record arrived: a worker that reads the compacted
    topic and one that read every record hold the last record of every key, so they agree on every version.
    A version that is not valid as a whole is refused: ``config()`` raises ``ConfigVersionRefused`` and the
    reader keeps the last good version in force.
    """

    def __init__(self, prefix: str | None = None) -> None:
        # raw key -> the key's last record: a value, a tombstone (dropped), or why it could not be decoded
        self._records: dict[bytes, ConfigValue | ConfigDecodeError] = {}
        self._next_offsets: dict[int, int] = {}
        # With the prefix: inputs may not read its topics. A version a newer rule refuses stays valid here (the CLI
        # refuses such files; a version already in force must not stop routing after an upgrade): see warnings().
        self._validator = StateValidator(prefix=prefix, newer_rules=False)
        self.at_boundary = True  # the last record read ended a change (or no record was read)

    @property
    def version(self) -> int:
        return sum(self._next_offsets.values())

    def next_offset(self, partition: int) -> int | None:
        return self._next_offsets.get(partition)

    def apply(self, message: Message) -> bool:
        """Take one record as its key's last; True when the records changed."""
        partition, offset = message.partition() or 0, message.offset() or 0
        self._next_offsets[partition] = max(self._next_offsets.get(partition, 0), offset + 1)
        headers = cast(wire.Headers | None, message.headers())  # consumed: (str, bytes | None) pairs
        self.at_boundary = ends_change(headers)
        raw_key = message.key() or b""
        try:
            _key, value = decode(message.key(), message.value(), headers)
        except ConfigDecodeError as exc:
            log.error(
                "config record undecodable: versions are refused until a change replaces or deletes it",
                extra={"fields": {"partition": partition, "offset": offset, "reason": str(exc)}},
            )
            self._records[raw_key] = exc
            return True
        if value is None:
            return self._records.pop(raw_key, None) is not None
        old = self._records.get(raw_key)
        if isinstance(old, AppConfig | GroupConfig) and to_record(old) == to_record(value):
            return False
        self._records[raw_key] = value
        return True

    def values(self) -> dict[str, ConfigValue]:
        """Every decodable record by key, valid or not (what ``config apply`` diffs against)."""
        return {key_of(v): v for v in self._records.values() if not isinstance(v, ConfigDecodeError)}

    def undecodable(self) -> dict[str, str]:
        """Keys whose last record cannot be read, with why."""
        return {
            raw.decode(errors="replace"): str(v)
            for raw, v in self._records.items()
            if isinstance(v, ConfigDecodeError)
        }

    def problems(self) -> list[str]:
        """Why the configuration at this position is not valid as a whole (empty when it is)."""
        undecodable = [str(v) for v in self._records.values() if isinstance(v, ConfigDecodeError)]
        return undecodable + [str(e) for e in self._validator.validate(self.values().values())]

    def warnings(self) -> list[str]:
        """What a newer rule finds wrong at this position (after ``problems``): routed as it is, but worth fixing."""
        return [str(e) for e in self._validator.newer_rule_errors]

    def config(self) -> Config:
        """The configuration at this position; ``ConfigVersionRefused`` when it is not valid as a whole."""
        problems = self.problems()
        if problems:
            raise ConfigVersionRefused(self.version, problems)
        values = self.values().values()
        apps = {v.name: v for v in values if isinstance(v, AppConfig)}
        groups = {(v.app, v.name): v for v in values if isinstance(v, GroupConfig)}
        return Config(self.version, MappingProxyType(apps), MappingProxyType(groups))


class ConfigVersionRefused(SubrouteError, ValueError):
    """The configuration at a version is not valid as a whole: no reader routes under it."""

    def __init__(self, version: int, problems: list[str]) -> None:
        self.version = version
        self.problems = problems
        shown = "\n".join(problems[:20])
        more = f"\n... and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(f"config version {version} refused:\n{shown}{more}")


ClientConfig = dict[str, str | int | float | bool | Callable[[KafkaError], None]]


def _client_config(settings: Settings, mandatory: ClientConfig) -> ClientConfig:
    """Pass-through properties (TLS, SASL...) plus the settings this reader cannot work without."""
    # Tailing: see a change within ~0.1 s unless the operator tunes it.
    return cast(ClientConfig, settings.client_config(mandatory, defaults={"fetch.wait.max.ms": 100}))


class _TopicReader:
    """All partitions of the config topic by assignment, with per-partition "at the end" tracking."""

    def __init__(self, settings: Settings) -> None:
        self.topic = settings.config_topic
        self._cause: str | None = None
        self._brokers_down: str | None = None
        self._consumer = Consumer(
            _client_config(
                settings,
                {
                    "error_cb": self._on_error,
                    # Required by the client, never joined: partitions are assigned, offsets never committed.
                    "group.id": f"{settings.topic_prefix}.config-reader",
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "enable.partition.eof": True,
                    "auto.offset.reset": "earliest",
                    # A change becomes visible whole: the records of an aborted or open apply never arrive.
                    "isolation.level": "read_committed",
                },
            )
        )
        self._at_end: dict[int, bool] = {}

    @property
    def assigned(self) -> bool:
        return bool(self._at_end)

    def _on_error(self, error: KafkaError) -> None:
        # librdkafka follows each failed attempt with "1/1 brokers are down", which says less than the failure
        # itself (a refused connection, a failed login): that one is kept beside the cause, never in its place.
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self._brokers_down = error.str()
        else:
            self._cause = error.str()

    @property
    def broker_error(self) -> str | None:
        """The client's last error (a refused connection, a failed login), with "brokers are down" beside it."""
        parts = [part for part in (self._brokers_down, self._cause) if part is not None]
        return ": ".join(parts) or None

    def serve_callbacks(self) -> None:
        """Deliver the client's queued errors and log lines (an unassigned consumer reads nothing here)."""
        self._consumer.poll(0)

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

    def poll(self, timeout: float, prompt: bool = False) -> list[Message]:
        """The next records (not applied); updates which partitions are at their end.

        ``prompt`` (following the topic): return as soon as a record is here, with what else already is, instead
        of gathering up to 500 records for the whole ``timeout`` (``consume(n, timeout)`` waits for n records or
        the timeout), which held every config change back by it. Reading to the end gathers."""
        records: list[Message] = []
        if prompt:
            first = self._consumer.poll(timeout)
            batch = [first, *self._consumer.consume(499, timeout=0)] if first is not None else []
        else:
            batch = self._consumer.consume(500, timeout=timeout)
        for message in batch:
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
        """Every partition has reached the end reported by its last fetch (under read_committed: the last
        stable offset, so no change is in flight before it)."""
        for partition, at_end in self._at_end.items():
            if at_end:
                continue
            part = TopicPartition(self.topic, partition)
            _low, high = self._consumer.get_watermark_offsets(part, cached=True)
            # The position passes the commit markers of transactions; the state's next offset does not.
            position = self._consumer.position([part])[0].offset
            consumed = max(state.next_offset(partition) or 0, position)
            if high < 0 or consumed < high:
                return False
            self._at_end[partition] = True
        return self.assigned

    def close(self) -> None:
        self._consumer.close()


def read_state(
    settings: Settings, *, timeout: float = 30.0, on_record: Callable[[ConfigState], None] | None = None
) -> ConfigState:
    """The config topic read once to its end (an empty state when the topic does not exist)."""
    state = ConfigState(settings.topic_prefix)
    reader = _TopicReader(settings)
    try:
        if not reader.assign():
            return state  # no config topic yet: nothing configured
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
        return state
    finally:
        reader.close()


def read_config(settings: Settings, *, timeout: float = 30.0) -> Config:
    """The configuration in force: the config topic read to its end. Raises ``ConfigVersionRefused`` when the
    configuration there is not valid as a whole (a hand-written record, say): nothing may route under it."""
    return read_state(settings, timeout=timeout).config()


def no_apps_warning(settings: Settings, config: Config) -> str | None:
    """What to tell an operator whose prefix holds no app (None when it holds one): most often a mistyped
    ``--topic-prefix``, which otherwise looks like a router with nothing to do."""
    if config.apps:
        return None
    if config.version == 0:
        return (
            f"no configuration under topic prefix {settings.topic_prefix!r}: {settings.config_topic} is empty; "
            "check --topic-prefix (env SUBROUTE_TOPIC_PREFIX), or apply one with `subroute config apply -f FILE`"
        )
    return (
        f"the configuration in {settings.config_topic} (version {config.version}) has no apps: nothing routes"
    )


class AppNotConfigured(SubrouteError, LookupError):
    """No app of that name in the config in force."""


def read_app(settings: Settings, app: str, *, timeout: float = 30.0) -> AppConfig:
    """One app as configured now (the config topic read to its end): what the consumer client is given."""
    found = read_config(settings, timeout=timeout).apps.get(app)
    if found is None:
        raise AppNotConfigured(f"app {app!r} is not configured under topic prefix {settings.topic_prefix!r}")
    return found


def read_group(settings: Settings, app: str, group: str, *, timeout: float = 30.0) -> GroupConfig:
    """One group as configured now: what the consumer client is given with its app (``max_leased_per_member``)."""
    found = read_config(settings, timeout=timeout).groups.get((app, group))
    if found is None:
        raise AppNotConfigured(
            f"group {group!r} of app {app!r} is not configured under topic prefix {settings.topic_prefix!r}"
        )
    return found


def history(settings: Settings, *, timeout: float = 30.0) -> dict[int, Config]:
    """The ``Config`` at every valid version, by version (0 is the empty config before the first record).

    Workers publish only some of these (those ending a change); every version stamped on a routed record is
    here. On an uncompacted config topic written without transactions version ``v`` follows ``v`` records.
    """
    configs = {0: Config()}

    def take(state: ConfigState) -> None:
        with contextlib.suppress(ConfigVersionRefused):  # no reader routes under it
            configs[state.version] = state.config()

    read_state(settings, timeout=timeout, on_record=take)
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
        self._settled_at = 0.0  # last seen at the topic's end with everything read published (or refused)
        # why the config topic could not be read yet (the last error met), for the worker's start-up timeout
        self.trouble: str | None = None
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
    def settled_at(self) -> float:
        """When (``time.monotonic()``) the store last stood at the config topic's end with all it read
        published or refused: a version not in force then was not on the topic."""
        return self._settled_at

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
        state = ConfigState(self._settings.topic_prefix)
        reader: _TopicReader | None = None
        try:
            reader = _TopicReader(self._settings)
            self._wait_for_topic(reader)
            pending = True  # a config must be published once the topic is read to its end, even an empty one
            dirty_since = time.monotonic()
            while not self._stop.is_set():
                records = reader.poll(0.2, prompt=True)
                self._heartbeat = time.monotonic()
                for message in records:
                    if state.apply(message) and not pending:
                        pending, dirty_since = True, time.monotonic()
                with self._condition:
                    self._position = state.version
                    self._condition.notify_all()
                caught_up = reader.caught_up(state)
                if not pending:
                    if caught_up and self._snapshot is not None:
                        self._settled_at = time.monotonic()
                    continue
                if self._snapshot is None and not caught_up:
                    continue  # never publish a partial first config
                if not (caught_up or state.at_boundary):
                    continue  # never half a change: its last record is still to come
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
        admin = clients.admin_client(self._settings)
        while not self._stop.is_set():
            self._heartbeat = time.monotonic()
            try:
                clients.ensure_topics(admin, [config_topic_spec(self._settings)])
                check_config_topic(
                    self._settings.config_topic, *clients.topic_settings(admin, self._settings.config_topic)
                )
                if reader.assign():
                    return
            except (KafkaException, TimeoutError) as exc:
                # once per kind of trouble, not once a second: the worker gives up after its start-up timeout
                error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                reader.serve_callbacks()
                reason = reader.broker_error or (error.str() if error is not None else str(exc))
                changed = reason != self.trouble
                self.trouble = reason
                log.log(
                    logging.WARNING if changed else logging.DEBUG,
                    "config topic not available yet, retrying",
                    extra={"error": reason},
                )
            self._stop.wait(1.0)

    def _publish(self, state: ConfigState) -> None:
        try:
            config = state.config()
        except ConfigVersionRefused as exc:  # the last good version stays in force (none yet: not ready)
            log.error(
                "config version refused; the last good version stays in force",
                extra={"fields": {"version": exc.version, "problems": exc.problems[:20]}},
            )
            if self._metrics is not None:
                self._metrics.config_refused.inc()
            self._error = exc
            return
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
        warnings = state.warnings()
        if warnings:  # applied before the rule existed: routed as before, and said, so someone fixes it
            log.warning(
                "config version in force has expressions that can never match; `subroute config validate` shows "
                "them with the fix",
                extra={"fields": {"version": config.version, "problems": warnings[:20]}},
            )
