"""``subroute dev schema-registry``: a real Schema Registry in the foreground, its URL line first, gone after SIGTERM."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

ROOT = Path(__file__).resolve().parents[2]
ORDER = '{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}'


def test_dev_schema_registry_prints_its_url_first_serves_confluents_api_and_cleans_up() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "subroute.cli", "dev", "schema-registry", "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        match = re.fullmatch(r"url (http://127\.0\.0\.1:\d+/apis/ccompat/v7)\n", first)
        assert match, f"first stdout line: {first!r}"
        client = SchemaRegistryClient({"url": match.group(1)})
        schema_id = client.register_schema("orders-value", Schema(ORDER, "AVRO"))
        assert client.get_schema(schema_id).schema_str.replace(" ", "") == ORDER.replace(" ", "")
        assert client.get_subjects() == ["orders-value"]
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr
    log = re.search(r"schema registry log: (\S+)", stderr)
    assert log, stderr
    assert not Path(log.group(1)).parent.exists(), "the registry's directory outlived it"
