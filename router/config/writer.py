"""Writing the configuration: one change (an ``apply``, a ``delete``) is one Kafka transaction on the config topic.

* Atomic. The change's records are committed together; readers read the config topic ``read_committed`` and
  publish a version only where a change ends (``CHANGE_END_HEADER`` on its last record) or at the topic's end,
  so no worker routes under half a change, and a killed writer's records are never seen.
* Serialised. Every writer of one config topic uses the same transactional id. Opening a writer fences any
  other still open (and aborts its open transaction), so of two concurrent changes only the later-opened one
  can commit; the other fails with ``ConcurrentChange`` and writes nothing. A writer reads the configuration
  only once it holds the id, so what it diffs against is what is on the topic when it commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from subroute import wire
from subroute.config.codec import CHANGE_END_HEADER
from subroute.config.store import ConfigState, config_topic_spec, read_state
from subroute.errors import SubrouteError
from subroute.kafka import clients
from subroute.kafka.clients import KafkaError, KafkaException
from subroute.ops.settings import Settings

ConfigRecord = tuple[str, bytes | None, wire.Headers]  # key, Avro value (None: tombstone), headers

# A writer killed mid-change blocks read_committed readers of the config topic until the next writer opens, or
# until this runs out: short, because workers wait on it; a change is a handful of records written at once.
TRANSACTION_TIMEOUT_MS = 60_000

_FENCED = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})


class ConcurrentChange(SubrouteError, RuntimeError):
    """Another config change opened while this one ran; this one wrote nothing."""


def writer_id(settings: Settings) -> str:
    return f"{settings.config_topic}.writer"


class ConfigWriter:
    """Holds the config topic's writer id from ``open`` to ``close``; ``read`` then ``write`` one change."""

    def __init__(self, settings: Settings, timeout: float = 30.0) -> None:
        self._settings = settings
        self._timeout = timeout
        clients.ensure_topics(clients.admin_client(settings), [config_topic_spec(settings)])
        self._producer = clients.producer(
            settings,
            **{
                "linger.ms": 0,
                "transactional.id": writer_id(settings),
                "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            },
        )
        try:
            self._producer.init_transactions(timeout)  # fences the previous holder, aborts its open change
        except KafkaException as exc:
            raise RuntimeError(f"could not take the config topic's writer id: {exc.args[0]}") from exc

    def read(self) -> ConfigState:
        """The config topic read to its end, after every change committed before this writer opened."""
        return read_state(self._settings, timeout=self._timeout)

    def write(self, records: Sequence[ConfigRecord]) -> None:
        """Commit ``records`` as one change, in order; raises ``ConcurrentChange`` if another writer opened."""
        if not records:
            return
        failures: list[str] = []

        def delivered(error: KafkaError | None, message: Any) -> None:
            if error is not None:
                failures.append(f"{message.key().decode(errors='replace')}: {error}")

        try:
            self._producer.begin_transaction()
            for index, (key, value, headers) in enumerate(records):
                marked = [*headers, (CHANGE_END_HEADER, b"1")] if index == len(records) - 1 else headers
                self._producer.produce(
                    self._settings.config_topic,
                    key=key.encode(),
                    value=value,
                    headers=cast(Any, marked),  # the client's stubs take str values too: a list is invariant
                    on_delivery=delivered,
                )
            self._producer.commit_transaction(self._timeout)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.code() in _FENCED:
                raise ConcurrentChange(
                    "another config change started while this one ran; this one wrote nothing. "
                    "Run the command again to apply it on top of the other."
                ) from exc
            if not error.fatal():
                self._producer.abort_transaction(self._timeout)
            raise RuntimeError(f"config change not written: {error}") from exc
        if failures:  # a committed transaction has every record; this is belt and braces
            raise RuntimeError("config records not written: " + "; ".join(failures))

    def close(self) -> None:
        self._producer.flush(self._timeout)

    def __enter__(self) -> ConfigWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
