"""``config lint --sample-topic``: lint's findings counted on records read from a real Kafka topic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from subroute.cli import main as cli
from tests.integration.harness import make_env, produce

pytestmark = pytest.mark.kafka

CONFIG = """
apps:
  shop:
    inputs: [INPUT]
    properties: {x: int, t: string}
    filter: ['x >= 0']
    presence: ignored
    groups:
      low: {subscriptions: [{expression: 'x < 5', priority: 1}]}
      mid: {subscriptions: [{expression: 'x < 10', priority: 1}]}
      bulk: {subscriptions: [{expression: 't == "BULK" && x > 100', priority: 1}]}
"""


def test_findings_are_counted_on_the_records_of_a_topic(
    kafka, unique, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    # 3 in low and mid (overlap), 2 in mid only, 4 pass the filter and match nothing, 1 fails the filter,
    # 1 without x: filtered too (a missing property fails the filter)
    messages: list[dict[str, object]] = [{"x": 1}, {"x": 2}, {"x": 3}, {"x": 7}, {"x": 8}]
    messages += [{"x": 50}, {"x": 60}, {"x": 70}, {"x": 200, "t": "other"}, {"x": -1}, {"t": "BULK"}]
    produce(env, messages)
    path = tmp_path / "subscriptions.yaml"
    path.write_text(CONFIG.replace("INPUT", env.input))
    args = ["config", "lint", "-f", str(path), "--sample-topic", env.input, *env.common()]

    assert cli([*args, "-o", "json"]) == 1
    document = json.loads(capsys.readouterr().out)
    sample = document["sample"]
    assert sample["read"] == len(messages)
    shop = sample["apps"]["shop"]
    assert shop["passed_filter"] == 9 and shop["wait_forever"] == 4
    assert shop["never_matched"] == ["apps.shop.groups.bulk.subscriptions[0]"]
    by_kind = {(f["kind"], f["where"]): f.get("records") for f in document["findings"]}
    assert by_kind[("waits-forever", "apps.shop")] == 4
    assert by_kind[("overlap", "apps.shop.groups.low.subscriptions[0]")] == 3

    # bounded: --max-read stops the read
    assert cli([*args, "-o", "json", "--max-read", "4"]) == 1
    assert json.loads(capsys.readouterr().out)["sample"]["read"] == 4

    assert cli(args) == 1
    out = capsys.readouterr().out
    assert "4 would wait forever" in out and "never matched: apps.shop.groups.bulk.subscriptions[0]" in out
