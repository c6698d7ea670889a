"""Routing on properties read from Avro record values (issue 25) on a real broker and a real Schema Registry
(Apicurio, the session's ``schema_registry``): values in Confluent's wire format written by confluent-kafka's own
AvroSerializer, schemaless values read with the app's schema file, and a registry that cannot be read while
records arrive (they wait, the worker says so, and every one is routed once when it answers)."""

from __future__ import annotations

import contextlib
import io
import json
import select
import socket
import socketserver
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import fastavro
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from subroute import wire
from subroute.cli.main import main as cli
from subroute.kafka.clients import read_topics_to_end
from subroute.kafka.schema_registry import RegistrySettings
from subroute.ops.metrics import RouterMetrics
from subroute.worker.checkpoint import GUARANTEES
from tests.integration.harness import BackgroundWorker, Env, apply, make_env, produce_raw, read, run_worker

pytestmark = pytest.mark.kafka

ORDER: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "namespace": "subroute.test",
    "fields": [
        {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [{"name": "id", "type": "long"}]}},
        {"name": "price", "type": "long"},
        {"name": "qty", "type": "int"},
        {"name": "sku", "type": ["null", "string"], "default": None},
    ],
}  # fmt: skip

FRAMED_CONFIG = """
apps:
  orders:
    inputs: [INPUT]
    dialect: sql92
    format: avro
    properties:
      CustomerId: {type: int, path: /customer/id}
      Sku: {type: string, path: /sku}
      Price: {type: int, path: /price}
      Qty: {type: int, path: /qty}
    priority: Price * Qty
    groups:
      vip: {subscriptions: [{expression: 'CustomerId = 7', priority: 10}]}
      books: {subscriptions: [{expression: "Sku LIKE 'BOOK-%'", priority: 5}]}
      rest: {}
"""


def order(customer: int, price: int, qty: int, sku: str | None = None) -> dict[str, Any]:
    return {"customer": {"id": customer}, "price": price, "qty": qty, "sku": sku}


# (the order, where it goes: (group, band))
ORDERS: list[tuple[dict[str, Any], tuple[str, int]]] = [
    (order(7, 3, 2, "BOOK-1"), ("vip", 6)),
    (order(8, 100, 1, "BOOK-2"), ("books", 9)),
    (order(9, 0, 5, "PEN"), ("rest", 0)),
    (order(7, 1, 4), ("vip", 4)),
    (order(10, 3, 3), ("rest", 9)),
]


def serializer(registry_url: str) -> AvroSerializer:
    return AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(ORDER))


def framed_values(env: Env, registry_url: str, orders: list[dict[str, Any]]) -> list[bytes]:
    serialize = serializer(registry_url)
    context = SerializationContext(env.input, MessageField.VALUE)
    values = [serialize(o, context) for o in orders]
    assert all(v is not None and v[0] == 0 for v in values)  # Confluent's wire format: magic byte 0
    return [v for v in values if v is not None]


def decode_errors(metrics: RouterMetrics) -> float:
    """subroute_property_decode_errors_total of app orders, whatever other labels it has."""
    (family,) = metrics.property_decode_errors.collect()
    return sum(
        s.value for s in family.samples if s.name.endswith("_total") and s.labels.get("app") == "orders"
    )


def destinations(env: Env) -> dict[bytes, tuple[str, int]]:
    """Where each record went, by key; each record at most once. The 30 band topics in one read."""
    where = {
        wire.band_topic(env.prefix, "orders", group, band): (group, band)
        for group in ("vip", "books", "rest")
        for band in range(wire.LOWEST_BAND, wire.HIGHEST_BAND + 1)
    }
    found: dict[bytes, tuple[str, int]] = {}
    for message in read_topics_to_end(env.settings, list(where)):
        key = message.key()
        assert key is not None and key not in found, key
        found[key] = where[message.topic() or ""]
    return found


def test_the_worker_routes_confluent_framed_avro_by_the_writer_schema_of_its_id(
    kafka: Any, unique: str, schema_registry: str, capsys: pytest.CaptureFixture[str]
) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, FRAMED_CONFIG) == 0
    values = framed_values(env, schema_registry, [o for o, _ in ORDERS])
    unknown_id = b"\x00" + (2**31 - 5).to_bytes(4, "big") + values[0][5:]  # an id the registry does not have
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
        (f"k{i}".encode(), value, []) for i, value in enumerate(values)
    ]
    records += [
        (b"unknown", unknown_id, [("CustomerId", b"7")]),
        (b"garbage", b"\x01junk", []),
        (b"null", None, []),
    ]
    produce_raw(env, records)
    metrics = run_worker(env, schema_registry=RegistrySettings.of(schema_registry))

    wanted = {f"k{i}".encode(): where for i, (_, where) in enumerate(ORDERS)}
    wanted.update({b"unknown": ("rest", 0), b"garbage": ("rest", 0), b"null": ("rest", 0)})
    assert destinations(env) == wanted
    assert read(env, wire.pending_topic(env.prefix, "orders")) == []
    assert decode_errors(metrics) == 3 * 4  # each body property, once
    assert metrics.schema_registry_unavailable._value.get() == 0

    # explain reads a stored framed record through the same registry (and says which flag it lacks without it)
    capsys.readouterr()
    where = ["--topic", env.input, "--partition", "0", "--offset", "0", *env.common()]
    assert cli(["explain", *where, "--schema-registry-url", schema_registry, "-o", "json"]) == 0
    [explained] = json.loads(capsys.readouterr().out)["apps"]
    assert explained["properties"] == {"CustomerId": 7, "Sku": "BOOK-1", "Price": 3, "Qty": 2}
    assert explained["sources"]["CustomerId"] == "body avro /customer/id"
    assert cli(["explain", *where]) == 2
    assert "--schema-registry-url" in capsys.readouterr().err


