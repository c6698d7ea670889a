"""Types of ``subroute.routing._native``, the native routing core (router/routing/native, a PyO3 extension).

What it is handed is declared once, in router/routing/native_boundary.py: TypedDicts the native side reads by
key (``PlanSpec``, ``EntrySpec``, ``DeciderSpec``, ``RouteGroup``, ``BatchState`` and the structures in them).
What it makes is a class of this module with named attributes (``Matches``, ``BatchOutcome``,
``ConsumedBatch``, ``InputSpan``), or a ``decisions.RouteResult``, ``decisions.Decision`` or ``envelope.InputRecord`` whose
fields it sets by name. A record's headers are confluent-kafka's ``[(name, value)]`` list (``wire.HeadersIn``);
it and the routed records of ``input_records`` with their envelopes (``envelope.OutRecord``,
``envelope.DecisionHeaders``: what ``Producer.produce`` takes) are the structures read and made by position. The
consumed records ``read_inputs`` reads are confluent-kafka's ``Message``s (``envelope.ConsumedRecord``), read
through their methods.
``READS`` and ``MAKES`` say what the module was built to read and make; native_boundary.py compares them with
its declarations at import.
"""

from collections.abc import Callable, Iterable, Sequence

from subroute.routing.decisions import Action, Decision, RouteResult
from subroute.routing.envelope import ConsumedRecord, DecisionHeaders, InputRecord, OutRecord
from subroute.routing.native_boundary import (
    AvroNode,
    AvroRead,
    BatchState,
    BodyRead,
    DeciderSpec,
    EntrySpec,
    PlanSpec,
    RouteGroup,
)
from subroute.wire import Header, HeadersIn

READS: dict[str, list[str]]
"""Each structure the module reads (a TypedDict of native_boundary.py, by name) with its keys."""

MAKES: dict[str, list[str]]
"""Each Python class the module makes objects of (``RouteResult``, ``Decision``) with the fields it sets."""

def read_json(value: bytes | None, reads: list[BodyRead]) -> BodyReading:
    """The properties ``reads`` name in one JSON record value, as ``routing/body.py``'s ``read_json``: the
    values found and the failures by property (one pass, no tree)."""

def input_records(
    messages: list[InputRecord],
    routed: Sequence[Sequence[Decision]],
    made: dict[int, DecisionHeaders],
    headers_of: Callable[[Decision], DecisionHeaders],
    source: str,
    version: Header,
    routed_at: Header,
    skipped: list[Action],
    now_ms: int,
) -> list[OutRecord]:
    """The routed records of ``messages`` in order, as ``envelope.records_for`` makes each message's
    (router/routing/native_envelope.py)."""

def read_inputs(
    batch: Sequence[ConsumedRecord], record_type: type[InputRecord], pending_topics: dict[str, str]
) -> ConsumedBatch:
    """``batch`` read: each record without error as ``InputRecord.of`` reads it (made field by field), those of
    ``pending_topics`` apart from the others (router/routing/native_inputs.py)."""

class ConsumedBatch:
    """A consumed batch, read (``read_inputs``): each list in batch order."""

    inputs: list[InputRecord]
    """The records of input topics."""
    pending: list[InputRecord]
    """The records of pending topics."""
    errors: list[ConsumedRecord]
    """The messages that carry an error, as they are."""
    spans: list[InputSpan]
    """Per input partition, in the order first met, the offsets its records span."""

class InputSpan:
    """The offsets an input partition's records span in a consumed batch."""

    topic: str
    partition: int
    first: int
    """The first offset of the partition's records in the batch."""
    end: int
    """The offset after the last one: the position to commit once they are routed."""

class BodyReading:
    """What ``read_json`` found: the values by property, and the properties that failed (each counted once)."""

    props: dict[str, int | float | str | bool]
    failures: dict[str, int]

class Entry:
    """One subscription lowered: its gate and residual (router/routing/native_plan.py). Made once and shared by
    every plan that holds the subscription."""

    def __init__(self, spec: EntrySpec) -> None:
        """Raises ValueError for a gate the plan cannot index by (an unknown kind, key kind or operator)."""

    @property
    def kind(self) -> str | None:
        """The gate's kind: "equality", "range", "interval", or None (evaluated for every record)."""

class Matches:
    """What ``NativePlan.match_batch_with_errors`` found: per record (aligned lists), the ascending positions of
    the entries it matched and of those whose evaluation ended in an error."""

    @property
    def matched(self) -> list[list[int]]:
        """Per record, the positions matched."""

    @property
    def errors(self) -> list[list[int]]:
        """Per record, the positions whose evaluation ended in an error (only entries evaluated; a sql92
        UNKNOWN is no error)."""

