"""The consumer client: AMPS queue verbs (ack, cancel, expire, leases, backlog) for the consumers of a group topic.

This is the one place of the client that talks to Kafka; the bookkeeping lives in ``subroute.client.delivery`` (pure) and
the dead-letter format in ``subroute.client.dead_letters``, the replace check in ``subroute.client.replace``. See
``docs/queue-semantics.md`` for the guarantees.

Use it from one thread (with a ``lease`` the client runs a lease thread of its own besides, ``_run_leases``)::

    billing = read_app(settings, "billing")            # subroute.config.store: the app as configured
    with QueueConsumer(settings, "billing", "general", app_config=billing, max_backlog=2, lease=30) as queue:
        for message in queue:
            try:
                handle(message.value)
            except Unprocessable:
                queue.expire(message)         # straight to the dead-letter topic
            except Exception:
                queue.cancel(message)         # back to the queue, counted against max_cancels
            else:
                queue.ack(message)
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from subroute import wire as names
from subroute import wire as priority
from subroute.client.delivery import (
    TP,
    AckTracker,
    BandBuffer,
    DuplicateFilter,
    GroupHoldBack,
    GroupKey,
    MovedCopies,
    MovedCopy,
    Outstanding,
    Settling,
    after_failure,
    redelivery_partition,
)
from subroute.client.replace import Resubscription, routed_version
from subroute.config.model import AppConfig, Config
from subroute.errors import SubrouteError
from subroute.kafka import clients as kafka_io
from subroute.ops.settings import Settings
from subroute.routing.expiration import is_expired, should_drop
from subroute.wire import (
    CANCELS,
    EXPIRED,
    MOVED_FROM,
    REPLACED,
    Headers,
    dead_letter_headers,
    event,
    header_value,
    int_header,
    is_resent,
    replace_headers,
    source_position,
    with_event,
)

log = logging.getLogger(__name__)

AT_LEAST_ONCE = "at-least-once"
AT_MOST_ONCE = "at-most-once"
SEMANTICS = (AT_LEAST_ONCE, AT_MOST_ONCE)

# How long cancel / expire / a lease expiry wait for the first write of a given-back message. A write still
# under way after that stays under way: its delivery report settles the message (or schedules a retry) during a
# later poll().
WRITE_WAIT = 30.0

# How often the committed offsets of the partitions holding this member's moved grouped copies are read.
MOVED_CHECK_INTERVAL = 0.5

# How long the group topic's partition count is trusted before it is looked up again (partitions can be added).
PARTITIONS_TTL = 30.0

# How often the commits of newly assigned partitions are read again when they could not be read on assignment.
COMMITS_RETRY_INTERVAL = 1.0


class QueueError(SubrouteError, RuntimeError):
    """The queue cannot be used as asked (unknown app, no default_publish, a produce that failed)."""


@dataclass(slots=True, eq=False)
class QueueMessage:
    """One delivered message. ``deliveries``: failed deliveries before this one; ``cancels``: cancels so far."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int  # epoch ms (Kafka CreateTime of the original publish)
    band: int = 0
    deliveries: int = 0
    cancels: int = 0
    lease_deadline: float | None = None  # time.monotonic() by which to settle it

    @classmethod
    def of(cls, message: Message, band: int) -> QueueMessage:
        headers = cast(Headers, message.headers() or [])
        return cls(
            cast(str, message.topic()),
            cast(int, message.partition()),
            cast(int, message.offset()),
            message.key(),
            message.value(),
            headers,
            message.timestamp()[1],
            band,
            int_header(headers, names.DELIVERIES),
            int_header(headers, CANCELS),
        )

    @property
    def id(self) -> tuple[str, int, int]:
        return (self.topic, self.partition, self.offset)

    def header(self, name: str) -> str | None:
        return header_value(self.headers, name)


@dataclass
class QueueStats:
    delivered: int = 0
    acked: int = 0
    cancelled: int = 0
    lease_expired: int = 0
    duplicates: int = 0
    dead_lettered: dict[str, int] = field(default_factory=dict)
    replaced: int = (
        0  # routed under a replaced subscription they no longer match: back through the pending topic
    )
    failed_writes: int = 0  # writes of given-back messages (copies, dead letters) that failed and are retried
    # Messages that expired here, by what became of them: "dead-letter" (once the dead letter is acknowledged) or
    # "drop" (the app's on_expire: drop; removed without a write). The router counts its own in
    # subroute_expired_total.
    expired: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class _GivenBack:
    """A message the application gave back and the one record that settles it: a copy on its own topic (in a
    partition of another member when there is one, see ``_copy_partition``), or a dead letter. Decided once, when
    it is given back; every retry writes the same record."""

    message: QueueMessage
    topic: str
    partition: int | None
    headers: Headers
    dead_letter_reason: str | None  # None: a copy back to the queue (or, ``replaced``, to the pending topic)
    group: GroupKey | None = None  # a grouped copy: the group's later messages wait for it
    replaced: bool = False  # sent back to the app's pending topic for the router to route it again
    moved: bool = (
        False  # a grouped copy in another member's partition: the group waits until it is settled there
    )


def _produce_sync(
    producer: Producer,
    topic: str,
    value: bytes | None,
    key: bytes | None,
    headers: Headers,
    *,
    partition: int | None = None,
    timestamp: int = 0,
    timeout: float = 30.0,
) -> tuple[int, int]:
    """Produce one record and wait for the broker's acknowledgement; (partition, offset) of the record."""
    result: list[Message] = []
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            errors.append(error)
        else:
            result.append(message)

    kwargs: dict[str, Any] = {"value": value, "key": key, "headers": headers, "on_delivery": delivered}
    if partition is not None:
        kwargs["partition"] = partition
    if timestamp > 0:
        kwargs["timestamp"] = timestamp
    producer.produce(topic, **kwargs)
    producer.flush(timeout)
    if errors or not result:
        raise QueueError(f"could not write to {topic}: {errors[0] if errors else 'timed out'}")
    return cast(int, result[0].partition()), cast(int, result[0].offset())


