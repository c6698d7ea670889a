"""``subroute plan`` on a known history: the exact transition table, the unmatched records, --since/--limit/--prune,
a refused proposal, a proposal reading properties from the JSON values, and a config topic left as it was."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from subroute.cli import main as cli
from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig
from subroute.config.store import read_config
from subroute.spark import plan
from tests.integration.harness import Env, apply, make_env

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

RECORDS = 30
PARTITIONS = 2
BASE_MS = (int(time.time()) - 3600) * 1000  # record i has timestamp BASE_MS + i s

CURRENT = """
apps:
  billing:
    inputs: [INPUT]
    properties: {Amount: int, Region: string}
    groups:
      big:
        subscriptions: ['Amount >= 200']
      small:
        subscriptions: ['Amount < 200']
  audit:
    inputs: [INPUT]
    groups:
      all: {}
"""

# billing: EU is filtered out, the big/small boundary moves from 200 to 150, and 100..149 matches nothing;
# fraud is new (EU only); audit is not named, so it is kept (or deleted with --prune).
PROPOSED = """
apps:
  billing:
    inputs: [INPUT]
    properties: {Amount: int, Region: string}
    filter: ['Region == "US"']
    groups:
      big:
        subscriptions: ['Amount >= 150']
      small:
        subscriptions: ['Amount < 100']
  fraud:
    inputs: [INPUT]
    properties: {Region: string}
    filter: ['Region == "EU"']
    groups:
      eu: {}
"""

BAD = """
apps:
  billing:
    inputs: [INPUT]
    properties: {Amount: int}
    groups:
      big:
        subscriptions: ['Amount >> 5']
