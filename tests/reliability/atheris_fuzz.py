"""libFuzzer (atheris) over both expression parsers and the evaluator; run by test_parser_fuzz.py.

    python tests/reliability/atheris_fuzz.py -runs=20000 -max_len=512

Any exception other than ``ExpressionError`` from compile, or any exception from evaluation, is a crash.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports():
    from subroute import expressions

PROPS = [
    {},
    {"a": 1, "b": -(2**63), "s": "x", "f": True, "c": 1.5},
    {"a": 2**64, "b": "1", "s": 7, "f": "true", "c": float("nan")},
    {"a": float("inf"), "s": "%_\\", "f": None},
]


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    dialect = "bmq" if fdp.ConsumeBool() else "sql92"
    text = fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes())
    try:
        compiled = expressions.compile(text, dialect=dialect)
    except expressions.ExpressionError:
        return
    for props in PROPS:
        compiled.evaluate(props)  # type: ignore[arg-type]
        compiled.matches(props)  # type: ignore[arg-type]


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
