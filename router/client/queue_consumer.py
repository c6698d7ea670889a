"""The consumer client: AMPS queue verbs (ack, cancel, expire, leases, backlog) for the consumers of a group topic.

``QueueConsumer`` holds the verbs, the lease clock, the commits and the rebalance callbacks; it reads through
``subroute.client.reader`` (the group's Kafka consumer, delivery order) and settles given-back messages through
``subroute.client.give_back`` (copies, dead letters). The bookkeeping lives in ``subroute.client.delivery``
(pure), the dead-letter format in ``subroute.wire``, the replace check in
``subroute.client.replace``. See ``docs/queue-semantics.md`` for the guarantees, and ``examples/`` for scripts.

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
from collections.abc import Callable, Iterator, Mapping

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    Consumer,
    KafkaException,
    TopicPartition,
)

from subroute import wire
from subroute.client.delivery import (
    TP,
    AckTracker,
    GroupKey,
    MovedCopies,
    MovedCopy,
    Outstanding,
    backlog_limit,
)
from subroute.client.give_back import GiveBackWriter, GivenBack
from subroute.client.messages import (
    AT_LEAST_ONCE,
    AT_MOST_ONCE,
    SEMANTICS,
    QueueError,
    QueueMessage,
    QueueStats,
    now_ms,
    where,
)
from subroute.client.reader import GroupReader, group_consumer
from subroute.client.replace import Resubscription
from subroute.client.settle_feed import SettleFeed
from subroute.config.model import AppConfig, Config, GroupConfig
from subroute.ops.settings import Settings
from subroute.routing.expiration import is_expired
from subroute.wire import event

log = logging.getLogger(__name__)

# How long cancel / expire / a lease expiry wait for the first write of a given-back message. A write still
# under way after that stays under way: its delivery report settles the message (or schedules a retry) during a
# later poll().
WRITE_WAIT = 30.0

# How often the committed offsets of the partitions holding this member's moved grouped copies are read.
MOVED_CHECK_INTERVAL = 0.5

# How often the commits of newly assigned partitions are read again when they could not be read on assignment.
COMMITS_RETRY_INTERVAL = 1.0


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
    ``group_config``: the group as configured (``subroute.config.store.read_group``): its
    ``max_leased_per_member`` caps ``max_backlog`` (AMPS MaxPerSubscriptionBacklog, the smaller wins); with
    ``current_config`` the cap of the configuration in force is applied instead, so a change reaches running
    members (a lowered cap takes no message back: no new one is delivered until the backlog is under it, as AMPS).
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
        group_config: GroupConfig | None = None,
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
        self.group_config = group_config
        self.stats = QueueStats()
        self._current_config = current_config
        self._resubscription = Resubscription(app, group) if current_config is not None else None
        self._tracker = AckTracker()
        self._outstanding: Outstanding[QueueMessage] = Outstanding()
        self._moved = MovedCopies()
        self._moved_check = 0.0  # when (monotonic) the moved copies' partitions may be looked at again
        self._assigned: set[TP] = set()
        # Assigned partitions whose last commit (and so its holes) could not be read yet: paused, nothing of them
        # taken or committed (a commit would drop the holes) until it is read (``_read_unread_commits``).
        self._unread: set[TP] = set()
        self._unread_check = 0.0
        self._closed = False
        self._replace_version = 0  # the config version of the last replace check (for the history event)
        # The lease clock runs in its own thread (``_run_leases``), so every piece of state below is touched
        # under this lock: by the application's thread in the verbs, by the lease thread, and by the rebalance
        # callbacks and delivery reports, which run in whichever of the two threads serves the client. The
        # reader and the writer take no lock of their own: they are called under this one.
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._wake = threading.Event()  # a new lease deadline: the lease thread recomputes when to wake
        self._lease_thread: threading.Thread | None = None
        group_id = wire.consumer_group_id(settings.topic_prefix, app, group)
        self._writer = GiveBackWriter(
            settings,
            app,
            app_config,
            self.stats,
            hold=self._hold,
            settled=self._settled,
            copied=self._copied,
        )
        self._consumer = group_consumer(
            settings,
            app,
            group,
            app_config,
            group_id=group_id,
            consumer_config=dict(consumer_config or {}),
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        # The operator's settle entries of this group (``subroute queue ack``), read to the end before the first
        # delivery, then followed at every fetch.
        self._settles = SettleFeed(settings, app_config, group)
        self._reader = GroupReader(
            self._consumer,
            settings,
            app,
            group,
            app_config,
            group_id=group_id,
            max_buffered=self.max_buffered,
            dedup_window=dedup_window if dedup else None,
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
                self._writer.retry_due()
                if self._backlog() < self.backlog_limit:
                    message = self._deliver_next()
                    if message is not None:
                        return message
                now = time.monotonic()
                remaining = deadline - now
                wait = min(max(remaining, 0.0), 0.5)
                for next_time in (self._outstanding.next_deadline(), self._writer.next_due()):
                    if next_time is not None:
                        wait = min(wait, max(next_time - now, 0.0))
            self._fetch(wait)
            if remaining <= 0:
                with self._lock:
                    self._expire_leases(wait=WRITE_WAIT)
                    self._writer.retry_due()
                    if self._backlog() < self.backlog_limit:
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
                if self._covered(message):  # settled by an operator meanwhile: not back to the queue
                    self._settle_covered(message)
                    return True
                self._writer.fail(message, explicit=True, assigned=self._assigned, wait=WRITE_WAIT)
            return True

    def expire(self, message: QueueMessage, reason: str = wire.REJECTED) -> bool:
        """Remove the message at once: to the dead-letter topic with ``reason`` (at-least-once only, as AMPS).
        A dead letter the broker refuses is written again on later polls, as for ``cancel``."""
        with self._lock:
            if not self._release(message):
                return False
            if self.semantics == AT_LEAST_ONCE:
                self._writer.dead_letter(
                    message,
                    reason,
                    event("expire", now_ms(), **where(message), reason=reason),
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
                self._writer.flush(10)  # delivery reports of writes under way settle their messages
                self._commit(asynchronous=False)
            finally:
                self._closed = True
                self._consumer.close()
                self._writer.close()
                self._settles.close()

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
    def settle_entries(self) -> list[str]:
        """The ids of the operator's settle entries of this group that this member has read."""
        return [entry.id for entry in self._settles.rules.entries]

    @property
    def backlog_limit(self) -> int:
        """How many messages this member may hold at once: ``max_backlog``, or the group's
        ``max_leased_per_member`` when that is smaller (from ``current_config`` when given, else ``group_config``)."""
        group = self.group_config
        if self._current_config is not None:
            try:
                group = self._current_config().groups.get((self.app, self.group), group)
            except Exception as exc:  # not loaded yet: the cap it was given
                log.debug("could not load the configuration in force", extra={"error": str(exc)})
        return backlog_limit(self.max_backlog, None if group is None else group.max_leased_per_member)

    @property
    def settling(self) -> int:
        """Given-back messages whose copy or dead letter is not acknowledged yet (part of ``outstanding``)."""
        return len(self._writer)

    @property
    def buffered(self) -> int:
        """Fetched records not delivered yet (waiting for backlog room, a higher band, or a held group)."""
        return len(self._reader)

    @property
    def assignment(self) -> set[TP]:
        return set(self._assigned)

    # --- delivery -----------------------------------------------------------------------------------------------

    def _fetch(self, wait: float) -> None:
        with self._lock:
            self._reader.resume_drained()
        # Without the lock: the lease thread keeps running while this one waits for records. Rebalance callbacks
        # served by the fetch take the lock themselves.
        fetched = self._reader.fetch(wait)
        with self._lock:
            self._settles.refresh()
            for message in self._reader.messages(fetched):
                self._take(message)
            self._writer.serve()

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
        if not self._tracker.is_hole(tp, message.offset) and not self._reader.admits(message):
            self.stats.duplicates += 1
            self._tracker.settle(tp, message.offset)
            return
        self._reader.buffer(message)

    def _backlog(self) -> int:
        return len(self._outstanding) + len(self._writer)

    def _deliver_next(self) -> QueueMessage | None:
        limit = self.backlog_limit
        while self._backlog() < limit:
            message = self._reader.next()
            if message is None:
                return None
            if self._covered(message):
                if self.semantics == AT_MOST_ONCE and not self._pass_over(message):
                    self._reader.put_back(message)
                    return None
                self._settle_covered(message)
                continue
            at_ms = now_ms()
            if is_expired(self.app_config, message.headers, message.timestamp, at_ms):
                # Dead-lettered: settled (and committed) once its dead letter is acknowledged; until then it
                # takes a slot. Dropped: settled now.
                self._writer.expired(message, event(wire.EXPIRED, at_ms, **where(message)), wait=WRITE_WAIT)
                continue
            if not self._still_subscribed(message):
                # Settled (and committed) once the pending record is acknowledged.
                self._writer.replace(message, current=self._replace_version, wait=WRITE_WAIT)
                continue
            if self.semantics == AT_MOST_ONCE and not self._pass_over(message):
                # Not committed past, so not handed out: it stays first in line for the next poll.
                self._reader.put_back(message)
                return None
            self._outstanding.add(message.id, message, time.monotonic(), self.lease)
            if self.lease is not None:
                message.lease_deadline = time.monotonic() + self.lease
                self._wake.set()  # the lease thread may be sleeping until a later deadline
            self.stats.delivered += 1
            return message
        return None

    def _covered(self, message: QueueMessage) -> bool:
        """Settled by an operator (``subroute queue ack``): it was in the queue when a settle entry it matches
        was written (``client/settles.py``)."""
        return self._settles.rules.covers(message.topic, message.partition, message.offset, message.headers)

    def _settle_covered(self, message: QueueMessage) -> None:
        """As if acknowledged, without being delivered (at-most-once has committed past it already)."""
        self.stats.settled += 1
        if self.semantics == AT_LEAST_ONCE:
            self._tracker.settle((message.topic, message.partition), message.offset)
            self._commit(asynchronous=True)

    def _pass_over(self, message: QueueMessage) -> bool:
        """At-most-once: commit past ``message`` before it is handed out (AMPS "removes the message from the
        queue immediately when AMPS sends the message"), so a crash after this loses it but never repeats it.

        Earlier messages of its partition that are not settled (an expired one whose dead letter, or a replaced
        one whose pending record, is still failing) are passed over too, and named in the commit's metadata
        (``wire.unsettled_metadata``): not lost, since the next owner of the partition reads them back and
        settles them (``_recover``), and not holding this message's commit back, which after a crash would
        deliver it twice. False, and nothing changed, when the commit cannot be made (the broker refused it, or
        the holes would not fit in the metadata): the message is then not handed out yet."""
        tp = (message.topic, message.partition)
        position, holes = self._tracker.passing(tp, message.offset)
        metadata = wire.unsettled_metadata(holes)
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

    def _release(self, message: QueueMessage) -> bool:
        self._check_open()
        if self._outstanding.get(message.id) is not message:
            return False
        self._outstanding.remove(message.id)
        return True

    # --- leases -------------------------------------------------------------------------------------------------

    def _expire_leases(self, *, wait: float) -> None:
        for message in self._outstanding.overdue(time.monotonic()):
            self._outstanding.remove(message.id)
            self.stats.lease_expired += 1
            if self.semantics == AT_LEAST_ONCE:
                if self._covered(message):
                    self._settle_covered(message)
                    continue
                self._writer.fail(message, explicit=False, assigned=self._assigned, wait=wait)

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
                    self._writer.retry_due()
                    self._writer.serve()  # delivery reports: settle (and commit) given-back messages
                    next_deadline = self._outstanding.next_deadline()
                    writing = len(self._writer) > 0
            except Exception:  # never let the clock stop silently; poll() still runs the leases meanwhile
                log.exception("the lease thread failed; trying again")
                next_deadline, writing = None, True
            wait = 1.0 if next_deadline is None else max(next_deadline - time.monotonic(), 0.0)
            if writing:
                wait = min(wait, 0.05)
            self._wake.wait(wait)
            self._wake.clear()

    # --- given-back messages settled (the writer's callbacks, under the lock) ----------------------------------

    def _hold(self, group: GroupKey) -> None:
        self._reader.hold(group)

    def _settled(self, message: QueueMessage) -> None:
        """Its dead letter, pending record or copy is acknowledged (or it expired and was dropped): commit past
        it like an acknowledged message."""
        self._tracker.settle((message.topic, message.partition), message.offset)
        self._commit(asynchronous=self.semantics == AT_LEAST_ONCE)

    def _copied(self, given: GivenBack, group: GroupKey, partition: int, offset: int) -> None:
        """A grouped message's copy is at ``offset`` of ``partition`` of its topic."""
        message = given.message
        tp = (message.topic, message.partition)
        if given.moved:
            # The original stays uncommitted, and its group held, until the member that got the copy settles it.
            self._reader.copy_moved(group)
            self._moved.add(MovedCopy((given.topic, partition), offset, group, (tp, message.offset)))
            return
        # The original stays uncommitted until the copy is settled, so a restart re-reads from it rather than
        # from after it. If the copy was fetched before this report, it is delivered now.
        self._tracker.settle_with((tp, message.offset), (tp, offset))
        self._reader.copy_written(group, offset)

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
                self._reader.moved_copy_settled(moved.group)
            self._commit(asynchronous=True)

    # --- offsets and the group ------------------------------------------------------------------------------------

    def _commit(self, *, asynchronous: bool, only: set[TP] | None = None) -> dict[TP, int]:
        positions: dict[TP, int] = {}
        offsets: list[TopicPartition] = []
        for tp, offset in self._tracker.committable().items():
            if tp not in self._assigned or tp in self._unread or (only is not None and tp not in only):
                continue
            # The partition's holes go with every commit until they are settled (see _pass_over).
            metadata = wire.unsettled_metadata(self._tracker.holes(tp))
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
        self._reader.seed_dedup(commits)

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
            holes = wire.unsettled_of(commit.metadata)
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
            self._reader.seed_dedup(read)

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
            self._unread.discard(tp)
            self._tracker.forget(tp)
            self._moved.forget(*tp)
            self._outstanding.drop_partition(*tp)
            self._writer.drop_partition(*tp)
        self._reader.forget(partitions)

    def _check_open(self) -> None:
        if self._closed:
            raise QueueError("the queue consumer is closed")


def _position(tp: TP, offset: int, metadata: str) -> TopicPartition:
    """A commit position; its metadata names the partition's holes ("" for none: a commit without metadata
    clears what the last one named)."""
    if metadata:
        return TopicPartition(tp[0], tp[1], offset, metadata=metadata)
    return TopicPartition(tp[0], tp[1], offset)