"""


def region(i: int) -> str:
    return "EU" if i % 3 == 0 else "US"


@dataclass(frozen=True)
class History:
    env: Env
    proposed: Path
    bad: Path
    version: int


@pytest.fixture(scope="module")
def history(kafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    """30 records over 2 partitions (record i: Amount i*10, Region EU every third, partition i % 2; the value a
    JSON order with the amount and a nested sequence number)."""
    env = make_env(kafka.bootstrap_servers, f"p{uuid.uuid4().hex[:8]}", partitions=PARTITIONS)
    assert apply(env, CURRENT) == 0
    producer = Producer(env.settings.client_config({"linger.ms": 5}))
    for i in range(RECORDS):
        headers = [("Amount", str(i * 10).encode()), ("Region", region(i).encode()), ("Seq", str(i).encode())]
        producer.produce(
            env.input,
            value=json.dumps({"amount": i * 10, "order": {"seq": i}}).encode(),
            partition=i % PARTITIONS,
            headers=headers,
            timestamp=BASE_MS + i * 1000,
        )
    assert producer.flush(30) == 0
    folder = tmp_path_factory.mktemp("plan")
    proposed, bad = folder / "proposed.yaml", folder / "bad.yaml"
    proposed.write_text(PROPOSED.replace("INPUT", env.input))
    bad.write_text(BAD.replace("INPUT", env.input))
    yield History(env, proposed, bad, read_config(env.settings).version)


def _configs(history: History, *, prune: bool = False) -> tuple[Config, Config]:
    current = read_config(history.env.settings)
    desired, errors = plan.load_proposed(str(history.proposed))
    assert errors == []
    proposed, dropped = plan.proposed_config(current, desired, prune=prune)
    assert dropped == ()
    return current, proposed


def test_plan_counts_every_transition(spark_session: SparkSession, history: History) -> None:
    current, proposed = _configs(history)
    result = plan.compute_plan(spark_session, history.env.settings, current, proposed)

    assert result.topics == {history.env.input: RECORDS}
    assert result.source_format in ("kafka", "subroute-kafka")
    assert result.tables == {
        "audit": {("all", "all"): 30},
        "billing": {
            ("big", "(filtered)"): 3,  # EU 21, 24, 27
            ("big", "big"): 7,  # US 20..29
            ("small", "(filtered)"): 7,  # EU 0..18
            ("small", "(pending)"): 4,  # US 10, 11, 13, 14: 100..149 matches no subscription any more
            ("small", "big"): 3,  # US 16, 17, 19
            ("small", "small"): 6,  # US 1..8
        },
        "fraud": {("(app absent)", "(filtered)"): 20, ("(app absent)", "eu"): 10},
    }
    assert result.moved("billing") == 17
    assert result.unmatched == 4
    # Ordered by topic, partition, offset: partition 0 holds the even records, partition 1 the odd ones.
    assert [(e.partition, e.offset, e.apps) for e in result.examples] == [
        (0, 5, ("billing",)),
        (0, 7, ("billing",)),
        (1, 5, ("billing",)),
        (1, 6, ("billing",)),
    ]
    assert [dict(e.headers)["Seq"] for e in result.examples] == [b"10", b"14", b"11", b"13"]
    assert dict(result.examples[0].headers) == {"Amount": b"100", "Region": b"US", "Seq": b"10"}

    result.proposed, result.config_topic = "proposed.yaml", history.env.settings.config_topic
    text = plan.format_plan(result)
    assert _parse_tables(text) == result.tables
    assert "app billing: 30 record(s), 17 change destination" in text
    assert "  ~ small -> (pending): 4" in text
    assert "\n    all -> all: 30\n" in text
    assert "unmatched: 4 record(s) would match no consumer subscription" in text
    assert f"  {history.env.input}/0/5 [billing] Amount=100 Region=US Seq=10" in text
    assert "empty lag snapshot" in text and "round-robin splits are indicative" in text
    assert f"nothing was written to {history.env.settings.config_topic}" in text


def test_plan_reads_body_properties_from_the_values(spark_session: SparkSession, history: History) -> None:
    """A proposed app reading Amount and Seq from the JSON value (format: json, path:) is routed on them, as the
    worker would route it (routing/body.py)."""
    current = read_config(history.env.settings)
    shipping = AppConfig(
        name="shipping",
        inputs=(history.env.input,),
        format="json",
        properties={"Amount": "int", "Seq": "int"},
        paths={"Amount": "/amount", "Seq": "/order/seq"},
        filter=("Seq % 2 == 0",),
    )
    big = GroupConfig("shipping", "big", (SubscriptionConfig("Amount >= 150", priority=1),))
    rest = GroupConfig("shipping", "rest", ())
    proposed = Config(
        current.version,
        {**current.apps, "shipping": shipping},
        {**current.groups, ("shipping", "big"): big, ("shipping", "rest"): rest},
    )
    result = plan.compute_plan(spark_session, history.env.settings, current, proposed)
    assert result.tables["shipping"] == {
        ("(app absent)", "(filtered)"): 15,  # odd sequence numbers
        ("(app absent)", "big"): 7,  # 16, 18, ..., 28: amounts 160..280
        ("(app absent)", "rest"): 8,  # 0, 2, ..., 14
    }


def test_plan_command_since_limit_prune(
    spark_session: SparkSession, history: History, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI on the shared session: --since keeps records 20..29, --limit 5 the most recent five (25..29),
    --prune deletes audit."""
    env = history.env
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((BASE_MS + 20_000) / 1000)) + "Z"
    args = ["--input", env.input, "--since", since, "--limit", "5", "--prune"]
    code = cli(["plan", "-f", str(history.proposed), *env.common(), *args])
    out = capsys.readouterr().out
    assert code == 0, out
    assert _parse_tables(out) == {
        "audit": {("all", "(app absent)"): 5},
        "billing": {("big", "(filtered)"): 1, ("big", "big"): 4},  # 27 is EU; 25, 26, 28, 29 stay big
        "fraud": {("(app absent)", "(filtered)"): 4, ("(app absent)", "eu"): 1},
    }
    assert "input:    5 record(s) since " in out and "the 5 most recent per topic" in out
    assert "--prune" in out
    assert "unmatched: none" in out
    assert spark_session.sparkContext._jsc is not None  # the shared session was reused, not stopped

    assert cli(["plan", "-f", str(history.proposed), *env.common(), *args, "-o", "json"]) == 0
    document = json.loads(capsys.readouterr().out)  # the same plan as data
    assert document["records"] == 5 and document["prune"] is True and document["written"] is False
    assert {"from": "big", "to": "(filtered)", "records": 1} in document["apps"]["billing"]["transitions"]
    assert document["apps"]["billing"]["moved"] == 1 and document["unmatched"] == 0


