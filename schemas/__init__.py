"""Avro schemas shipped as package data: config records (and later dead-letter and sample payloads)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from fastavro import parse_schema


@cache
def load_schema(name: str) -> Any:
    """The parsed fastavro schema stored in ``schemas/<name>.avsc`` (parsed once, then shared)."""
    source = resources.files(__name__).joinpath(f"{name}.avsc")
    if not source.is_file():
        raise FileNotFoundError(f"no Avro schema named {name!r} in the schemas package")
    return parse_schema(json.loads(source.read_text(encoding="utf-8")))