class Candidates:
    """What ``NativePlan.candidate_counts`` found: per record (aligned lists), how many entries the indexes
    listed (their gates hold) and how many of those were evaluated (those in groups the record opened)."""

    @property
    def listed(self) -> list[int]:
        """Per record, the entries listed."""

    @property
    def evaluated(self) -> list[int]:
        """Per record, the entries evaluated."""

class NativePlan:
    """Every entry of a ``PlanSpec`` in one plan: their slots decoded once per record, their gates indexed, their
    shared nodes evaluated at most once per record."""

    def __init__(self, spec: PlanSpec) -> None:
        """Only reading ``spec`` holds the GIL; checking and building run without it. Raises ValueError for a
        malformed spec (a child that is not an earlier node, a slot out of range, an entry both opening and
        requiring a group, ...)."""

    def match_batch(self, records: Iterable[HeadersIn | None]) -> list[list[int]]:
        """Per record, the ascending positions of the entries it matches (GIL released while evaluating)."""

    def match_batch_with_errors(self, records: Iterable[HeadersIn | None]) -> Matches:
        """``match_batch``, and per record the entries whose evaluation ended in an error."""

    def candidate_counts(self, records: Iterable[HeadersIn | None]) -> Candidates:
        """Per record, how many entries the indexes listed and how many of those were evaluated."""

    def stats(self) -> dict[str, int]:
        """How the entries are reached ("unindexed", "indexed_equality", "indexed_range", "indexed_interval")
        and how many nodes there are ("memoized", "nodes")."""

    def __len__(self) -> int:
        """The number of entries."""

class BatchOutcome:
    """What one ``NativeDecider.decide`` call did."""

    @property
    def decided(self) -> int:
        """How many records, from the first, were decided: fewer than given when the record at this index needs
        ``Router.route`` (an error on an entry that does not report exactly its Python plan's errors); the
        state below is then after the records decided."""

    @property
    def results(self) -> list[RouteResult]:
        """The decided records' results, as ``Router.route`` makes them."""

    @property
    def moved(self) -> dict[int, int]:
        """Each round-robin cursor that moved (by index) and its value now."""

    @property
    def routed(self) -> dict[int, int]:
        """Per (app, group) slot, how many records were routed there (slots with none are left out)."""

    @property
    def held_apps(self) -> list[str]:
        """With holders given: each record routed with a message-group key, in order, its app; aligned with
        ``held_keys`` and ``held_groups`` (``Holders.hold(app, key, group)`` of each)."""

    @property
    def held_keys(self) -> list[bytes]:
        """The message-group key of each placement."""

    @property
    def held_groups(self) -> list[str]:
        """The consumer group of each placement."""

class NativeDecider:
    """A table's decisions (router/routing/native/src/decide.rs) on its plan: built once with the table, then
    one ``decide`` per batch decides every record with the GIL released, as ``Router.route`` would one by one."""

    def __init__(self, plan: NativePlan, spec: DeciderSpec) -> None:
        """Raises ValueError for a description the decider refuses (a span outside the plan, a candidate
        outside its app's span, a group's candidates of one priority not adjacent, ...)."""

    def add_route(self, groups: list[RouteGroup]) -> int:
        """Register the apps a record of one topic (or for one app) is routed for, by environment; returns the
        route's index, which ``BatchState.routes`` gives per record."""

    def decide(self, records: Iterable[HeadersIn | None], state: BatchState) -> BatchOutcome:
        """Decide the records in order with ``state``. With the GIL it copies the headers the decider reads
        into one buffer and looks up the message groups' holders; without it, it evaluates the plan and decides;
        with it again, it makes the results."""

class AvroReading:
    """What ``AvroBodyReader.read`` found in one body."""

    @property
    def props(self) -> dict[str, int | float | str | bool]:
        """The properties read (a path absent or null is missing: not here)."""

    @property
    def failures(self) -> dict[str, int]:
        """1 for each property counted: a leaf of the wrong type, or every property of an undecodable body."""

class AvroBodyReader:
    """The properties of one app read from plain Avro bodies of one writer schema
    (router/routing/native/src/body_avro.rs): only the fields the reads name are decoded, the rest skipped by
    their encodings, the whole body checked as ``body_avro.read_plain`` checks it."""

    def __init__(self, nodes: list[AvroNode], reads: list[AvroRead]) -> None:
        """``nodes``: the writer schema as ``native_avro.lower`` makes it (root first). Raises ValueError for a
        malformed table (a child out of range, a union in a union, an unknown kind) or declared type."""

    def read(self, body: bytes) -> AvroReading:
        """The properties of one plain Avro body, as ``body_avro.read_plain`` reads them."""
