"""The ledger: proves that every input message reached what its stamped config version dictates.

Given what was produced to the input topics (``Sent``, keyed by ``topic/partition/offset``), every record read
back from the app topics (group, pending and dead-letter topics) and the config history (``history(settings)``:
the ``Config`` at every version), ``Ledger.verify`` checks, per (input message, app):

* every output record names an input that was sent (``subroute.source``), its app reads the input's topic, and
  it sits where the config version stamped on it (``subroute.config-version``) dictates: the topic of a group
  whose subscription matches at the highest matching priority level (so round-robin choices are all accepted),
  with a ``subroute.subscription`` label of that group and level; the pending topic when nothing matches; the
  dead-letter topic when the message was expired;
* no record exists for an app whose filter drops the message (filtered: nothing written);
* value and key are kept byte for byte (the key is the message-group id when the app has ``group_by``), and
  the input's headers come first, unchanged;
* nothing is lost: every (input, app) the filter passes has at least one record, and when it never left the
  pending topic, the final config still has no subscription for it (pending records are redriven on every
  config change, so one that the final config would route is stuck);
* duplicates: records beyond one per (input, app, version, place): replays of uncommitted batches.

The expected placement comes from an oracle that is independent of the plan: each expression compiled alone
with ``subroute.expressions.compile`` and evaluated on the message's decoded properties. ``cross_check`` additionally
replays the router itself (``build_table(history[v])`` + ``Router().route``) and requires its decision to be
one of the oracle's allowed places.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from subroute import expressions, wire
from subroute.config.model import AppConfig, Config
from subroute.routing.decisions import Action, MessageView, Router, build_table
from subroute.routing.expiration import is_expired
from subroute.routing.properties import decode_headers
from subroute.topic_patterns import input_matches

Headers = tuple[tuple[str, bytes | None], ...]
PENDING = "pending"
DLQ = "dlq"
# Headers the router adds when it parks or routes a record (it strips these again when it redrives one).
ROUTER_HEADERS = frozenset(
    {
        wire.APP,
        wire.GROUP,
        wire.SUBSCRIPTION,
        wire.SOURCE,
        wire.CONFIG_VERSION,
        wire.ROUTED_AT,
        wire.DLQ_REASON,
        wire.REDRIVEN,
    }
)


@dataclass(frozen=True)
class Sent:
    """One input record as the producer's delivery report confirmed it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int

    @property
    def source(self) -> str:
        return wire.source_of(self.topic, self.partition, self.offset)


@dataclass(frozen=True)
class Output:
    """One record read back from an app topic."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers

    def header(self, name: str) -> str | None:
        """The last value of a header (the router appends its own after the input's)."""
        found: str | None = None
        for key, raw in self.headers:
            if key == name and raw is not None:
                found = raw.decode("utf-8", errors="replace")
        return found


def group_place(group: str) -> str:
    return f"group:{group}"


@dataclass(frozen=True)
class Expect:
    """What one config version dictates for one input message and one app."""

    filtered: bool
    places: frozenset[str]  # group:<g> (any of the top matching level), pending or dlq
    labels: Mapping[str, frozenset[str]] = field(default_factory=dict)  # group -> subscription labels


@dataclass
class Problem:
    source: str
    app: str
    what: str

    def __str__(self) -> str:
        return f"{self.source} app={self.app}: {self.what}"


@dataclass
class Report:
    inputs: int = 0
    outputs: int = 0
    lost: list[Problem] = field(default_factory=list)
    misrouted: list[Problem] = field(default_factory=list)
    unexpected: list[Problem] = field(default_factory=list)  # records for filtered messages, unknown sources
    altered: list[Problem] = field(default_factory=list)  # value, key or input headers changed
    stuck_pending: list[Problem] = field(default_factory=list)
    multi_routed: list[Problem] = field(default_factory=list)  # routed under two different versions
    router_disagrees: list[Problem] = field(default_factory=list)
    duplicates: int = 0  # records beyond one per (input, app, version, place)
    duplicated_inputs: int = 0  # input messages with at least one duplicate record
    fates: Counter[str] = field(default_factory=Counter)  # routed / filtered / pending / dlq per (input, app)
    versions: Counter[int] = field(default_factory=Counter)

    @property
    def problems(self) -> list[Problem]:
        return [
            *self.lost,
            *self.misrouted,
            *self.unexpected,
            *self.altered,
            *self.stuck_pending,
            *self.multi_routed,
            *self.router_disagrees,
        ]

    def summary(self) -> str:
        kinds = ", ".join(f"{k}={v}" for k, v in sorted(self.fates.items()))
        text = (
            f"{self.inputs} inputs, {self.outputs} output records ({kinds}); lost={len(self.lost)} "
            f"misrouted={len(self.misrouted)} unexpected={len(self.unexpected)} altered={len(self.altered)} "
            f"stuck_pending={len(self.stuck_pending)} multi_routed={len(self.multi_routed)} "
            f"router_disagrees={len(self.router_disagrees)} duplicates={self.duplicates} "
            f"(inputs duplicated: {self.duplicated_inputs}); versions seen: {len(self.versions)}"
        )
        first = self.problems[:15]
        if first:
            text += "\n  " + "\n  ".join(str(p) for p in first)
        return text

    def lost_ranges(self) -> dict[str, tuple[int, int, int]]:
        """Lost input messages per input partition: ``topic/partition`` -> (first offset, last offset, count)."""
        offsets: dict[str, set[int]] = defaultdict(set)
        for problem in self.lost:
            topic, partition, offset = wire.parse_source(problem.source)
            offsets[f"{topic}/{partition}"].add(offset)
        return {tp: (min(o), max(o), len(o)) for tp, o in sorted(offsets.items())}

    def assert_clean(self) -> None:
        assert not self.problems, self.summary()


@lru_cache(maxsize=100_000)
def _compiled(text: str, dialect: str, types: tuple[tuple[str, str], ...]) -> expressions.Expression:
    return expressions.compile(text, dialect=dialect, types=dict(types))


def _types(app: AppConfig) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(app.properties.items()))


