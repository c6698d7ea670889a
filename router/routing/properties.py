"""Message properties: Kafka header values (UTF-8 text) decoded by the app's declared property types.

int is decimal int64, bool is ``true``/``false``, string is UTF-8, float (sql92 apps) is a decimal number.
Undeclared headers are strings. A value that does not decode as its type counts as a missing property (and
the caller counts it): an expression never sees a half-decoded value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType

from subroute.errors import SubrouteError

PropertyValue = int | float | str | bool
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class PropertyDecodeError(SubrouteError, ValueError):
    pass


def _decode_int(raw: bytes) -> int:
    # int() would also accept "1_000", " 7" and "+7"; producers send plain decimal text. bytes.isdigit() is
    # true for ASCII digits only (and false for b"").
    if len(raw) < 19 and raw.isdigit():  # the usual case: at most 18 digits, so well inside int64
        return int(raw)
    negative = raw[:1] == b"-"
    body = raw[1:] if negative else raw
    if not body.isdigit():
        raise PropertyDecodeError(f"not a decimal integer: {raw[:40]!r}")
    # Leading zeros change no value ("0" * 10000 is 0), but int() refuses text past 4300 digits, and past 19
    # significant digits no value fits int64.
    significant = body.lstrip(b"0") or b"0"
    if len(significant) > 19:
        raise PropertyDecodeError(f"outside int64: {raw[:40]!r}")
    value = -int(significant) if negative else int(significant)
    if not INT64_MIN <= value <= INT64_MAX:
        raise PropertyDecodeError(f"outside int64: {raw[:40]!r}")
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


Decoder = Callable[[bytes], PropertyValue]


def decoders_for(types: Mapping[str, str], names: Iterable[str]) -> dict[str, Decoder]:
    """The decoder of each of ``names`` (undeclared ones are strings), for ``decode_with``."""
    return {name: _decoder(types.get(name, "string")) for name in names}


def _decoder(type_name: str) -> Decoder:
    # bytes.decode is the string decoder without a Python frame: UTF-8, strict, as _decode_string.
    return bytes.decode if type_name == "string" else DECODERS[type_name]


_NO_FAILURES: Mapping[str, int] = MappingProxyType({})


def decode_with(
    headers: Sequence[tuple[str, bytes | None]] | None, decoders: Mapping[str, Decoder]
) -> tuple[dict[str, PropertyValue], Mapping[str, int]]:
    """``decode_headers`` for the names of ``decoders`` only: other headers are neither decoded nor counted. The
    failures by header name (a read-only empty mapping when none failed)."""
    props: dict[str, PropertyValue] = {}
    failures: dict[str, int] | None = None
    if not headers:
        return props, _NO_FAILURES
    for name, raw in headers:
        decode = decoders.get(name)
        if decode is None:
            continue
        if raw is None:
            props.pop(name, None)
            continue
        if decode is _decode_int and len(raw) < 19 and raw.isdigit():
            props[name] = int(raw)  # _decode_int's usual case, inline: a Python call costs more than this
            continue
        try:
            props[name] = decode(raw)
        except ValueError:  # PropertyDecodeError, UnicodeDecodeError, int()'s own
            props.pop(name, None)
            if failures is None:
                failures = {}
            failures[name] = failures.get(name, 0) + 1
    return props, failures or _NO_FAILURES


def decode_headers(
    headers: Sequence[tuple[str, bytes | None]] | None,
    types: Mapping[str, str],
    only: Iterable[str] | None = None,
) -> tuple[dict[str, PropertyValue], int]:
    """Properties of one message and how many header values failed to decode.

    Where a header repeats, the last value wins (as most Kafka clients' ``lastHeader``). With ``only``, headers
    of other names are neither decoded nor counted (the router passes the names its expressions read and the
    declared ones).
    """
    if only is not None:
        found, failed = decode_with(headers, decoders_for(types, only))
        return found, sum(failed.values())
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
