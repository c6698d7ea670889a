"""Where a property is read from in a record's body: the app's body formats and the JSON Pointer (RFC 6901) of
a property's ``path``, with its bounds. Checked offline (``config validate``) and at apply; routing/body.py reads
the values.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from subroute.errors import SubrouteError

FORMATS = ("none", "json", "avro")  # an app's ``format``: none reads headers only
BODY_FORMATS = ("json", "avro")
MAX_PATH_SEGMENTS = 32
MAX_PATH_BYTES = 256
_BAD_ESCAPE = re.compile(r"~(?![01])")


class PointerError(SubrouteError, ValueError):
    """A property's ``path`` is not a JSON Pointer subroute reads."""


def parse_pointer(path: str) -> tuple[str, ...]:
    """The reference tokens of a JSON Pointer (``~1`` is ``/``, ``~0`` is ``~``); raises PointerError."""
    if not isinstance(path, str):
        raise PointerError(f"expected a JSON Pointer such as /customer/id, got {path!r}")
    if not path.startswith("/"):
        raise PointerError(f"{path!r} does not start with '/' (a JSON Pointer such as /customer/id)")
    size = len(path.encode("utf-8", "surrogatepass"))
    if size > MAX_PATH_BYTES:
        raise PointerError(f"path is {size} bytes long; at most {MAX_PATH_BYTES} are allowed")
    segments = path[1:].split("/")
    if len(segments) > MAX_PATH_SEGMENTS:
        raise PointerError(f"path has {len(segments)} segments; at most {MAX_PATH_SEGMENTS} are allowed")
    tokens = []
    offset = 1  # of the segment in ``path``, for the caret
    for segment in segments:
        bad = _BAD_ESCAPE.search(segment)
        if bad is not None:
            caret = " " * (offset + bad.start())
            raise PointerError(f"'~' must be followed by 0 or 1 (~0 is '~', ~1 is '/')\n  {path}\n  {caret}^")
        if any(0xD800 <= ord(c) <= 0xDFFF for c in segment):
            raise PointerError(f"path {path!r} holds a lone surrogate")
        tokens.append(segment.replace("~1", "/").replace("~0", "~"))
        offset += len(segment) + 1
    return tuple(tokens)


ABSENT = object()  # what ``resolve`` gives for a path the document does not have


def is_index(token: str) -> bool:
    """A pointer token that names an array item: a decimal index without leading zeros (no '-')."""
    return token == "0" or (token[:1] in "123456789" and token.isascii() and token.isdigit())


def resolve(document: object, tokens: Sequence[str]) -> object:
    """The node of a decoded body (JSON, or Avro as fastavro decodes it: records and maps as dicts, arrays as
    lists) at ``tokens``, or ``ABSENT``."""
    node = document
    for token in tokens:
        if type(node) is dict:
            node = node.get(token, ABSENT)
        elif type(node) is list:
            if not is_index(token):
                return ABSENT
            index = int(token)
            node = node[index] if index < len(node) else ABSENT
        else:
            return ABSENT
        if node is ABSENT:
            return ABSENT
    return node
