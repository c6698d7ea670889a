"""Fuzzing both expression parsers (hypothesis; atheris too, when it is installed).

Properties, for ``bmq`` and ``sql92``:
* only ``ExpressionError`` ever leaves ``subroute.expressions.compile`` (any text, any declared types);
* evaluation never raises, for any property map (every value type, out-of-range ints, NaN, infinities,
  huge strings), neither through ``Expression.evaluate``/``matches`` nor through a shared ``Plan``;
* no input text is ever executed as code: texts carrying ``__import__('os').system(...)``, ``exec``/``eval``,
  f-string and ``str.format`` tricks, dunder attribute chains, as identifiers, string literals or raw text,
  compile to an ``ExpressionError`` or to a value, and a canary (a module-level function those texts call,
  and a file ``os.system`` would create) never fires;
* the compiler never hands user text to ``eval``/``exec``/``compile``: an AST scan of ``expressions/`` finds
  no such call at all.

The atheris run (``atheris_fuzz.py``, 20,000 inputs, in a subprocess because libFuzzer owns the process)
runs only when ``import atheris`` works; ``atheris`` 3.0.0 installs from a wheel on Python 3.11 here, but it is
not a declared dev dependency (``pyproject.toml`` is outside this suite), so elsewhere it is skipped.
"""

from __future__ import annotations

import ast
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from subroute import expressions

ROOT = Path(__file__).resolve().parents[2]
DIALECTS = ("bmq", "sql92")
TYPES = {"a": "int", "b": "int", "s": "string", "f": "bool"}
SQL_TYPES = {**TYPES, "c": "float"}

CANARY_CALLS: list[object] = []


def trip(*args: object) -> int:
    """What an injected payload would call; it must never run."""
    CANARY_CALLS.append(args)
    return 1


CANARY_FILE = Path(tempfile.gettempdir()) / f"subroute-canary-{os.getpid()}"
MODULE = __name__

PAYLOADS = [
    f"__import__('os').system('touch {CANARY_FILE}')",
    f'__import__("os").system("touch {CANARY_FILE}")',
    f"__import__('{MODULE}').trip()",
    f'__import__("{MODULE}").trip()',
    f"exec(\"__import__('{MODULE}').trip()\")",
    f"eval('__import__(\"{MODULE}\").trip()')",
    "().__class__.__base__.__subclasses__()",
    "a.__class__.__init__.__globals__",
    f"f'{{__import__(\"{MODULE}\").trip()}}'",
    f"f\"{{__import__('{MODULE}').trip()}}\"",
    "'{0.__class__}'.format(a)",
    "'{a.__class__.__init__.__globals__[trip]}'.format(a=1)",
    "lambda: 1",
    "[x for x in ().__class__.__bases__]",
    f"a == 1 or __import__('{MODULE}').trip()",
    f"a == 1 || __import__('{MODULE}').trip() == 1",
    f"s == '{{__import__(\"{MODULE}\").trip()}}'",
    f"s == \"{{__import__('{MODULE}').trip()}}\"",
    f"s = '\\'); __import__(\"{MODULE}\").trip(); (\\''",
    f's == "\\"); __import__(\'{MODULE}\').trip(); (\\""',
    "__builtins__",
    "__import__",
    "s LIKE '%' ESCAPE '\\'",
    "a IN ('x') OR exec",
    "breakpoint()",
    "open('/etc/passwd').read()",
    "globals()['trip']()",
    "a; import os",
    "a\nimport os",
    "a == 1 #",
    "a == 1 -- comment",
    "a == 1 /* comment */",
]


def _compile(text: str, dialect: str, types: dict[str, str] | None) -> expressions.Expression | None:
    """Compile; an ExpressionError is a fine answer, anything else is a bug."""
    try:
        return expressions.compile(text, dialect=dialect, types=types)
    except expressions.ExpressionError:
        return None


