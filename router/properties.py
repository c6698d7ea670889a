"""Message properties: Kafka header values (UTF-8 text) decoded by the app's declared property types.

int is decimal int64, bool is ``true``/``false``, string is UTF-8, float (sql92 apps) is a decimal number.
Undeclared headers are strings. A value that does not decode as its type counts as a missing property (and
the caller counts it): an expression never sees a half-decoded value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

PropertyValue = int | float | str | bool
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class PropertyDecodeError(ValueError):
    pass


def _decode_int(raw: bytes) -> int:
    text = raw.decode("ascii")
    # int() would also accept "1_000", " 7" and "+7"; producers send plain decimal text.
    body = text[1:] if text[:1] == "-" else text
    if not body.isdigit() or not body.isascii():
        raise PropertyDecodeError(f"not a decimal integer: {text!r}")
    value = int(text)
    if not INT64_MIN <= value <= INT64_MAX:
        raise PropertyDecodeError(f"outside int64: {text}")
    return value


def _decode_bool(raw: bytes) -> bool:
    if raw == b"true":
        return True
    if raw == b"false":
        return False
    raise PropertyDecodeError(f"not true/false: {raw[:40]!r}")


def _decode_float(raw: bytes) -> float:
    text = raw.decode("ascii")
    if text.strip() != text or text.lower() in ("nan", "inf", "-inf", "+inf", "infinity", "-infinity"):
        raise PropertyDecodeError(f"not a finite decimal number: {text!r}")
    return float(text)


def _decode_string(raw: bytes) -> str:
    return raw.decode("utf-8")


DECODERS: Mapping[str, Callable[[bytes], PropertyValue]] = {
    "int": _decode_int,
    "bool": _decode_bool,
    "float": _decode_float,
    "string": _decode_string,
}


def decode_value(raw: bytes, type_name: str) -> PropertyValue:
    """Decode one header value; raises PropertyDecodeError (including for bad UTF-8)."""
    try:
        return DECODERS[type_name](raw)
    except PropertyDecodeError:
        raise
    except (UnicodeDecodeError, ValueError) as exc:
        raise PropertyDecodeError(str(exc)) from None


def decode_headers(
    headers: Sequence[tuple[str, bytes | None]] | None, types: Mapping[str, str]
) -> tuple[dict[str, PropertyValue], int]:
    """Properties of one message and how many header values failed to decode.

    Where a header repeats, the last value wins (as most Kafka clients' ``lastHeader``).
    """
    props: dict[str, PropertyValue] = {}
    failures = 0
    if not headers:
        return props, failures
    for name, raw in headers:
        if raw is None:
            props.pop(name, None)
            continue
        try:
            props[name] = decode_value(raw, types.get(name, "string"))
        except PropertyDecodeError:
            props.pop(name, None)
            failures += 1
    return props, failures
