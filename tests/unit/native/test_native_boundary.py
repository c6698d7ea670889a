"""The Python–Rust boundary as data (issue 23): the native module reads and makes exactly what
router/routing/native_boundary.py declares, a module built otherwise fails at import by name, the reference
(decisions.py) imports nothing native, and the native plan's gates are the Python plan's (one chooser)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from subroute.expressions import Subscription, compile_plan
from subroute.expressions.plan import plan_entries
from subroute.routing import native_boundary
from subroute.routing.native_boundary import _native
from subroute.routing.native_plan import NativePlan

STUB = Path(native_boundary.__file__).with_name("_native.pyi")


def _module(reads: dict[str, list[str]], makes: dict[str, list[str]]) -> ModuleType:
    module = ModuleType("subroute.routing._native")
    module.READS = reads  # type: ignore[attr-defined]
    module.MAKES = makes  # type: ignore[attr-defined]
    return module


def test_the_built_module_reads_and_makes_what_is_declared() -> None:
    assert native_boundary.mismatches(_native) == []
    assert set(_native.READS) == set(native_boundary.READ)
    assert set(_native.MAKES) == {"RouteResult", "Decision", "InputRecord"}


def test_a_module_built_from_other_sources_fails_by_name() -> None:
    reads = {name: list(keys) for name, keys in _native.READS.items()}
    reads["CompareNode"] = [k if k != "op" else "operator" for k in reads["CompareNode"]]
    del reads["BatchState"]
    makes = {name: list(fields) for name, fields in _native.MAKES.items()}
    makes["Decision"].remove("band")
    with pytest.raises(ImportError) as raised:
        native_boundary.check(_module(reads, makes))
    message = str(raised.value)
    assert "CompareNode is declared with" in message and "'operator'" in message
    assert "BatchState is declared here but not read by the module" in message
    assert "Decision has the fields" in message
    assert "rebuild it" in message
    assert native_boundary.mismatches(_module({}, {})) != []


def test_the_reference_imports_nothing_native() -> None:
    code = (
        "import sys\n"
        "import subroute.routing.decisions\n"
        "print(sorted(m for m in sys.modules if 'native' in m.rsplit('.', 1)[-1]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_stub_documents_every_class_and_method_and_no_tuple_crosses() -> None:
    stub = STUB.read_text()
    assert "tuple[" not in stub
    classes = (
        "Entry",
        "Matches",
        "Candidates",
        "NativePlan",
        "BatchOutcome",
        "NativeDecider",
        "ConsumedBatch",
        "InputSpan",
    )
    for name in (*classes, "AvroBodyReader", "AvroReading"):
        assert hasattr(_native, name) and f"class {name}:" in stub
        assert getattr(_native, name).__module__ == "subroute.routing._native"
    # Each def is followed by its docstring.
    defs = re.findall(r"def \w+\([^)]*\)[^:]*:\n\s*(.)", stub, re.S)
    assert defs and all(first == '"' for first in defs)


def test_the_native_plan_takes_the_python_plans_gates() -> None:
    subs = [
        Subscription(0, 'Region == "eu" && CustomerId == 7', "bmq", {"CustomerId": "int"}),
        Subscription(1, 'Region == "eu" && CustomerId == 8', "bmq", {"CustomerId": "int"}),
        Subscription(2, "a >= 1 AND a < 5", "sql92", {"a": "int"}),
        Subscription(3, "a >= 1.5 AND a < 5", "sql92", {"a": "int"}),  # float bound: not taken natively
        Subscription(4, "x > 2 || y < 1", "bmq", {"x": "int", "y": "int"}),
    ]
    # Crowded range buckets, so that an interval is the better gate of 2 and 3.
    subs += [
        Subscription(f"{op}{k}", f"a {op} {k}", "sql92", {"a": "int"}) for op in ("<", ">=") for k in range(6)
    ]
    python = compile_plan(subs)
    native = NativePlan(subs)
    assert native.entries == python.entries == plan_entries(subs)
    assert [e.gate.kind if e.gate else None for e in python.entries[:5]] == [
        "equality",
        "equality",
        "interval",
        "interval",
        None,
    ]
    assert native.gates()[:5] == ["equality", "equality", "interval", None, None]
    headers = [("a", b"3"), ("Region", b"eu"), ("CustomerId", b"7")]
    expected = {0, 2, 3, "<4", "<5", ">=0", ">=1", ">=2", ">=3"}
    assert native.match(headers) == python.match({"a": 3, "Region": "eu", "CustomerId": 7}) == expected
