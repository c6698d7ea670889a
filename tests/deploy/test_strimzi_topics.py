"""``subroute config topics -o strimzi`` validates against the Strimzi ``KafkaTopic`` CRD schema.

The schema comes from the npm package ``@kubernetes-models/strimzi-kafka-operator`` (validators generated from
Strimzi's CRDs, 0.49 and 1.0), installed by ``make test`` into ``tests/deploy/strimzi/node_modules`` from its
lock file and run with Node.js (``validate.mjs``). No broker, no cluster.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from subroute.cli.main import main

HERE = Path(__file__).resolve().parent / "strimzi"

CONFIG = """
apps:
  billing:
    inputs: [orders]
    partitions: 6
    groups:
      vip: {}
      general: {}
  Ranked_App:
    inputs: [orders]
    priority: '1'
    groups:
      g: {}
"""


def _validate(resources: list[dict[str, Any]]) -> dict[str, str | None]:
    node = shutil.which("node")
    assert node is not None, "Node.js is needed for the Strimzi schema check (the machine's node)"
    assert (HERE / "node_modules").is_dir(), "run `make test` (it runs npm ci in tests/deploy/strimzi)"
    done = subprocess.run(
        [node, "validate.mjs"],
        cwd=HERE,
        input=json.dumps(resources),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(rows) == len(resources)
    return {row["name"]: row["errors"] for row in rows}


def _resources(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> list[dict[str, Any]]:
    path = tmp_path / "subscriptions.yaml"
    path.write_text(CONFIG)
    args = ["config", "topics", "-f", str(path), "--topic-prefix", "prod", "-o", "strimzi", *extra]
    assert main(args) == 0
    return list(yaml.safe_load_all(capsys.readouterr().out))


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBROUTE_BOOTSTRAP_SERVERS", "127.0.0.1:1")  # a connection attempt would fail


def test_every_resource_is_a_valid_kafka_topic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    resources = _resources(tmp_path, capsys, "--strimzi-cluster", "main", "--replication-factor", "3")
    assert (
        len(resources) == 1 + 4 + 12
    )  # config; billing: 2 groups, pending, dlq; Ranked_App: g, 9 bands, pending, dlq
    assert _validate(resources) == {r["metadata"]["name"]: None for r in resources}


def test_the_check_refuses_what_the_crd_refuses() -> None:
    """The validator is not vacuous: values the CRD forbids are reported."""
    bad = {
        "apiVersion": "kafka.strimzi.io/v1beta2",
        "kind": "KafkaTopic",
        "metadata": {"name": "bad"},
        "spec": {"partitions": 0, "replicas": "three"},
    }
    errors = _validate([bad])["bad"]
    assert errors is not None and "partitions" in errors and "replicas" in errors
