"""``config lint --sample-topic T``: lint's findings counted on real records of a topic.

Each record's headers are decoded as the router decodes them (the app's declared types; a value that does not
decode is a missing property), then every app's filters and subscriptions are evaluated on them. Per app: how
many records passed the filter, how many of those match no subscription (they would wait on the pending topic
until the configuration changes), which subscriptions no record matched; per finding, how many records it
concerns. The read is bounded (``max_read`` records from the beginning of each partition), so the counts are
of a sample.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from subroute.config.lint import (
    ALWAYS_TRUE,
    NEVER_TRUE,
    OVERLAP,
    SHADOWED,
    WAITS_FOREVER,
    Finding,
    Matchers,
    Ref,
    location,
    matchers,
)
from subroute.config.model import Config
from subroute.kafka import clients
from subroute.ops.settings import Settings
from subroute.routing.properties import decode_headers

Headers = Sequence[tuple[str, bytes | None]]


@dataclass
class AppCounts:
    passed: int = 0  # records that passed the app's filter
    waiting: int = 0  # of those, records that match no subscription
    matched: dict[Ref, int] = field(default_factory=dict)  # records each subscription matched (filter passed)


@dataclass
class SampleCounts:
    topic: str
    read: int = 0
    apps: dict[str, AppCounts] = field(default_factory=dict)
    findings: list[int] = field(
        default_factory=list
    )  # per finding of the report, in order: records concerned

    def document(self, config: Config) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "read": self.read,
            "apps": {
                name: {
                    "passed_filter": c.passed,
                    "wait_forever": c.waiting,
                    "never_matched": [location(name, r, config) for r, n in c.matched.items() if n == 0],
                }
                for name, c in sorted(self.apps.items())
            },
        }


def _concerned(
    finding: Finding, passed: bool, matched: frozenset[Any], props: dict[str, Any], m: Matchers
) -> bool:
    """Whether one record shows the finding."""
    own = finding.refs[0]
    if finding.kind == WAITS_FOREVER:
        return passed and not matched
    if finding.kind == OVERLAP:
        return passed and own in matched and finding.refs[1] in matched
    if finding.kind == SHADOWED:
        return passed and own in matched
    if finding.kind in (NEVER_TRUE, ALWAYS_TRUE):
        if own[0] == "filter":
            return own in m.filter_plan.match(props)
        return own in matched
    return False  # group-split needs two records of one message group: not counted


def count(
    config: Config, findings: Sequence[Finding], topic: str, records: Iterable[Headers]
) -> SampleCounts:
    """Count ``findings`` (of ``config``) and each app's waiting and matched records on ``records``' headers."""
    compiled = {name: matchers(config, app) for name, app in config.apps.items()}
    result = SampleCounts(topic, findings=[0] * len(findings))
    for name, m in compiled.items():
        result.apps[name] = AppCounts(matched=dict.fromkeys(m.refs, 0))
    for headers in records:
        result.read += 1
        seen: dict[str, tuple[bool, frozenset[Any], dict[str, Any]]] = {}
        for name, m in compiled.items():
            props, _ = decode_headers(headers, config.apps[name].properties)
            passed = m.passes(props)
            matched = m.matched(props) if passed else frozenset()
            seen[name] = (passed, matched, props)
            counts = result.apps[name]
            if passed:
                counts.passed += 1
                if not matched:
                    counts.waiting += 1
                for ref in matched:
                    counts.matched[ref] += 1  # type: ignore[index]
        for i, finding in enumerate(findings):
            passed, matched, props = seen[finding.app]
            if _concerned(finding, passed, matched, props, compiled[finding.app]):
                result.findings[i] += 1
    return result


def read_headers(settings: Settings, topic: str, max_read: int) -> Iterable[Headers]:
    """The headers of at most ``max_read`` records of ``topic``, from the beginning (no consumer group)."""
    if max_read <= 0:
        return
    for n, message in enumerate(clients.read_to_end(settings, topic), 1):
        yield cast(Headers, message.headers() or [])  # consumed headers are bytes
        if n >= max_read:
            return
