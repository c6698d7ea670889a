"""Why a message goes where it goes: every app's filter and subscriptions evaluated one by one, with outcomes.

Pure: the same routing table and decision functions the worker uses, plus each expression evaluated alone so
evaluation errors show (the shared plan only says "no match").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from subroute import expressions, wire
from subroute.routing.body import WriterOf, read_body
from subroute.routing.decisions import Action, Lag, MessageView, Router, RoutingTable, body_reads
from subroute.routing.properties import PropertyValue, decode_headers
from subroute.routing.snapshot import Snapshot
from subroute.wire import CAPACITY, NO_CONSUMER


@dataclass(frozen=True)
class Evaluation:
    label: str
    expression: str
    value: bool
    error: str | None


@dataclass
class AppExplanation:
    app: str
    properties: dict[str, PropertyValue]
    filter: list[Evaluation] = field(default_factory=list)
    subscriptions: list[tuple[int, Evaluation]] = field(default_factory=list)  # (priority, evaluation)
    action: str = ""
    destination: str | None = None
    why: str = ""
    advice: str | None = None  # what an operator can do about it (records waiting for a consumer)
    # Where each declared property comes from: "header <name>" or "body <format> <path>".
    sources: dict[str, str] = field(default_factory=dict)
    # The body properties that were counted as decode errors (undecodable body, wrong type).
    undecodable: list[str] = field(default_factory=list)


def waiting_advice(prefix: str, app: str, absent: Iterable[str]) -> str:
    """What to do about records of ``app`` that wait for a consumer (``explain``, the worker's warning)."""
    groups = (
        ", ".join(wire.consumer_group_id(prefix, app, group) for group in sorted(absent)) or "(none known)"
    )
    return (
        f"records of app {app} wait for a consumer: no live member in Kafka consumer group(s) {groups}; start a "
        f"consumer in one of them, or set `presence: ignored` on app {app} to route to its group topics with nobody "
        "attached"
    )


def _evaluate(
    label: str, text: str, dialect: str, types: dict[str, str], props: dict[str, PropertyValue]
) -> Evaluation:
    outcome = expressions.compile(text, dialect=dialect, types=types or None).evaluate(props)
    return Evaluation(label, text, outcome.value, outcome.error)


def explain(
    table: RoutingTable,
    message: MessageView,
    lag: Lag,
    now_ms: int,
    app: str | None = None,
    prefix: str = wire.DEFAULT_TOPIC_PREFIX,
    writer_of: WriterOf | None = None,
) -> list[AppExplanation]:
    """How each app (or ``app``) decides ``message``; ``writer_of`` gives the writer schemas of Avro values in
    Confluent's wire format (without it such a value raises ``NoWriterSchemas``)."""
    apps = table.apps_for(message.topic) if app is None else tuple(a for a in table.apps if a.name == app)
    report: list[AppExplanation] = []
    for route in apps:
        config = route.config
        types = dict(config.properties)
        reads = body_reads(config)
        from_body = {read.name for read in reads}
        headers = [(k, v) for k, v in message.headers or () if k not in from_body]
        props, _ = decode_headers(headers, types)
        body_props, failures = read_body(message.value, config.format, reads, config.schema, writer_of)
        props.update(body_props)
        entry = AppExplanation(route.name, props)
        entry.sources = {
            name: f"body {config.format} {config.paths[name]}" if name in from_body else f"header {name}"
            for name in sorted(types)
        }
        entry.undecodable = sorted(failures)
        for i, text in enumerate(config.filter):
            entry.filter.append(_evaluate(f"filter[{i}]", text, config.dialect, types, props))
        for level in route.levels:
            for candidate in level:
                if candidate.plan_id is None:
                    evaluation = Evaluation(f"{candidate.group}[{candidate.index}]", "*", True, None)
                else:
                    evaluation = _evaluate(
                        f"{candidate.group}[{candidate.index}]", candidate.label, config.dialect, types, props
                    )
                entry.subscriptions.append((candidate.priority, evaluation))
        router = Router()
        router.writer_of = writer_of
        (decision,) = router.route(table, message, lag, now_ms, only_app=route.name).decisions
        entry.action = decision.action.value
        entry.destination = decision.group
        entry.why = _why(entry, decision.action, decision.reason, config.fairness, config.group_by)
        if decision.action is Action.PENDING and decision.reason == NO_CONSUMER and isinstance(lag, Snapshot):
            absent = [group for owner, group in lag.absent if owner == route.name]
            entry.advice = waiting_advice(prefix, route.name, absent)
        report.append(entry)
    return report


def _why(
    entry: AppExplanation, action: Action, reason: str | None, fairness: str, group_by: str | None
) -> str:
    if action is Action.DEAD_LETTER:
        return f"dead-lettered: {reason}"
    if action is Action.DROP:
        return f"dropped: {reason} (on_expire: drop); counted, written nowhere"
    if action is Action.FILTERED:
        return "no app filter matched: skipped for this app (auto-confirmed)"
    if action is Action.PENDING and reason == CAPACITY:
        return "every group it may go to is at max_unconfirmed: waits on the pending topic for room"
    if action is Action.PENDING and reason == NO_CONSUMER:
        return "no group it may go to has a consumer attached: waits on the pending topic for one"
    if action is Action.PENDING:
        return "app filter passed but no consumer subscription matched: parked on the pending topic"
    matched = [p for p, e in entry.subscriptions if e.value]
    top = max(matched) if matched else None
    tied = sum(1 for p, e in entry.subscriptions if e.value and p == top)
    if tied <= 1:
        return f"highest matching priority {top}: one subscription"
    how = f"rendezvous hash of message group ({group_by})" if group_by else f"fairness {fairness}"
    return f"highest matching priority {top}: {tied} subscriptions tie, chosen by {how}"


def render(report: list[AppExplanation]) -> str:
    if not report:
        return "no app reads this topic\n"
    lines: list[str] = []
    for entry in report:
        lines.append(f"app {entry.app}")
        lines.append(f"  properties: {entry.properties}")
        for name, source in entry.sources.items():
            shown = repr(entry.properties[name]) if name in entry.properties else "absent"
            bad = " (could not be decoded: counted)" if name in entry.undecodable else ""
            lines.append(f"    {name} from {source}: {shown}{bad}")
        if entry.filter:
            for e in entry.filter:
                lines.append(f"  filter {e.label}: {e.expression!r} -> {_outcome(e)}")
        else:
            lines.append("  filter: none (every message)")
        for priority, e in entry.subscriptions:
            lines.append(f"  priority {priority:>4} {e.label}: {e.expression!r} -> {_outcome(e)}")
        target = f" -> {entry.destination}" if entry.destination else ""
        lines.append(f"  decision: {entry.action}{target} ({entry.why})")
        if entry.advice:
            lines.append(f"  what to do: {entry.advice}")
    return "\n".join(lines) + "\n"


def to_document(report: list[AppExplanation], version: int) -> dict[str, object]:
    """The report as plain data (``explain -o json``): the same facts as ``render``, for scripts."""

    def evaluation(e: Evaluation) -> dict[str, object]:
        return {"label": e.label, "expression": e.expression, "match": e.value, "error": e.error}

    return {
        "config_version": version,
        "apps": [
            {
                "app": entry.app,
                "properties": entry.properties,
                "sources": entry.sources,
                "undecodable": entry.undecodable,
                "filter": [evaluation(e) for e in entry.filter],
                "subscriptions": [{"priority": p, **evaluation(e)} for p, e in entry.subscriptions],
                "action": entry.action,
                "destination": entry.destination,
                "why": entry.why,
                "advice": entry.advice,
            }
            for entry in report
        ],
    }


def _outcome(evaluation: Evaluation) -> str:
    if evaluation.error:
        return f"no match (error: {evaluation.error})"
    return "match" if evaluation.value else "no match"
