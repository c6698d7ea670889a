"""``subroute config topics``: the topics a file needs, as apply and the workers would create them, for clusters
where clients may not create topics. No broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from subroute.cli.main import main
from subroute.config.topics import kubernetes_name

CONFIG = """
apps:
  billing:
    inputs: [orders]
    partitions: 6
    groups:
      vip: {}
  Ranked_App:
    inputs: [orders]
    priority: '1'
    groups:
      g: {}
"""


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBROUTE_BOOTSTRAP_SERVERS", "127.0.0.1:1")  # a connection attempt would fail


def _topics(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    path = tmp_path / "subscriptions.yaml"
    path.write_text(CONFIG)
    assert main(["config", "topics", "-f", str(path), "--topic-prefix", "prod", *extra]) == 0
    return capsys.readouterr().out


def test_every_topic_with_its_size_and_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = _topics(tmp_path, capsys, "--input-partitions", "3").splitlines()
    assert lines[0] == "prod.config 1 cleanup.policy=compact"
    assert "prod.billing.vip 6" in lines  # the app's own size
    assert "prod.billing.dlq 6 retention.bytes=-1 retention.ms=-1" in lines
    assert "prod.Ranked_App.g.p9 3" in lines  # band topics, sized by --input-partitions
    assert len(lines) == 1 + 3 + (2 + 10)


def test_json_and_the_topic_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    extra = ("-o", "json", "--replication-factor", "3", "--group-retention-ms", "86400000")
    rows = {row["name"]: row for row in json.loads(_topics(tmp_path, capsys, *extra))}
    assert rows["prod.billing.vip"] == {
        "name": "prod.billing.vip",
        "partitions": 6,
        "replication_factor": 3,
        "config": {"retention.ms": "86400000"},
    }
    assert rows["prod.config"]["replication_factor"] == 3


def test_strimzi_resources(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _topics(tmp_path, capsys, "-o", "strimzi", "--strimzi-cluster", "main")
    resources = list(yaml.safe_load_all(out))
    assert len(resources) == 16
    assert {r["kind"] for r in resources} == {"KafkaTopic"}
    assert {r["metadata"]["labels"]["strimzi.io/cluster"] for r in resources} == {"main"}
    by_topic = {r["spec"]["topicName"]: r for r in resources}
    assert by_topic["prod.config"]["spec"]["config"] == {"cleanup.policy": "compact"}
    assert "replicas" not in by_topic["prod.config"]["spec"]  # the broker's default
    names = [r["metadata"]["name"] for r in resources]
    assert len(set(names)) == len(names)
    assert by_topic["prod.billing.vip"]["metadata"]["name"] == "prod.billing.vip"


def test_kubernetes_names_are_lower_case_and_stay_distinct() -> None:
    assert kubernetes_name("prod.orders") == "prod.orders"
    upper, lower = kubernetes_name("prod.Ranked_App.g"), kubernetes_name("prod.ranked-app.g")
    assert upper.startswith("prod.ranked-app.g-") and upper != lower
    assert all(c.islower() or c.isdigit() or c in ".-" for c in upper)