def publish(
    settings: Settings,
    app: str,
    value: bytes | None,
    headers: Mapping[str, str] | None = None,
    key: bytes | None = None,
    *,
    app_config: AppConfig,
) -> tuple[str, int, int]:
    """Write a message to the app's ``default_publish`` topic (AMPS DefaultPublishTarget): (topic, partition,
    offset). The router then takes it like any other input of the app. ``app_config``: the app as configured
    (``subroute.config.store.read_app``)."""
    config = app_config
    if not config.default_publish:
        raise QueueError(f"app {app!r} has no default_publish topic")
    producer = kafka_io.producer(settings)
    encoded: Headers = [(k, v.encode()) for k, v in (headers or {}).items()]
    partition, offset = _produce_sync(producer, config.default_publish, value, key, encoded)
    return config.default_publish, partition, offset


class QueueConsumer:
    """Iterate the messages of ``(app, group)`` with AMPS's verbs; a member of the group's Kafka consumer group.

    ``semantics``: ``at-least-once`` commits after acknowledgement (the contiguous acknowledged prefix of each
    partition); ``at-most-once`` commits past a message before handing it out (``_pass_over``). ``max_backlog``: unacknowledged messages outstanding at
    most (AMPS's default 1). ``lease``: seconds a delivered message may stay unacknowledged before it is
    cancelled. ``dedup``: drop router redeliveries. ``max_buffered``: fetched, undelivered records per partition
    before the partition is paused. ``consumer_config``: librdkafka properties (e.g. ``session.timeout.ms``).
    ``app_config``: the app as configured, loaded by the caller (``subroute.config.store.read_app``): the client
    reads no configuration itself. ``current_config``: a loader of the configuration in force (for instance
    ``lambda: store.snapshot()[0]`` of a ``subroute.config.store.ConfigStore`` the caller runs); with it the
    client applies AMPS's replace: a record routed under a group subscription that was replaced since, and that
    does not match the group's current subscriptions, is not delivered but sent back through the app's pending
    topic (reason ``replaced``) for the router to route under the current configuration (``client/replace.py``).
    """

    def __init__(
        self,
        settings: Settings,
        app: str,
        group: str,
        *,
        semantics: str = AT_LEAST_ONCE,
        max_backlog: int = 1,
        lease: float | None = None,
        dedup: bool = True,
        dedup_window: int = 10_000,
        max_buffered: int = 1000,
        consumer_config: Mapping[str, object] | None = None,
        app_config: AppConfig,
        current_config: Callable[[], Config] | None = None,
    ) -> None:
        if semantics not in SEMANTICS:
            raise ValueError(f"semantics must be one of {SEMANTICS}, not {semantics!r}")
        if max_backlog < 1:
            raise ValueError("max_backlog must be at least 1")
        if lease is not None and lease <= 0:
            raise ValueError("lease must be a positive number of seconds")
        self.settings = settings
        self.app = app
        self.group = group
        self.semantics = semantics
        self.max_backlog = max_backlog
        self.lease = lease
        self.max_buffered = max(1, max_buffered)
        self.app_config = app_config
        self.stats = QueueStats()
        self._current_config = current_config
        self._resubscription = Resubscription(app, group) if current_config is not None else None
        self._prefix = settings.topic_prefix
        self._grouped = self.app_config.group_by is not None
        self._tracker = AckTracker()
        self._dedup = DuplicateFilter(dedup_window) if dedup else None
        self._holdback: GroupHoldBack[QueueMessage] = GroupHoldBack()
        self._buffer: BandBuffer[QueueMessage] = BandBuffer(len(priority.BANDS))
        self._outstanding: Outstanding[QueueMessage] = Outstanding()
        self._settling: Settling[_GivenBack] = Settling()
        self._moved = MovedCopies()
        self._moved_check = 0.0  # when (monotonic) the moved copies' partitions may be looked at again
        self._buffered: dict[TP, int] = {}
        self._assigned: set[TP] = set()
        self._paused: set[TP] = set()
        # Assigned partitions whose last commit (and so its holes) could not be read yet: paused, nothing of them
        # taken or committed (a commit would drop the holes) until it is read (``_read_unread_commits``).
        self._unread: set[TP] = set()
        self._unread_check = 0.0
        self._closed = False
        self._replace_version = 0  # the config version of the last replace check (for the history event)
        self._partition_counts: dict[str, tuple[int, float]] = {}  # topic -> (partitions, looked up at)
        self._turn = 0  # spreads the copies of failed deliveries over the other members' partitions
        # The lease clock runs in its own thread (``_run_leases``), so every piece of state below is touched
        # under this lock: by the application's thread in the verbs, by the lease thread, and by the rebalance
        # callbacks and delivery reports, which run in whichever of the two threads serves the client.
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._wake = threading.Event()  # a new lease deadline: the lease thread recomputes when to wake
        self._lease_thread: threading.Thread | None = None
        self._group_id = names.consumer_group_id(self._prefix, app, group)
        self._consumer_overrides = dict(consumer_config or {})
        self._producer = kafka_io.producer(settings)
        if self.app_config.priority is not None:
            self._ensure_band_topics()
        self._consumer = Consumer(
            settings.client_config(
                {
                    **self._consumer_overrides,
                    "group.id": self._group_id,
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "auto.offset.reset": "earliest",
                    "partition.assignment.strategy": "cooperative-sticky",
                },
                defaults={
                    "session.timeout.ms": 10_000,
                    # Band topics created after subscribing are found by the next metadata refresh.
                    "topic.metadata.refresh.interval.ms": 5_000,
                    "fetch.wait.max.ms": 100,
                },
            )
        )
        self._consumer.subscribe(
            [priority.topic_regex(self._prefix, app, group)],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        if lease is not None:
            self._lease_thread = threading.Thread(
                target=self._run_leases, name=f"subroute-lease-{app}-{group}", daemon=True
            )
            self._lease_thread.start()

    # --- the verbs ----------------------------------------------------------------------------------------------

    def poll(self, timeout: float = 1.0) -> QueueMessage | None:
        """The next message, or None when none can be delivered within ``timeout`` (the backlog is full, or the
        queue is empty). Call it regularly even with a full backlog: it keeps the group membership alive (Kafka
        breaks the lease of a member that stops polling, as AMPS does for a disconnected subscriber). Leases run
        out without it, on the lease thread."""
        self._check_open()
        deadline = time.monotonic() + timeout
        while True:
            self._check_moved()
            self._read_unread_commits()
            with self._lock:
                self._expire_leases(wait=WRITE_WAIT)
                self._retry_writes()
                if self._backlog() < self.max_backlog:
                    message = self._deliver_next()
                    if message is not None:
                        return message
                now = time.monotonic()
                remaining = deadline - now
                wait = min(max(remaining, 0.0), 0.5)
                for next_time in (self._outstanding.next_deadline(), self._settling.next_due()):
                    if next_time is not None:
                        wait = min(wait, max(next_time - now, 0.0))
            self._fetch(wait)
            if remaining <= 0:
                with self._lock:
                    self._expire_leases(wait=WRITE_WAIT)
                    self._retry_writes()
                    if self._backlog() < self.max_backlog:
                        return self._deliver_next()
                    return None

    def __iter__(self) -> Iterator[QueueMessage]:
        while not self._closed:
            message = self.poll(1.0)
            if message is not None:
                yield message

    def ack(self, message: QueueMessage) -> bool:
        """Processed: removed from the queue. False when the message is no longer held by this consumer (its
        lease ran out, its partition was reassigned, or it was already settled)."""
        with self._lock:
            if not self._release(message):
                return False
            self.stats.acked += 1
            if self.semantics == AT_LEAST_ONCE:
                self._tracker.settle((message.topic, message.partition), message.offset)
                self._commit(asynchronous=True)
            return True

    def cancel(self, message: QueueMessage) -> bool:
        """Return the message to the queue for another member of the group (re-published to its topic, in a
        partition another member owns when there is one, with ``subroute.deliveries`` and ``subroute.cancels``
        raised; a grouped message's later messages wait until that member settles it), or dead-letter it once
        the app's max_cancels / max_deliveries is reached. With at-most-once it only frees the backlog slot, as in AMPS.

        True means the client has taken the message back. If the broker refuses the copy or dead letter, the
        message stays outstanding (it keeps its backlog slot and its offset stays uncommitted) and later
        ``poll`` calls write it again with backoff (``stats.failed_writes``) until one write is acknowledged."""
        with self._lock:
            if not self._release(message):
                return False
            self.stats.cancelled += 1
            if self.semantics == AT_LEAST_ONCE:
                self._fail(message, explicit=True, wait=WRITE_WAIT)
            return True

    def expire(self, message: QueueMessage, reason: str = "rejected") -> bool:
        """Remove the message at once: to the dead-letter topic with ``reason`` (at-least-once only, as AMPS).
        A dead letter the broker refuses is written again on later polls, as for ``cancel``."""
        with self._lock:
            if not self._release(message):
                return False
            if self.semantics == AT_LEAST_ONCE:
                now_ms = _now_ms()
                self._dead_letter(
                    message,
                    reason,
                    event("expire", now_ms, **_where(message), reason=reason),
                    wait=WRITE_WAIT,
                )
            return True

    def commit(self) -> dict[TP, int]:
        """Commit the acknowledged prefix now (acks already commit asynchronously); the positions committed."""
        self._check_open()
        with self._lock:
            return self._commit(asynchronous=False)

    def close(self) -> None:
        """Commit what is acknowledged and leave the group. Unacknowledged messages are not committed: with
        at-least-once the next member of the group gets them again; so are given-back messages whose copy or
        dead letter is still not acknowledged (writes under way get up to 10 s to finish first)."""
        if self._closed:
            return
        self._stopping.set()
        self._wake.set()
        if self._lease_thread is not None:
            self._lease_thread.join(WRITE_WAIT)
        with self._lock:
            try:
                self._producer.flush(10)  # delivery reports of writes under way settle their messages
                self._commit(asynchronous=False)
            finally:
                self._closed = True
                self._consumer.close()
                kafka_io.close_producer(self._producer)

    def __enter__(self) -> QueueConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- state for callers and tests --------------------------------------------------------------------------

    @property
    def outstanding(self) -> int:
        """Delivered messages not settled yet: held by the application, or given back and being written."""
        return self._backlog()

    @property
    def settling(self) -> int:
        """Given-back messages whose copy or dead letter is not acknowledged yet (part of ``outstanding``)."""
        return len(self._settling)

    @property
    def buffered(self) -> int:
        """Fetched records not delivered yet (waiting for backlog room, a higher band, or a held group)."""
        return len(self._buffer) + self._holdback.held_count()

    @property
    def assignment(self) -> set[TP]:
        return set(self._assigned)

    # --- delivery -----------------------------------------------------------------------------------------------

    def _fetch(self, wait: float) -> None:
        with self._lock:
            self._resume_drained()
        # Without the lock: the lease thread keeps running while this one waits for records. Rebalance callbacks
        # served by poll() and consume() take the lock themselves. Wait for one record at most ``wait``, then take
        # what else is here: consume(n, timeout) waits for n records or the whole timeout, a delay per delivery.
        first = self._consumer.poll(wait)
        fetched = [first, *self._consumer.consume(499, timeout=0)] if first is not None else []
        with self._lock:
            for raw in fetched:
                error = raw.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    if error.fatal():
                        raise KafkaException(error)
                    log.warning("consume error", extra={"error": str(error)})
                    continue
                band = priority.band_of_topic(self._prefix, self.app, self.group, cast(str, raw.topic())) or 0
                message = QueueMessage.of(raw, band)
                self._take(message)
            self._producer.poll(0)

    def _take(self, message: QueueMessage) -> None:
        tp = (message.topic, message.partition)
        if tp not in self._assigned or tp in self._unread:
            return  # fetched before a revoke took effect, or before the partition's commit was read
        if not self._tracker.track(tp, message.offset):
            return  # already held (a re-fetch after pause/resume), or passed over by an earlier owner
        for (topic, partition), offset in self._tracker.vanished():
            log.warning(
                "an unsettled message below the committed offset is no longer in its partition (retention)",
                extra={"fields": {"topic": topic, "partition": partition, "offset": offset}},
            )
        # A hole read back from the last commit was never delivered; the duplicate memory, seeded from the records
        # before the committed offset, has seen it all the same.
        hole = self._tracker.is_hole(tp, message.offset)
        if self._dedup is not None and not hole and not is_resent(message.headers):
            source = source_position(message.headers)
            if source is not None and not self._dedup.admit(tp, source):
                self.stats.duplicates += 1
                self._tracker.settle(tp, message.offset)
                return
        self._buffer.push(message.band, message)
        count = self._buffered.get(tp, 0) + 1
        self._buffered[tp] = count
        if count >= self.max_buffered and tp not in self._paused:
            self._consumer.pause([TopicPartition(*tp)])
            self._paused.add(tp)

    def _resume_drained(self) -> None:
        drained = [tp for tp in self._paused if self._buffered.get(tp, 0) <= self.max_buffered // 2]
        if drained:
            self._consumer.resume([TopicPartition(*tp) for tp in drained])
            self._paused.difference_update(drained)

    def _backlog(self) -> int:
        return len(self._outstanding) + len(self._settling)

    def _deliver_next(self) -> QueueMessage | None:
        while self._backlog() < self.max_backlog:
            popped = self._buffer.pop()
            if popped is None:
                return None
            band, message = popped
            tp = (message.topic, message.partition)
            self._buffered[tp] = self._buffered.get(tp, 1) - 1
            if self._grouped and message.key is not None:
                now, released = self._holdback.route((*tp, message.key), message.offset, message)
                if released:
                    self._buffer.push_front(band, released)
                    self._buffered[tp] += len(released)
                if now is None:
                    continue  # a cancelled message of its group has not come back yet
            now_ms = _now_ms()
            if is_expired(self.app_config, message.headers, message.timestamp, now_ms):
                # Dead-lettered: settled (and committed) once its dead letter is acknowledged; until then it
                # takes a slot. Dropped: settled now.
                self._expired(message, event("expired", now_ms, **_where(message)), wait=WRITE_WAIT)
                continue
            if not self._still_subscribed(message):
                self._replace(message)  # settled (and committed) once the pending record is acknowledged
                continue
            if self.semantics == AT_MOST_ONCE and not self._pass_over(message):
                # Not committed past, so not handed out: it stays first in line for the next poll.
                self._buffer.push_front(band, [message])
                self._buffered[tp] = self._buffered.get(tp, 0) + 1
                return None
            self._outstanding.add(message.id, message, time.monotonic(), self.lease)
            if self.lease is not None:
                message.lease_deadline = time.monotonic() + self.lease
                self._wake.set()  # the lease thread may be sleeping until a later deadline
            self.stats.delivered += 1
            return message
        return None

    def _pass_over(self, message: QueueMessage) -> bool:
        """At-most-once: commit past ``message`` before it is handed out (AMPS "removes the message from the
        queue immediately when AMPS sends the message"), so a crash after this loses it but never repeats it.

        Earlier messages of its partition that are not settled (an expired one whose dead letter, or a replaced
        one whose pending record, is still failing) are passed over too, and named in the commit's metadata
        (``names.unsettled_metadata``): not lost, since the next owner of the partition reads them back and
        settles them (``_recover``), and not holding this message's commit back, which after a crash would
        deliver it twice. False, and nothing changed, when the commit cannot be made (the broker refused it, or
        the holes would not fit in the metadata): the message is then not handed out yet."""
        tp = (message.topic, message.partition)
        position, holes = self._tracker.passing(tp, message.offset)
        metadata = names.unsettled_metadata(holes)
        if metadata is None:
            log.warning(
                "too many unsettled messages to commit past at-most-once; waiting for their writes",
                extra={"fields": {"topic": tp[0], "partition": tp[1], "unsettled": len(holes)}},
            )
            return False
        try:
            self._consumer.commit(
                offsets=[_position(tp, position, metadata)],
                asynchronous=False,
            )
        except KafkaException as exc:
            log.warning("at-most-once commit failed; the message waits", extra={"error": str(exc)})
            return False
        self._tracker.pass_over(tp, message.offset)
        self._tracker.mark_committed({tp: position})
        return True

    def _still_subscribed(self, message: QueueMessage) -> bool:
        """AMPS replace: whether the group's subscriptions in force still take this record."""
        if self._resubscription is None or self._current_config is None:
            return True
        try:
            config = self._current_config()
        except Exception as exc:  # the configuration is not known (not loaded yet): deliver as routed
            log.warning("could not load the configuration in force", extra={"error": str(exc)})
            return True
        self._replace_version = config.version
        return self._resubscription.matches(config, message.headers)

    def _replace(self, message: QueueMessage) -> None:
        """Back through the app's pending topic, reason ``replaced``. The record keeps the config version it was
        routed under, which is older than the one in force, so the router takes it up at once (a parked record
        is due under any newer version) and routes it under its current configuration; the router strips the
        routing and reason headers then and marks it ``subroute.redriven: pending``. Counts of failed deliveries
        are kept: a replace is no failure."""
        now_ms = _now_ms()
        headers = with_event(
            message.headers,
            event(
                REPLACED,
                now_ms,
                **_where(message),
                version=routed_version(message.headers),
                current=self._replace_version,
            ),
            {names.PENDING_REASON: REPLACED.encode()},
        )
        pending = names.pending_topic(self._prefix, self.app)
        self._give_back(_GivenBack(message, pending, None, headers, None, replaced=True), wait=WRITE_WAIT)

    def _release(self, message: QueueMessage) -> bool:
        self._check_open()
        if self._outstanding.get(message.id) is not message:
            return False
        self._outstanding.remove(message.id)
        return True

    def _expire_leases(self, *, wait: float) -> None:
        for message in self._outstanding.overdue(time.monotonic()):
            self._outstanding.remove(message.id)
            self.stats.lease_expired += 1
            if self.semantics == AT_LEAST_ONCE:
                self._fail(message, explicit=False, wait=wait)

    def _run_leases(self) -> None:
        """The lease clock (AMPS: "AMPS tracks the amount of time since the message was sent to the subscriber"):
        a lease runs out on time even while the application is busy with the message and not calling poll, and
        the message is re-published for another member from this thread, so that member gets it meanwhile.

        confluent-kafka's Producer may be used from several threads (librdkafka's produce is thread-safe), so this
        thread writes the copy itself, without waiting for it (``wait=0``: the lock is never held for a broker
        round trip here), and serves the delivery reports, which settle and commit the message. All bookkeeping
        is done under ``self._lock``. The Consumer is only ever polled by the application's thread; this thread
        only commits (asynchronously, which librdkafka allows from any thread)."""
        while not self._stopping.is_set():
            try:
                with self._lock:
                    if self._closed:
                        return
                    self._expire_leases(wait=0.0)
                    self._retry_writes()
                    self._producer.poll(0)  # delivery reports: settle (and commit) given-back messages
                    next_deadline = self._outstanding.next_deadline()
                    writing = len(self._settling) > 0
            except Exception:  # never let the clock stop silently; poll() still runs the leases meanwhile
                log.exception("the lease thread failed; trying again")
                next_deadline, writing = None, True
            wait = 1.0 if next_deadline is None else max(next_deadline - time.monotonic(), 0.0)
            if writing:
                wait = min(wait, 0.05)
            self._wake.wait(wait)
            self._wake.clear()

    def _fail(self, message: QueueMessage, *, explicit: bool, wait: float) -> None:
        """A failed delivery (cancel or lease expiry): another attempt, or the dead-letter topic."""
        config = self.app_config
        outcome = after_failure(
            message.deliveries,
            message.cancels,
            explicit_cancel=explicit,
            max_cancels=config.max_cancels,
            max_deliveries=config.max_deliveries,
        )
        now_ms = _now_ms()
        failure = event(
            "cancel" if explicit else "lease-expired",
            now_ms,
            **_where(message),
            deliveries=outcome.deliveries,
            cancels=outcome.cancels,
        )
        if is_expired(config, message.headers, message.timestamp, now_ms):
            self._expired(message, failure, wait=wait)
            return
        if outcome.dead_letter_reason is not None:
            self._dead_letter(message, outcome.dead_letter_reason, failure, wait=wait)
            return
        headers = with_event(
            message.headers,
            failure,
            {names.DELIVERIES: str(outcome.deliveries).encode(), CANCELS: str(outcome.cancels).encode()},
        )
        group: GroupKey | None = None
        moved = False
        if self._grouped and message.key is not None:
            # Qpid gives a group to one consumer at a time, in order. The group's later messages here wait from
            # now on (while the copy is being written too) until the copy is settled: read back and delivered
            # here first when it stays in this partition, or processed by the other member it went to
            # (``_check_moved``), so the group is never processed by two members at once.
            group = (message.topic, message.partition, message.key)
            if header_value(message.headers, MOVED_FROM) is not None:
                # Moved here once already; its first holder waits for it to be settled in this partition. Moved
                # again, and back to that holder's partition, it would queue behind the very messages that wait
                # for it: it stays here, redelivered by this member.
                partition = message.partition
            else:
                # One partition per group key (not in turns): two copies of one group go to the same member,
                # in order.
                partition = self._copy_partition(message, turn=zlib.crc32(message.key))
            if partition != message.partition:
                moved = True
                headers = replace_headers(headers, {MOVED_FROM: names.source_of(*message.id).encode()})
        else:
            partition = self._copy_partition(message)
        given = _GivenBack(message, message.topic, partition, headers, None, group, moved=moved)
        self._give_back(given, wait=wait)

    def _copy_partition(self, message: QueueMessage, turn: int | None = None) -> int:
        """Where the copy of a failed delivery goes: a partition of the same topic (group topic or band) owned by
        another member, so that member gets it (AMPS: the message "is available to another subscriber"), or its
        own partition when this member owns them all (``delivery.redelivery_partition``). ``turn`` picks among
        the other members' partitions (default: in turns, spreading the copies).

        Why the group topic and not a retry topic: a copy on the group topic is counted in the group's lag, which
        is the router's capacity and backlog measure (a retry topic would be invisible to it), keeps its band,
        and needs no topic, subscription or assignment beyond the ones the group has. The other members'
        partitions are known without asking the group coordinator: within a consumer group every partition is
        assigned to exactly one member, so those not assigned here belong to the others."""
        if turn is None:
            self._turn += 1
            turn = self._turn
        mine = {p for t, p in self._assigned if t == message.topic}
        return redelivery_partition(message.partition, self._partition_count(message.topic), mine, turn)

    def _partition_count(self, topic: str) -> int:
        """The topic's partition count from the metadata, cached for ``PARTITIONS_TTL``; 0 when it cannot be
        looked up (the copy then stays in its partition: never lost for want of metadata)."""
        now = time.monotonic()
        cached = self._partition_counts.get(topic)
        if cached is not None and now - cached[1] < PARTITIONS_TTL:
            return cached[0]
        try:
            metadata = self._producer.list_topics(topic, timeout=5)
        except KafkaException as exc:
            log.warning(
                "could not look up the partitions of a topic", extra={"topic": topic, "error": str(exc)}
            )
            return cached[0] if cached is not None else 0
        found = metadata.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            return cached[0] if cached is not None else 0
        count = len(found.partitions)
        self._partition_counts[topic] = (count, now)
        return count

    def _expired(self, message: QueueMessage, cause: dict[str, object], *, wait: float) -> None:
        """An expired message leaves the queue as the app's ``on_expire`` says: a dead letter (reason
        ``expired``), or, with ``drop``, removed at once like an acknowledged one (AMPS: expiration "is a normal
        way for the message to leave the queue"), counted in ``stats.expired``."""
        if not should_drop(self.app_config):
            self._dead_letter(message, EXPIRED, cause, wait=wait)
            return
        self.stats.expired["drop"] = self.stats.expired.get("drop", 0) + 1
        self._tracker.settle((message.topic, message.partition), message.offset)
        self._commit(asynchronous=self.semantics == AT_LEAST_ONCE)

    def _dead_letter(
        self, message: QueueMessage, reason: str, cause: dict[str, object], *, wait: float
    ) -> None:
        headers = with_event(message.headers, cause)
        headers = dead_letter_headers(headers, reason, event("dead-letter", _now_ms(), reason=reason))
        dlq = names.dlq_topic(self._prefix, self.app)
        self._give_back(_GivenBack(message, dlq, None, headers, reason), wait=wait)

    # --- given-back messages ------------------------------------------------------------------------------------
    #
    # A given-back message (cancelled, expired, its lease run out, expired on delivery) is settled when its copy
    # or dead letter is acknowledged, never before: until then it stays outstanding (it keeps a backlog slot and
    # its offset stays uncommitted) in ``self._settling``. A write that fails, whether produce() raises
    # (BufferError, KafkaException) or the delivery report carries an error, is written again on a later poll()
    # after a bounded backoff (delivery.retry_delay: 0.2 s doubling to 5 s), for as long as it takes; a crash or
    # a revoke meanwhile leaves the offset uncommitted, so the next owner delivers the message again (nothing
    # lost). Only one write of a message is under way at a time and only its report settles it, so a message is
    # never settled twice.

    def _give_back(self, given: _GivenBack, *, wait: float) -> None:
        self._settling.add(given.message.id, given, time.monotonic())
        if given.group is not None:
            self._holdback.expect_unwritten(given.group)
        self._write(given, wait=wait)

    def _retry_writes(self) -> None:
        for _, given in self._settling.due(time.monotonic()):
            self._write(given, wait=0.0)  # its delivery report is served by a later producer poll

    def _write(self, given: _GivenBack, *, wait: float) -> None:
        message = given.message
        key = message.id
        token = self._settling.start(key)
        if token is None:
            return  # settled or abandoned meanwhile, or a write of it is under way

        def report(error: KafkaError | None, written: Message) -> None:
            self._on_written(key, token, error, written)

        kwargs: dict[str, Any] = {
            "value": message.value,
            "key": message.key,
            "headers": given.headers,
            "on_delivery": report,
        }
        if given.partition is not None:
            kwargs["partition"] = given.partition
        if message.timestamp > 0:
            kwargs["timestamp"] = message.timestamp
        try:
            self._producer.produce(given.topic, **kwargs)
        except (BufferError, KafkaException) as exc:
            self._write_failed(key, token, str(exc))
            return
        if wait > 0:
            self._producer.flush(wait)
        else:
            self._producer.poll(0)

    def _write_failed(self, key: tuple[str, int, int], token: int, error: str) -> None:
        delay = self._settling.failed(key, token, time.monotonic())
        given = self._settling.get(key)
        if delay is None or given is None:
            return  # abandoned meanwhile (its partition was revoked)
        self.stats.failed_writes += 1
        log.warning(
            "could not write a given-back message; writing it again later",
            extra={
                "fields": {
                    "topic": given.topic,
                    "message": "/".join(map(str, key)),
                    "dead_letter_reason": given.dead_letter_reason,
                    "failures": self._settling.failures(key),
                    "retry_in_s": round(delay, 3),
                    "error": error,
                }
            },
        )

    def _on_written(
        self, key: tuple[str, int, int], token: int, error: KafkaError | None, written: Message
    ) -> None:
        if error is not None:
            self._write_failed(key, token, str(error))
            return
        done = self._settling.written(key, token)
        if done is None:
            return  # a write abandoned with its partition: the next owner delivers the message again
        message = done.message
        tp = (message.topic, message.partition)
        if done.dead_letter_reason is not None:
            reason = done.dead_letter_reason
            self.stats.dead_lettered[reason] = self.stats.dead_lettered.get(reason, 0) + 1
            if reason == EXPIRED:
                self.stats.expired["dead-letter"] = self.stats.expired.get("dead-letter", 0) + 1
        if done.replaced:
            self.stats.replaced += 1
        if done.group is not None and done.moved:
            # The original stays uncommitted, and its group held, until the member that got the copy settles it.
            copy = (done.topic, cast(int, written.partition()))
            self._holdback.written_elsewhere(done.group)
            self._moved.add(MovedCopy(copy, cast(int, written.offset()), done.group, (tp, message.offset)))
            return
        if done.group is not None:
            # The original stays uncommitted until the copy is settled, so a restart re-reads from it rather
            # than from after it. If the copy was fetched before this report, it is delivered now.
            copy_offset = cast(int, written.offset())
            self._tracker.settle_with((tp, message.offset), (tp, copy_offset))
            released = self._holdback.written(done.group, copy_offset)
            if released:
                self._buffer.push_front(released[0].band, released)
                self._buffered[tp] = self._buffered.get(tp, 0) + len(released)
            return
        self._tracker.settle(tp, message.offset)
        self._commit(asynchronous=self.semantics == AT_LEAST_ONCE)

    def _check_moved(self) -> None:
        """Grouped copies moved to other members are settled when the group's committed offset of their
        partition passes them (a member commits only what it has settled); then the original is settled and the
        group's held messages are delivered here, in order. Runs on the polling thread (it reads the committed
        offsets through the consumer), at most every ``MOVED_CHECK_INTERVAL``; outside the lock, as it waits for
        the group coordinator."""
        with self._lock:
            now = time.monotonic()
            if not self._moved or now < self._moved_check:
                return
            self._moved_check = now + MOVED_CHECK_INTERVAL
            partitions = self._moved.partitions()
        try:
            found = self._consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=5)
        except KafkaException as exc:
            log.warning("could not read the group's committed offsets", extra={"error": str(exc)})
            return
        committed = {
            (tp.topic, tp.partition): tp.offset for tp in found if tp.error is None and tp.offset >= 0
        }
        with self._lock:
            for moved in self._moved.settled(committed):
                self._tracker.settle(*moved.original)
                released = self._holdback.settled_elsewhere(moved.group)
                if released:
                    tp = moved.original[0]
                    self._buffer.push_front(released[0].band, released)
                    self._buffered[tp] = self._buffered.get(tp, 0) + len(released)
            self._commit(asynchronous=True)

    # --- offsets and the group ------------------------------------------------------------------------------------

    def _commit(self, *, asynchronous: bool, only: set[TP] | None = None) -> dict[TP, int]:
        positions: dict[TP, int] = {}
        offsets: list[TopicPartition] = []
        for tp, offset in self._tracker.committable().items():
            if tp not in self._assigned or tp in self._unread or (only is not None and tp not in only):
                continue
            # The partition's holes go with every commit until they are settled (see _pass_over).
            metadata = names.unsettled_metadata(self._tracker.holes(tp))
            if metadata is None:
                continue  # cannot happen: holes only shrink after the commit that named them all
            positions[tp] = offset
            offsets.append(_position(tp, offset, metadata))
        if not positions:
            return {}
        try:
            if asynchronous:
                self._consumer.commit(offsets=offsets, asynchronous=True)
            else:
                self._consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            # Not marked committed: the next commit retries. The messages are acknowledged either way.
            log.warning("offset commit failed", extra={"error": str(exc)})
            return {}
        self._tracker.mark_committed(positions)
        return positions

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self._lock:
            self._assign(consumer, partitions)

    def _assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._assigned.update((p.topic, p.partition) for p in partitions)
        if not partitions:
            return
        commits = self._read_commits(consumer, partitions, attempts=2)
        if commits is None:
            # Their holes are unknown: take and commit nothing of them until their commits are read.
            consumer.incremental_assign(partitions)
            consumer.pause(partitions)
            self._unread.update((p.topic, p.partition) for p in partitions)
            return
        starts = self._recover(commits)
        # Fetch from the first hole where there is one; elsewhere from the committed offset, as Kafka would.
        consumer.incremental_assign(
            [
                TopicPartition(p.topic, p.partition, starts.get((p.topic, p.partition), OFFSET_INVALID))
                for p in partitions
            ]
        )
        self._seed_dedup_from(commits)

    def _read_commits(
        self, consumer: Consumer, partitions: list[TopicPartition], *, attempts: int = 1
    ) -> list[TopicPartition] | None:
        """The group's last commits of ``partitions``, with their metadata; None when they cannot be read."""
        for attempt in range(attempts):
            try:
                return consumer.committed(partitions, timeout=10)
            except KafkaException as exc:
                log.warning(
                    "could not read the group's commits of newly assigned partitions",
                    extra={"fields": {"attempt": attempt + 1, "error": str(exc)}},
                )
        return None

    def _recover(self, commits: list[TopicPartition]) -> dict[TP, int]:
        """Read back the holes of each commit (``AckTracker.recover``); the offset to fetch each partition with
        holes from: its first hole."""
        starts: dict[TP, int] = {}
        for commit in commits:
            tp = (commit.topic, commit.partition)
            holes = names.unsettled_of(commit.metadata)
            if holes and commit.error is None and commit.offset >= 0:
                starts[tp] = self._tracker.recover(tp, commit.offset, holes)
                log.info(
                    "taking over unsettled messages below the committed offset",
                    extra={"fields": {"topic": tp[0], "partition": tp[1], "unsettled": len(holes)}},
                )
        return starts

    def _read_unread_commits(self) -> None:
        """Partitions whose commits could not be read on assignment: read them now (on the polling thread, outside
        the lock, as ``committed`` waits for the group coordinator), then fetch them from the right offset."""
        with self._lock:
            now = time.monotonic()
            if not self._unread or now < self._unread_check:
                return
            self._unread_check = now + COMMITS_RETRY_INTERVAL
            partitions = [TopicPartition(*tp) for tp in self._unread]
        commits = self._read_commits(self._consumer, partitions)
        if commits is None:
            return
        with self._lock:
            read: list[TopicPartition] = []
            for commit in commits:
                tp = (commit.topic, commit.partition)
                if tp not in self._unread:
                    continue  # revoked meanwhile
                start = self._recover([commit]).get(
                    tp, commit.offset if commit.offset >= 0 else OFFSET_BEGINNING
                )
                try:
                    self._consumer.seek(TopicPartition(tp[0], tp[1], start))
                except KafkaException as exc:  # stays unread, tried again (recover again is the same)
                    log.warning("could not seek a newly assigned partition", extra={"error": str(exc)})
                    continue
                self._consumer.resume([TopicPartition(*tp)])
                self._unread.discard(tp)
                read.append(commit)
            self._seed_dedup_from(read)

    def _seed_dedup_from(self, commits: list[TopicPartition]) -> None:
        if self._dedup is not None and commits:
            try:
                self._seed_dedup(commits)
            except KafkaException as exc:  # best effort: without a seed a restart may let a duplicate through
                log.warning(
                    "could not read back recent records for duplicate detection", extra={"error": str(exc)}
                )

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        revoked = {(p.topic, p.partition) for p in partitions}
        with self._lock:
            self._commit(asynchronous=False, only=revoked)
            self._drop(revoked)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self._lock:
            self._drop({(p.topic, p.partition) for p in partitions})

    def _drop(self, partitions: set[TP]) -> None:
        """Forget revoked partitions: their buffered records and unacknowledged messages belong to the next
        owner now (acks of them return False)."""
        for tp in partitions:
            self._assigned.discard(tp)
            self._paused.discard(tp)
            self._unread.discard(tp)
            self._buffered.pop(tp, None)
            self._tracker.forget(tp)
            self._holdback.forget(*tp)
            self._moved.forget(*tp)
            self._outstanding.drop_partition(*tp)
            self._settling.drop_partition(*tp)
            if self._dedup is not None:
                self._dedup.forget(tp)
        self._buffer.remove_if(lambda m: (m.topic, m.partition) in partitions)

    def _seed_dedup(self, committed: list[TopicPartition]) -> None:
        """Read back up to ``dedup_window`` records before the committed offset of each new partition, so a
        restarted member still recognises what the previous one delivered."""
        assert self._dedup is not None
        starts: dict[TP, tuple[int, int]] = {}
        for tp in committed:
            if tp.offset is None or tp.offset <= 0 or tp.offset == OFFSET_INVALID:
                continue
            key = (tp.topic, tp.partition)
            starts[key] = (max(0, tp.offset - self._dedup.window), tp.offset)
        if not starts:
            return
        reader = Consumer(
            self.settings.client_config(
                {
                    "group.id": f"{self._group_id}.dedup-seed",  # never joins, never commits
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    "auto.offset.reset": "earliest",
                }
            )
        )
        try:
            reader.assign([TopicPartition(t, p, start) for (t, p), (start, _) in starts.items()])
            remaining = set(starts)
            deadline = time.monotonic() + 15
            while remaining and time.monotonic() < deadline:
                for raw in reader.consume(1000, timeout=0.5):
                    key = (cast(str, raw.topic()), cast(int, raw.partition()))
                    error = raw.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            remaining.discard(key)
                        continue
                    offset = cast(int, raw.offset())
                    if key not in remaining or offset >= starts[key][1]:
                        remaining.discard(key)
                        continue
                    headers = cast(Headers, raw.headers() or [])
                    source = source_position(headers)
                    if source is not None and not is_resent(headers):
                        self._dedup.observe(key, source)
                    if offset + 1 >= starts[key][1]:
                        remaining.discard(key)
        finally:
            reader.close()

    def _ensure_band_topics(self) -> None:
        """An app with a priority expression has ten band topics per group; create the missing ones like the
        group topic (the router may not have written to a band yet)."""
        admin = kafka_io.admin_client(self.settings)
        existing = kafka_io.existing_topics(admin)
        base = names.group_topic(self._prefix, self.app, self.group)
        partitions = existing.get(base) or self.app_config.partitions or 1
        kafka_io.ensure_topics(
            admin,
            [
                kafka_io.TopicSpec(t, partitions)
                for t in priority.band_topics(self._prefix, self.app, self.group)
            ],
        )

    def _check_open(self) -> None:
        if self._closed:
            raise QueueError("the queue consumer is closed")


def _position(tp: TP, offset: int, metadata: str) -> TopicPartition:
    """A commit position; its metadata names the partition's holes ("" for none: a commit without metadata
    clears what the last one named)."""
    if metadata:
        return TopicPartition(tp[0], tp[1], offset, metadata=metadata)
    return TopicPartition(tp[0], tp[1], offset)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _where(message: QueueMessage) -> dict[str, object]:
    return {"topic": message.topic, "partition": message.partition, "offset": message.offset}