property_values = st.one_of(
    st.integers(),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([2**63, -(2**63) - 1, 2**200, 0, -1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=50),
    st.sampled_from(["", "%", "_", "\\", "\x00", "é" * 1000, "a" * 100_000]),
    st.booleans(),
)
property_maps = st.dictionaries(
    st.sampled_from(["a", "b", "c", "s", "t", "f", "x", "A"]), property_values, max_size=6
)

# Text built from the dialects' own tokens reaches deeper into the parsers than random characters.
TOKENS = [
    "a",
    "b",
    "c",
    "s",
    "f",
    "x",
    "(",
    ")",
    "!",
    "-",
    "+",
    "*",
    "/",
    "%",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "&&",
    "||",
    "=",
    "<>",
    "AND",
    "OR",
    "NOT",
    "BETWEEN",
    "IN",
    "LIKE",
    "ESCAPE",
    "IS",
    "NULL",
    "TRUE",
    "FALSE",
    "true",
    "false",
    "exists",
    "0",
    "1",
    "-1",
    "9223372036854775807",
    "9223372036854775808",
    "1.5",
    "1e308",
    "1e999",
    "'x'",
    "'%'",
    "'\\'",
    '"y"',
    '"\\""',
    ",",
    " ",
    "\t",
    "\n",
    "'",
    '"',
]
token_text = st.lists(st.sampled_from(TOKENS), max_size=40).map(" ".join)
any_text = st.one_of(st.text(max_size=300), token_text, st.sampled_from(PAYLOADS))

FUZZ = settings(
    max_examples=int(os.environ.get("SUBROUTE_FUZZ_EXAMPLES", "600")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@FUZZ
@given(any_text, st.sampled_from(DIALECTS), st.sampled_from([None, TYPES, SQL_TYPES]))
@example("(" * 100_000 + "a" + ")" * 100_000, "sql92", None)
@example("NOT " * 50_000 + "a", "sql92", None)
@example("- " * 50_000 + "1 = 1", "sql92", None)
@example("a = 1 OR " * 20_000 + "a = 1", "sql92", None)
@example("s = '" + "x" * 1_000_000 + "'", "sql92", None)
@example("s IN (" + ", ".join(["'x'"] * 50_000) + ")", "sql92", None)
@example("\x00", "bmq", None)
@example("a == 1\udcff", "bmq", None)
def test_only_expression_errors_leave_compile(text: str, dialect: str, types: dict[str, str] | None) -> None:
    if dialect == "bmq" and types is SQL_TYPES:
        types = TYPES  # float is sql92 only: a ValueError for a bad type map is the documented answer
    _compile(text, dialect, types)


@FUZZ
@given(token_text, st.sampled_from(DIALECTS), st.lists(property_maps, min_size=1, max_size=5))
def test_evaluation_never_raises(text: str, dialect: str, maps: list[dict[str, object]]) -> None:
    compiled = _compile(text, dialect, None)
    if compiled is None:
        return
    plan = expressions.compile_plan([expressions.Subscription("x", text, dialect, {})])
    for props in maps:
        outcome = compiled.evaluate(props)  # type: ignore[arg-type]
        assert isinstance(outcome.value, bool)
        assert compiled.matches(props) is (outcome.value is True and outcome.error is None)  # type: ignore[arg-type]
        assert plan.match(props) == (frozenset({"x"}) if compiled.matches(props) else frozenset())  # type: ignore[arg-type]
        plan.match_with_errors(props)  # type: ignore[arg-type]


@pytest.mark.parametrize("dialect", DIALECTS)
# Ids by position: the payloads name this process's canary file, and test ids must not differ between the
# processes of a parallel run.
@pytest.mark.parametrize("payload", PAYLOADS, ids=[f"payload{i}" for i in range(len(PAYLOADS))])
def test_no_text_is_ever_executed(payload: str, dialect: str) -> None:
    CANARY_CALLS.clear()
    CANARY_FILE.unlink(missing_ok=True)
    for text in (payload, f"s == {payload!r}", f"a == 1 && ({payload})", f"{payload} = 1"):
        compiled = _compile(text, dialect, None)
        if compiled is not None:
            for props in ({}, {"a": 1, "s": payload, "trip": "x", "__import__": "y"}):
                outcome = compiled.evaluate(props)
                assert isinstance(outcome.value, bool)
    assert CANARY_CALLS == [], f"{payload!r} ran code"
    assert not CANARY_FILE.exists(), f"{payload!r} ran a shell command"


def test_payloads_as_string_literals_are_plain_values() -> None:
    for payload in PAYLOADS:
        literal = payload.replace("\\", "\\\\").replace('"', '\\"')
        compiled = expressions.compile(f's == "{literal}"', dialect="bmq")
        assert compiled.matches({"s": payload})
        assert not compiled.matches({"s": payload + "!"})
        sql = expressions.compile("s = '" + payload.replace("'", "''") + "'", dialect="sql92")
        assert sql.matches({"s": payload})
    assert CANARY_CALLS == []


FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__", "execfile", "breakpoint"}
FORBIDDEN_ATTRIBUTES = {"eval", "exec", "FunctionType", "CodeType", "LambdaType"}


def test_expressions_package_never_calls_eval_or_exec() -> None:
    """An AST scan of expressions/: no call to eval/exec/compile/__import__ (bare or as builtins.X), no
    getattr(builtins, ...), no code objects built; ``compile`` may only be the package's own function or a
    method (``re.compile``, ``self.compile``)."""
    offenders: list[str] = []
    for path in sorted((ROOT / "expressions").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        imported = {
            alias.asname or alias.name
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom)
            for alias in n.names
        }
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                name = node.func.id
                if name in FORBIDDEN_CALLS and not (
                    name == "compile" and (name in defined or name in imported)
                ):
                    offenders.append(f"{where}: {name}(...)")
                if (
                    name == "getattr"
                    and node.args
                    and isinstance(node.args[0], ast.Name)
                    and node.args[0].id
                    in (
                        "builtins",
                        "__builtins__",
                    )
                ):
                    offenders.append(f"{where}: getattr(builtins, ...)")
            if isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRIBUTES:
                base = node.value
                if isinstance(base, ast.Name) and base.id in ("builtins", "__builtins__", "types"):
                    offenders.append(f"{where}: {base.id}.{node.attr}")
            if isinstance(node, ast.Import | ast.ImportFrom):
                modules = (
                    [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                )
                for module in modules:
                    if module in ("builtins", "code", "codeop", "pickle", "marshal", "subprocess", "os"):
                        offenders.append(f"{where}: imports {module}")
    assert offenders == [], "expressions/ must never run user text as code:\n" + "\n".join(offenders)


def test_the_scan_catches_an_eval() -> None:
    """Self-check of the scan's core rule on a sample text."""
    tree = ast.parse("def f(text):\n    return eval(text)\n")
    calls = [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    assert FORBIDDEN_CALLS & set(calls) == {"eval"}


def test_atheris_fuzz_run() -> None:
    """A bounded libFuzzer run over both parsers and the evaluator (see ``atheris_fuzz.py``)."""
    pytest.importorskip("atheris", reason="atheris is not installed (pip install atheris)")
    runs = os.environ.get("SUBROUTE_ATHERIS_RUNS", "20000")
    result = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("atheris_fuzz.py")), f"-runs={runs}", "-max_len=512"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    tail = (result.stdout + result.stderr)[-4000:]
    assert result.returncode == 0, tail
    assert "Done" in tail, tail


def test_nan_and_huge_ints_compare_quietly() -> None:
    for dialect, text in (("bmq", "a > 1 && a < 10"), ("sql92", "c BETWEEN 1 AND 10")):
        compiled = expressions.compile(text, dialect=dialect)
        for value in (math.nan, math.inf, -math.inf, 2**64, -(2**70), "1", True):
            assert compiled.evaluate({"a": value, "c": value}).value in (True, False)
