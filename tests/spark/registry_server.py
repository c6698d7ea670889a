"""A Confluent Schema Registry of a few schemas on 127.0.0.1, for the wire-format tests (no network).

It answers the two reads the registry client makes to decode a value: ``GET /schemas/ids/{id}`` (a schema by
id, with its type and references) and ``GET /subjects/{subject}/versions/{version}`` (a referenced schema), with
the registry's JSON shapes and its 404 (error code 40403 / 40401). It counts the requests, so a test can see
that schemas are fetched once per id.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit


@dataclass
class Registered:
    schema: Any  # the Avro schema, JSON-shaped (or text for other types)
    schema_type: str = "AVRO"
    references: list[dict[str, Any]] = field(default_factory=list)  # {name, subject, version}

    def body(self) -> dict[str, Any]:
        text = self.schema if isinstance(self.schema, str) else json.dumps(self.schema)
        out: dict[str, Any] = {"schema": text}
        if self.schema_type != "AVRO":  # the registry leaves the type out for Avro
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = self.references
        return out


class RegistryServer:
    def __init__(
        self,
        by_id: dict[int, Registered],
        subjects: dict[tuple[str, int], Registered] | None = None,
    ) -> None:
        self.by_id = by_id
        self.subjects = subjects or {}
        self.requests: Counter[str] = Counter()
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = urlsplit(self.path).path.strip("/").split("/")
                registry.requests["/" + "/".join(path)] += 1
                found: dict[str, Any] | None = None
                code = 40403
                if len(path) == 3 and path[:2] == ["schemas", "ids"] and path[2].isdigit():
                    entry = registry.by_id.get(int(path[2]))
                    found = entry.body() if entry else None
                elif len(path) == 4 and path[0] == "subjects" and path[2] == "versions":
                    subject, version = unquote(path[1]), int(path[3])
                    entry = registry.subjects.get((subject, version))
                    code = 40401
                    if entry is not None:
                        found = {"subject": subject, "version": version, "id": 1000 + version, **entry.body()}
                if found is None:
                    self._send(404, {"error_code": code, "message": "not found"})
                else:
                    self._send(200, found)

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> RegistryServer:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.server.shutdown()
        self.server.server_close()
