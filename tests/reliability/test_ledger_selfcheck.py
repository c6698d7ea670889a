"""The ledger must catch what it is there to catch: a lost record, a misrouted one, a record for a filtered
message, a duplicate, an altered value, a message stuck pending. No broker: synthetic records."""

from __future__ import annotations

from subroute import wire
from subroute.config.model import AppConfig, Config, GroupConfig
from subroute.config.yaml import parse_yaml
from tests.reliability.ledger import Ledger, Output, Sent

CONFIG = """
apps:
  a:
    inputs: [in]
    properties: {N: int}
    filter: ['N != 3']
    groups:
      even: {subscriptions: [{expression: 'N % 2 == 0', priority: 5}]}
      odd: {subscriptions: [{expression: 'N % 2 == 1 && N < 5', priority: 5}]}
"""
PREFIX = "p"


def config() -> Config:
    parsed = parse_yaml(CONFIG)
    assert not parsed.errors
    apps = {v.name: v for v in parsed.values.values() if isinstance(v, AppConfig)}
    groups = {(v.app, v.name): v for v in parsed.values.values() if isinstance(v, GroupConfig)}
    return Config(1, apps, groups)


def sent(n: int) -> Sent:
    return Sent("in", 0, n, b"k", f"m{n}".encode(), (("N", str(n).encode()),), 1_000)


def routed(s: Sent, topic: str, group: str | None, label: str | None, value: bytes | None = None) -> Output:
    headers = [*s.headers, (wire.SOURCE, s.source.encode()), (wire.APP, b"a")]
    if group:
        headers += [(wire.GROUP, group.encode()), (wire.SUBSCRIPTION, (label or "").encode())]
    headers += [(wire.CONFIG_VERSION, b"1"), (wire.ROUTED_AT, b"2000")]
    return Output(topic, 0, 0, s.key, s.value if value is None else value, tuple(headers))


def good() -> tuple[list[Sent], list[Output]]:
    inputs = [sent(n) for n in range(8)]
    outputs = []
    for s in inputs:
        n = s.offset
        if n == 3:
            continue  # filtered
        if n % 2 == 0:
            outputs.append(routed(s, "p.a.even", "even", "N % 2 == 0"))
        elif n < 5:
            outputs.append(routed(s, "p.a.odd", "odd", "N % 2 == 1 && N < 5"))
        else:
            outputs.append(routed(s, "p.a.pending", None, None))
    return inputs, outputs


def ledger(inputs: list[Sent]) -> Ledger:
    return Ledger(PREFIX, {0: Config(), 1: config()}, inputs)


def test_a_correct_run_is_clean() -> None:
    inputs, outputs = good()
    report = ledger(inputs).verify(outputs, now_ms=3000)
    report.assert_clean()
    assert report.fates == {"routed": 5, "pending": 2, "filtered": 1}
    assert ledger(inputs).cross_check(outputs) == []


def test_it_catches_each_kind_of_fault() -> None:
    inputs, outputs = good()
    lost = ledger(inputs).verify(outputs[1:], now_ms=3000)
    assert [p.source for p in lost.lost] == ["in/0/0"]

    wrong = [routed(inputs[0], "p.a.odd", "odd", "N % 2 == 1 && N < 5"), *outputs[1:]]
    assert len(ledger(inputs).verify(wrong, now_ms=3000).misrouted) == 1

    label = [routed(inputs[0], "p.a.even", "even", "N > 0"), *outputs[1:]]
    assert len(ledger(inputs).verify(label, now_ms=3000).misrouted) == 1

    filtered = [*outputs, routed(inputs[3], "p.a.odd", "odd", "N % 2 == 1 && N < 5")]
    assert len(ledger(inputs).verify(filtered, now_ms=3000).unexpected) == 1

    twice = ledger(inputs).verify([*outputs, outputs[0]], now_ms=3000)
    assert (twice.duplicates, twice.duplicated_inputs, twice.problems) == (1, 1, [])

    altered = [routed(inputs[0], "p.a.even", "even", "N % 2 == 0", value=b"other"), *outputs[1:]]
    assert len(ledger(inputs).verify(altered, now_ms=3000).altered) == 1

    stuck = [*outputs[:-1], routed(inputs[7], "p.a.pending", None, None)]
    stuck[0] = routed(inputs[0], "p.a.pending", None, None)  # version 1 routes N=0 to even
    report = ledger(inputs).verify(stuck, now_ms=3000)
    assert len(report.misrouted) == 1

    unknown = [*outputs, routed(sent(99), "p.a.even", "even", "N % 2 == 0")]
    assert len(ledger(inputs).verify(unknown, now_ms=3000).unexpected) == 1
