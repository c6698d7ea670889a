"""``-o table|json|yaml``: one output flag and one printer for every command that prints data.

A command builds its result as plain data (the JSON document, complete: every fact the table shows and more)
and a table renderer for people; ``emit`` prints one or the other on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import yaml

TABLE, JSON, YAML = "table", "json", "yaml"
FORMATS = (TABLE, JSON, YAML)
# earlier spellings, still accepted
ALIASES = {"text": TABLE}


def add_output_argument(
    parser: argparse.ArgumentParser,
    *,
    default: str = TABLE,
    formats: Sequence[str] = FORMATS,
    flags: Sequence[str] = ("-o", "--output"),
    dest: str = "output",
) -> None:
    def parse(raw: str) -> str:
        value = ALIASES.get(raw.lower(), raw.lower())
        if value not in formats:
            raise argparse.ArgumentTypeError(f"{raw!r}: expected one of {', '.join(formats)}")
        return value

    action = parser.add_argument(
        *flags,
        dest=dest,
        type=parse,
        default=default,
        metavar="{" + ",".join(formats) + "}",
        help=f"output format (default {default})",
    )
    action.completer = lambda **_: formats  # type: ignore[attr-defined]  # what shell completion offers


def plain(document: Any) -> Any:
    """``document`` as JSON types only (tuples become lists, other objects text): what json and yaml print."""
    return json.loads(json.dumps(document, default=str))


def to_json(document: Any) -> str:
    return json.dumps(plain(document), indent=2)


def to_yaml(document: Any) -> str:
    return yaml.safe_dump(
        plain(document), sort_keys=False, allow_unicode=True, default_flow_style=False, width=120
    )


def emit(fmt: str, document: Any, table: Callable[[], str]) -> None:
    """Print ``document`` as JSON or YAML, or ``table()`` for people."""
    if fmt == JSON:
        text = to_json(document) + "\n"
    elif fmt == YAML:
        text = to_yaml(document)
    else:
        text = table()
        if text and not text.endswith("\n"):
            text += "\n"
    sys.stdout.write(text)
    sys.stdout.flush()


def render_table(header: Sequence[str], rows: Sequence[Sequence[object]], *, indent: str = "") -> str:
    """Columns padded to their widest cell; numbers right-aligned; None shown as '-'."""
    cells = [[("-" if v is None else str(v)) for v in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    numeric = [
        all(isinstance(row[i], (int, float)) or row[i] is None for row in rows) and bool(rows)
        for i in range(len(header))
    ]
    lines = []
    for row in cells:
        parts = [
            row[i].rjust(widths[i]) if numeric[i] else row[i].ljust(widths[i]) for i in range(len(header))
        ]
        lines.append((indent + "  ".join(parts)).rstrip())
    return "\n".join(lines) + "\n"