def reads(app: AppConfig, topic: str) -> bool:
    return any(input_matches(pattern, topic) for pattern in app.inputs)


class Oracle:
    """The placement each config version dictates, from expressions compiled one by one (not the plan)."""

    def __init__(self, history: Mapping[int, Config]) -> None:
        self.history = history
        self._cache: dict[tuple[str, str, int], Expect | None] = {}

    def expect(self, sent: Sent, app_name: str, version: int, now_ms: int) -> Expect | None:
        """None when the app does not exist at that version or does not read the message's topic."""
        config = self.history[version]
        app = config.apps.get(app_name)
        if app is None or not reads(app, sent.topic):
            return None
        if app.priority is not None:
            raise NotImplementedError("the ledger does not model priority bands")
        if is_expired(app, sent.headers, sent.timestamp, now_ms):
            return Expect(False, frozenset({DLQ}))
        key = (sent.source, app_name, version)
        if key not in self._cache:
            self._cache[key] = self._evaluate(sent, app, config)
        return self._cache[key]

    def _evaluate(self, sent: Sent, app: AppConfig, config: Config) -> Expect:
        props, _ = decode_headers(sent.headers, app.properties)
        types = _types(app)
        if app.filter and not any(_compiled(f, app.dialect, types).matches(props) for f in app.filter):
            return Expect(True, frozenset())
        levels: dict[int, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        for group in config.groups_of(app.name):
            for sub in group.effective_subscriptions:
                hit = sub.expression is None or _compiled(sub.expression, app.dialect, types).matches(props)
                if hit:
                    levels[sub.priority][group.name].add(sub.label)
        if not levels:
            return Expect(False, frozenset({PENDING}))
        top = levels[max(levels)]
        return Expect(
            False,
            frozenset(group_place(g) for g in top),
            {g: frozenset(labels) for g, labels in top.items()},
        )


class Ledger:
    def __init__(self, prefix: str, history: Mapping[int, Config], sent: Iterable[Sent]) -> None:
        self.prefix = prefix
        self.history = history
        self.oracle = Oracle(history)
        self.sent = {s.source: s for s in sent}

    def app_names(self) -> set[str]:
        return {name for config in self.history.values() for name in config.apps}

    def place_of(self, record: Output, app: str) -> str | None:
        """Where a record sits, judged by its topic (and its group header for group topics)."""
        if record.topic == wire.pending_topic(self.prefix, app):
            return PENDING
        if record.topic == wire.dlq_topic(self.prefix, app):
            return DLQ
        group = record.header(wire.GROUP)
        if group is not None and wire.band_of_topic(self.prefix, app, group, record.topic) is not None:
            return group_place(group)
        return None

    def verify(
        self,
        outputs: Iterable[Output],
        *,
        final_version: int | None = None,
        check_headers: bool = True,
        now_ms: int | None = None,
    ) -> Report:
        import time

        verify_now = now_ms if now_ms is not None else int(time.time() * 1000)
        final = final_version if final_version is not None else max(self.history)
        report = Report(inputs=len(self.sent))
        seen: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)
        for record in outputs:
            report.outputs += 1
            source = record.header(wire.SOURCE)
            app = record.header(wire.APP)
            version_text = record.header(wire.CONFIG_VERSION)
            if source is None or app is None or version_text is None:
                report.unexpected.append(
                    Problem(str(source), str(app), f"record without routing headers at {record.topic}")
                )
                continue
            sent = self.sent.get(source)
            if sent is None:
                report.unexpected.append(
                    Problem(source, app, f"names an input that was never sent ({record.topic})")
                )
                continue
            version = int(version_text)
            report.versions[version] += 1
            if version not in self.history:
                report.misrouted.append(
                    Problem(source, app, f"stamped with unknown config version {version}")
                )
                continue
            place = self.place_of(record, app)
            routed_at = record.header(wire.ROUTED_AT)
            now = int(routed_at) if routed_at is not None else verify_now
            expect = self.oracle.expect(sent, app, version, now)
            if expect is None:
                report.unexpected.append(
                    Problem(source, app, f"app does not read {sent.topic} at version {version}")
                )
                continue
            if expect.filtered:
                report.unexpected.append(
                    Problem(source, app, f"filtered at version {version} but written to {record.topic}")
                )
                continue
            if place not in expect.places:
                report.misrouted.append(
                    Problem(
                        source,
                        app,
                        f"at {place} ({record.topic}) under version {version}; expected one of {sorted(expect.places)}",
                    )
                )
                continue
            if place is not None and place.startswith("group:"):
                group = place[len("group:") :]
                label = record.header(wire.SUBSCRIPTION)
                if label not in expect.labels.get(group, frozenset()):
                    report.misrouted.append(
                        Problem(
                            source,
                            app,
                            f"subscription {label!r} is not a top-level match of group {group} at version {version}",
                        )
                    )
                    continue
            self._check_integrity(report, record, sent, app, version, check_headers)
            seen[(source, app)].append((version, place or "?"))
        self._account(report, seen, final, verify_now)
        return report

    def _check_integrity(
        self, report: Report, record: Output, sent: Sent, app: str, version: int, check_headers: bool
    ) -> None:
        if record.value != sent.value:
            report.altered.append(Problem(sent.source, app, "value changed"))
        config = self.history[version].apps[app]
        if config.group_by is None and record.key != sent.key:
            report.altered.append(Problem(sent.source, app, f"key changed: {sent.key!r} -> {record.key!r}"))
        if check_headers and not any(k in ROUTER_HEADERS for k, _ in sent.headers):
            head = record.headers[: len(sent.headers)]
            if tuple(head) != tuple(sent.headers):
                report.altered.append(Problem(sent.source, app, "input headers not kept byte for byte"))

    def _account(
        self, report: Report, seen: Mapping[tuple[str, str], list[tuple[int, str]]], final: int, now_ms: int
    ) -> None:
        apps = sorted(self.app_names())
        duplicated: set[str] = set()
        for source, sent in self.sent.items():
            for app in apps:
                records = seen.get((source, app), [])
                expect = self.oracle.expect(sent, app, final, now_ms)
                if not records:
                    if expect is None:
                        continue
                    if expect.filtered:
                        report.fates["filtered"] += 1
                    else:
                        report.lost.append(
                            Problem(
                                source,
                                app,
                                f"no record at all; version {final} dictates {sorted(expect.places)}",
                            )
                        )
                    continue
                counts = Counter(records)
                extra = sum(n - 1 for n in counts.values())
                if extra:
                    report.duplicates += extra
                    duplicated.add(source)
                routed_versions = {v for v, place in counts if place.startswith("group:")}
                if len(routed_versions) > 1:
                    report.multi_routed.append(
                        Problem(source, app, f"routed under versions {sorted(routed_versions)}")
                    )
                places = {place for _, place in counts}
                if any(p.startswith("group:") for p in places):
                    report.fates["routed"] += 1
                elif DLQ in places:
                    report.fates["dlq"] += 1
                else:
                    report.fates["pending"] += 1
                    if expect is not None and PENDING not in expect.places:
                        report.stuck_pending.append(
                            Problem(
                                source,
                                app,
                                f"still pending, but version {final} dictates {sorted(expect.places)}",
                            )
                        )
        report.duplicated_inputs = len(duplicated)

    def cross_check(self, outputs: Iterable[Output], limit: int | None = None) -> list[Problem]:
        """Replay the router (``build_table(history[v])`` + ``Router().route``) on the messages as routed and
        require each of its decisions to be one the oracle allows. Returns the disagreements."""
        tables: dict[int, object] = {}
        problems: list[Problem] = []
        checked: set[tuple[str, int]] = set()
        for record in outputs:
            source, version_text = record.header(wire.SOURCE), record.header(wire.CONFIG_VERSION)
            routed_at = record.header(wire.ROUTED_AT)
            if source is None or version_text is None or routed_at is None or source not in self.sent:
                continue
            version = int(version_text)
            if (source, version) in checked or version not in self.history:
                continue
            if limit is not None and len(checked) >= limit:
                break
            checked.add((source, version))
            sent = self.sent[source]
            table = tables.get(version)
            if table is None:
                table = tables[version] = build_table(self.history[version])
            result = Router().route(
                table,  # type: ignore[arg-type]
                MessageView(sent.topic, list(sent.headers), sent.timestamp),
                {},
                int(routed_at),
            )
            for decision in result.decisions:
                expect = self.oracle.expect(sent, decision.app, version, int(routed_at))
                if expect is None:
                    problems.append(
                        Problem(source, decision.app, "router decided for an app the oracle skips")
                    )
                    continue
                if decision.action is Action.FILTERED:
                    ok = expect.filtered
                elif decision.action is Action.ROUTE:
                    ok = not expect.filtered and group_place(str(decision.group)) in expect.places
                elif decision.action is Action.PENDING:
                    ok = not expect.filtered and PENDING in expect.places
                else:
                    ok = not expect.filtered and DLQ in expect.places
                if not ok:
                    problems.append(
                        Problem(
                            source,
                            decision.app,
                            f"router says {decision.action.value}/{decision.group} at v{version}; oracle {expect}",
                        )
                    )
        return problems