def test_the_worker_routes_schemaless_avro_with_the_app_schema_file(
    kafka: Any, unique: str, tmp_path: Path
) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    (tmp_path / "order.avsc").write_text(json.dumps(ORDER))
    config = FRAMED_CONFIG.replace(
        "    format: avro\n", f"    format: avro\n    schema: {tmp_path / 'order.avsc'}\n"
    )
    config = config.replace("{type: int, path: /price}", "{path: /price}")  # the type from the schema
    assert apply(env, config) == 0
    parsed = fastavro.parse_schema(ORDER)

    def plain(o: dict[str, Any]) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, o)
        return out.getvalue()

    produce_raw(
        env, [(f"k{i}".encode(), plain(o), []) for i, (o, _) in enumerate(ORDERS)] + [(b"bad", b"\x02", [])]
    )
    metrics = run_worker(env)  # no registry needed
    wanted = {f"k{i}".encode(): where for i, (_, where) in enumerate(ORDERS)} | {b"bad": ("rest", 0)}
    assert destinations(env) == wanted
    assert decode_errors(metrics) == 4


class RegistryGate:
    """A TCP forwarder in front of the registry, on a port of its own: closed, connections to it are refused
    (and those open are cut), as when the registry is down; opened again on the same port, it forwards."""

    def __init__(self, registry_url: str) -> None:
        parts = urlsplit(registry_url)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 80)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}{parts.path}"
        self.server: socketserver.ThreadingTCPServer | None = None
        self.open_sockets: set[socket.socket] = set()

    def open(self) -> None:
        gate = self

        class Forward(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                upstream = socket.create_connection(gate.target)
                pair = [self.request, upstream]
                gate.open_sockets.update(pair)
                try:
                    while True:
                        readable, _, _ = select.select(pair, [], [], 1.0)
                        for sock in readable:
                            data = sock.recv(65536)
                            if not data:
                                return
                            (upstream if sock is self.request else self.request).sendall(data)
                except OSError:
                    return
                finally:
                    upstream.close()

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", self.port), Forward)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        for sock in list(self.open_sockets):
            with contextlib.suppress(OSError):  # closed already
                sock.shutdown(socket.SHUT_RDWR)
        self.open_sockets.clear()


def wait_for(condition: Any, what: str, limit: float = 90.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {limit:g} s: {what}")
        time.sleep(0.2)


@pytest.mark.parametrize("guarantee", GUARANTEES)
def test_records_wait_while_the_registry_cannot_be_read_and_are_routed_once_when_it_answers(
    kafka: Any, unique: str, schema_registry: str, guarantee: str
) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, FRAMED_CONFIG) == 0
    values = framed_values(env, schema_registry, [o for o, _ in ORDERS])  # registered while it answers
    gate = RegistryGate(schema_registry)  # closed: nothing listens on its port
    settings = RegistrySettings.of(gate.url, {"max.retries": "0"})
    with BackgroundWorker(env, schema_registry=settings, guarantee=guarantee) as background:
        produce_raw(env, [(f"k{i}".encode(), value, []) for i, value in enumerate(values)])
        metrics = background.metrics
        wait_for(
            lambda: metrics.schema_registry_unavailable._value.get() == 1, "the worker reports the registry"
        )
        assert not background.worker.ready()
        assert (
            background.worker.registry_trouble is not None and gate.url in background.worker.registry_trouble
        )
        assert metrics.schema_registry_errors._value.get() >= 1
        assert destinations(env) == {}  # nothing routed as if its fields were absent
        assert decode_errors(metrics) == 0
        gate.open()
        try:
            wait_for(
                lambda: len(destinations(env)) == len(ORDERS), "every record routed once the registry answers"
            )
            wait_for(background.worker.ready, "the worker ready again")
        finally:
            gate.close()
    assert destinations(env) == {f"k{i}".encode(): where for i, (_, where) in enumerate(ORDERS)}
    assert metrics.schema_registry_unavailable._value.get() == 0
    assert decode_errors(metrics) == 0
