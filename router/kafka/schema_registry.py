"""Writer schemas from a Confluent Schema Registry, by id, for Avro values in Confluent's wire format.

The Kafka edge's registry client (confluent-kafka's ``SchemaRegistryClient``): configured like the Spark job's
(a URL and client properties such as ``basic.auth.user.info`` or ``ssl.ca.location``), each id fetched once and
kept (a registered id never changes), an id the registry does not have remembered for ``unknown_ttl`` seconds
so that a stream of garbage frames is not a stream of requests.

What the caller does with an answer is the rule of BODY-SPEC: an unknown id (the registry answers "schema not
found") makes the record's body undecodable, counted like any other; a registry that cannot be read (refused
connection, timeout, 5xx, a refused login, a URL that is not a registry) raises ``RegistryUnavailable``, and the
records wait (``Backoff``, ``retry_while_unavailable``) instead of being routed as if their fields were absent.

The schemas are handed to ``parse`` as JSON-shaped data, references first (in the order they must be known),
the schema of the id last; what ``parse`` makes is cached. This room knows nothing of how bodies are read.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from subroute.errors import SubrouteError
from subroute.ops.settings import REDACTED, is_secret

T = TypeVar("T")

ENV_URL = "SUBROUTE_SCHEMA_REGISTRY_URL"  # as the Spark job's --schema-registry-url
SCHEMA_NOT_FOUND = 40403  # Confluent's error code for an id the registry does not have
# SchemaRegistryClient properties that are numbers (settings arrive as text)
NUMERIC_PROPERTIES = frozenset(
    {
        "timeout",
        "cache.capacity",
        "cache.latest.ttl.sec",
        "max.retries",
        "retries.wait.ms",
        "retries.max.wait.ms",
    }
)


class RegistryUnavailable(SubrouteError, RuntimeError):
    """The Schema Registry could not be read: not a missing property. The records wait and are read again."""

    def __init__(self, url: str, schema_id: int, reason: str) -> None:
        super().__init__(f"schema id {schema_id}: the schema registry {url} cannot be read ({reason})")
        self.url = url
        self.schema_id = schema_id


class UnusableSchema(SubrouteError, ValueError):
    """The registry has the id, but its schema is not Avro or does not parse: the bodies are undecodable."""


def _number(text: str) -> int | float:
    """A property's number: an int where it is one (the client counts retries with range(), which refuses a
    float), else a float."""
    return int(text) if text.strip().lstrip("-").isdigit() else float(text)


@dataclass(frozen=True)
class RegistrySettings:
    """Where the writer schemas are: the registry's URL and ``SchemaRegistryClient`` properties."""

    url: str
    config: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, url: str, config: Mapping[str, str] | None = None) -> RegistrySettings:
        return cls(url, tuple(sorted((config or {}).items())))

    def client_config(self) -> dict[str, Any]:
        conf: dict[str, Any] = {"url": self.url}
        for key, value in self.config:
            conf[key] = _number(value) if key in NUMERIC_PROPERTIES else value
        return conf

    def __repr__(self) -> str:  # never show a password, even in a traceback
        shown = {key: (REDACTED if is_secret(key) or "auth" in key else value) for key, value in self.config}
        return f"RegistrySettings(url={self.url!r}, config={shown!r})"