def test_invalid_proposal_exits_2_with_a_caret(history: History, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli(["plan", "-f", str(history.bad), *history.env.common()])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert "apps.billing.groups.big.subscriptions[0].expression: unexpected '>'" in captured.err
    assert "  Amount >> 5\n          ^" in captured.err
    assert "nothing was planned" in captured.err


def test_config_topic_is_unchanged(history: History) -> None:
    """Runs after the plans above (file order): they only read the config topic."""
    after = read_config(history.env.settings)
    assert after.version == history.version
    assert set(after.apps) == {"billing", "audit"}
    assert after.groups[("billing", "big")].subscriptions[0].expression == "Amount >= 200"


# --- pure parts -----------------------------------------------------------------------------------------------


def test_parse_since() -> None:
    assert plan.parse_since("1700000000000") == 1_700_000_000_000
    assert plan.parse_since("2023-11-14T22:13:20Z") == 1_700_000_000_000
    assert plan.parse_since("2023-11-14T22:13:20") == 1_700_000_000_000  # naive: UTC
    assert plan.parse_since("2023-11-15T00:13:20+02:00") == 1_700_000_000_000
    with pytest.raises(ValueError, match="--since"):
        plan.parse_since("yesterday")


def test_proposed_config_keeps_or_prunes_and_drops_groups_that_no_longer_fit() -> None:
    from subroute.config.yaml import parse_yaml

    current_values = parse_yaml(CURRENT.replace("INPUT", "orders")).values
    current = plan.proposed_config(Config(version=7), current_values, prune=True)[0]
    # The proposal makes billing's Amount a string and names only the big group.
    desired = parse_yaml(
        "apps:\n  billing:\n    inputs: [orders]\n    properties: {Amount: string, Region: string}\n"
        "    groups:\n      big: {subscriptions: ['Region == \"US\"']}\n"
    ).values
    kept, dropped = plan.proposed_config(current, desired, prune=False)
    assert set(kept.apps) == {"billing", "audit"}
    assert set(kept.groups) == {("billing", "big"), ("audit", "all")}
    assert dropped == ("group/billing/small",)  # 'Amount < 200' no longer type-checks
    assert kept.version == 7
    pruned, dropped = plan.proposed_config(current, desired, prune=True)
    assert set(pruned.apps) == {"billing"} and set(pruned.groups) == {("billing", "big")}
    assert dropped == ()


def test_input_topics_resolve_names_and_regexes() -> None:
    from subroute.config.yaml import parse_yaml

    values = parse_yaml("apps:\n  a: {inputs: [orders, '^pay-', gone]}\n").values
    config = plan.proposed_config(Config(), values, prune=True)[0]
    found, missing = plan.input_topics(
        [config], ["orders", "pay-eu", "pay-us", "other", "__consumer_offsets"]
    )
    assert found == ["orders", "pay-eu", "pay-us"]
    assert missing == ["gone"]


_APP = re.compile(r"^app (\S+): \d+ record\(s\)")
_ROW = re.compile(r"^  [ ~] (.+?) +-> (.+): (\d+)$")


def _parse_tables(text: str) -> dict[str, dict[tuple[str, str], int]]:
    """The printed per-app tables back as data."""
    tables: dict[str, dict[tuple[str, str], int]] = {}
    app = None
    for line in text.splitlines():
        if match := _APP.match(line):
            app = match.group(1)
            tables[app] = {}
        elif app is not None and (match := _ROW.match(line)):
            tables[app][(match.group(1), match.group(2))] = int(match.group(3))
        elif not line.strip():
            app = None
    return tables


def test_route_records_summarises_a_partition() -> None:
    """The mapInArrow function alone: one summary batch per partition, expiration with --evaluate-at now."""
    import pyarrow as pa

    from subroute.config.yaml import parse_yaml

    text = "apps:\n  a:\n    inputs: [t]\n    properties: {N: int}\n    expiration: 1m\n    groups:\nGROUPS"
    current = plan.proposed_config(
        Config(),
        parse_yaml(text.replace("GROUPS", "      g: {subscriptions: ['N > 0']}\n")).values,
        prune=True,
    )[0]
    proposed = plan.proposed_config(
        Config(),
        parse_yaml(text.replace("GROUPS", "      h: {subscriptions: ['N > 1']}\n")).values,
        prune=True,
    )[0]
    batch = pa.RecordBatch.from_pydict(
        {
            "topic": ["t"] * 4,
            "partition": [0] * 4,
            "offset": [0, 1, 2, 3],
            "ts_ms": [1_000, 1_000, 1_000, None],
            "headers": [[{"key": "N", "value": str(n).encode()}] for n in (0, 1, 2, 1)],
        }
    )

    def summary(at_ms: int | None) -> dict[str, list[object]]:
        (out,) = plan.route_records(current, proposed, at_ms, examples=1)(iter([batch]))
        return out.to_pydict()

    arrival = summary(None)
    transitions = {
        (a, o, n): c
        for k, a, o, n, c in zip(*(arrival[f] for f in ("kind", "app", "old", "new", "count")), strict=True)
        if k == "transition"
    }
    assert transitions == {("a", "(pending)", "(pending)"): 1, ("a", "g", "(pending)"): 2, ("a", "g", "h"): 1}
    assert arrival["count"][arrival["kind"].index("topic")] == 4
    assert arrival["count"][arrival["kind"].index("unmatched")] == 3
    assert arrival["kind"].count("example") == 1  # capped at --examples
    assert arrival["offset"][arrival["kind"].index("example")] == 0

    # Two minutes after: the three timestamped records are expired; the one without a timestamp never is.
    later = summary(121_000)
    dead = [
        (o, n, c)
        for k, o, n, c in zip(later["kind"], later["old"], later["new"], later["count"], strict=True)
    ]
    assert ("(dead-letter: expired)", "(dead-letter: expired)", 3) in dead
    assert ("g", "(pending)", 1) in dead