class WriterSchemas(Generic[T]):
    """Writer schemas by id from one registry, fetched once per id and parsed by ``parse``."""

    def __init__(
        self,
        settings: RegistrySettings,
        parse: Callable[[Sequence[Any]], T],
        *,
        unknown_ttl: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.client = SchemaRegistryClient(settings.client_config())
        self._parse = parse
        self._unknown_ttl = unknown_ttl
        self._clock = clock
        self._known: dict[int, T] = {}
        self._unusable: dict[int, str] = {}
        self._unknown_until: dict[int, float] = {}

    def get(self, schema_id: int) -> T | None:
        """The parsed writer schema of ``schema_id``; None when the registry does not have the id, or its schema
        is unusable (not Avro, does not parse). Raises RegistryUnavailable when the registry cannot be read."""
        found = self._known.get(schema_id)
        if found is not None or schema_id in self._unusable:
            return found
        until = self._unknown_until.get(schema_id)
        if until is not None and self._clock() < until:
            return None
        try:
            chain = self._fetch(schema_id)
        except SchemaRegistryError as exc:
            if exc.error_code == SCHEMA_NOT_FOUND:
                self._unknown_until[schema_id] = self._clock() + self._unknown_ttl
                return None
            raise RegistryUnavailable(self.settings.url, schema_id, f"it answered {exc}") from exc
        except UnusableSchema as exc:
            self._unusable[schema_id] = str(exc)
            return None
        except Exception as exc:  # refused, timed out, TLS: whatever the transport raises
            raise RegistryUnavailable(self.settings.url, schema_id, f"{type(exc).__name__}: {exc}") from exc
        try:
            parsed = self._parse(chain)
        except ValueError as exc:  # fastavro's SchemaParseException is one
            self._unusable[schema_id] = f"schema id {schema_id} does not parse: {exc}"
            return None
        self._unknown_until.pop(schema_id, None)
        self._known[schema_id] = parsed
        return parsed

    def why_unusable(self, schema_id: int) -> str | None:
        """Why the schema of an id the registry has cannot be read with (for logs), or None."""
        return self._unusable.get(schema_id)

    def _fetch(self, schema_id: int) -> list[Any]:
        """The schema of ``schema_id`` and every schema it references (first), as JSON-shaped data."""
        schema = self.client.get_schema(schema_id)
        chain: list[Any] = []
        done: set[tuple[str, int]] = set()
        opened: set[tuple[str, int]] = set()  # references being expanded: a cycle is not followed twice
        # Depth first with an explicit stack: a referenced schema comes after the ones it references.
        pending = [(ref.subject, ref.version, False) for ref in reversed(schema.references or ())]
        while pending:
            subject, version, expanded = pending.pop()
            if subject is None or version is None:
                raise UnusableSchema(f"schema id {schema_id} has a reference without subject or version")
            key = (subject, version)
            if key in done or (key in opened and not expanded):
                continue
            registered = self.client.get_version(subject, version)
            references = registered.schema.references or ()
            if not expanded and references:
                opened.add(key)
                pending.append((subject, version, True))
                pending.extend((ref.subject, ref.version, False) for ref in reversed(references))
                continue
            done.add(key)
            chain.append(_avro_json(registered.schema.schema_type, registered.schema.schema_str, schema_id))
        chain.append(_avro_json(schema.schema_type, schema.schema_str, schema_id))
        return chain


def _avro_json(schema_type: str | None, text: str | None, schema_id: int) -> Any:
    if (schema_type or "AVRO") != "AVRO":
        raise UnusableSchema(f"schema id {schema_id} is {schema_type}, not Avro")
    if text is None:
        raise UnusableSchema(f"schema id {schema_id} has no schema text")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UnusableSchema(f"schema id {schema_id} is not JSON: {exc}") from None


@dataclass
class Backoff:
    """Exponential backoff with jitter: the wait after each consecutive failure, reset by a success."""

    initial: float = 0.5
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 0.2  # each wait is shortened by up to this fraction, so that workers do not retry in step
    random: Callable[[], float] = field(default=random.random, repr=False)
    failures: int = 0

    def __post_init__(self) -> None:
        if not (0 < self.initial <= self.maximum and self.factor >= 1 and 0 <= self.jitter < 1):
            raise ValueError(f"bad backoff {self!r}")

    def next_delay(self) -> float:
        """Record a failure; the seconds to wait before the next try."""
        exponent = min(self.failures, 64)  # past the maximum long before; keeps the power finite
        self.failures += 1
        delay = min(self.maximum, self.initial * self.factor**exponent)
        return delay * (1 - self.jitter * self.random())

    def reset(self) -> None:
        self.failures = 0


def retry_while_unavailable(
    call: Callable[[], T],
    backoff: Backoff,
    *,
    sleep: Callable[[float], None] = time.sleep,
    stopping: Callable[[], bool] = lambda: False,
    on_wait: Callable[[RegistryUnavailable, float], None] = lambda error, delay: None,
) -> T:
    """``call()``, tried again after a backoff wait for as long as it raises RegistryUnavailable (each wait
    reported to ``on_wait``, for the worker's /readyz and metric); the backoff is reset by a success. Raises
    the last RegistryUnavailable when ``stopping()`` turns true (the worker is shutting down)."""
    while True:
        try:
            result = call()
        except RegistryUnavailable as exc:
            if stopping():
                raise
            delay = backoff.next_delay()
            on_wait(exc, delay)
            sleep(delay)
            continue
        backoff.reset()
        return result
