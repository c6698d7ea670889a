"""The architecture, enforced: which room may import what (README, Code map).

* Only the Kafka edge (router/kafka), the worker, the config store, the consumer client and the operator actions
  (router/admin) import
  confluent_kafka; everything else reaches Kafka through them.
* The consumer client (router/client) does not read configuration or routing tables: it is given its app's
  config (``subroute.config.model``, plain data) by its caller.
* expressions/ is pure: it imports lark, the standard library and the package's error base only, never the
  router or a Kafka client.
* The routing decisions are pure: nothing in router/routing imports confluent_kafka (covered by the first rule).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

KAFKA_ALLOWED = (
    "subroute.kafka",
    "subroute.worker",
    "subroute.config.store",
    "subroute.client",
    "subroute.admin",
)
CLIENT_MAY_NOT = (
    "subroute.config",
    "subroute.routing.decisions",
    "subroute.routing.capacity",
    "subroute.routing.explain",
)
CLIENT_MAY = ("subroute.config.model",)
EXPRESSIONS_MAY = ("subroute.expressions", "subroute.errors", "lark")
# Repository folder -> import package (pyproject.toml's package-dir).
PACKAGES = {"router": "subroute", "expressions": "subroute.expressions", "spark": "subroute.spark"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGES[parts[0]], *parts[1:]])


def imports_of(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every module ``source`` imports, relative imports resolved, function-level imports included."""
    found: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)  # `from pkg import submodule`
    return found


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def violations(module: str, imported: set[str]) -> list[str]:
    found = []
    if any(_under(name, ("confluent_kafka",)) for name in imported) and not _under(module, KAFKA_ALLOWED):
        found.append(f"{module} imports confluent_kafka: only {', '.join(KAFKA_ALLOWED)} may")
    if _under(module, ("subroute.client",)):
        for name in sorted(imported):
            if _under(name, CLIENT_MAY_NOT) and not _under(name, CLIENT_MAY):
                found.append(
                    f"{module} (the consumer client) imports {name}: it is given its app config instead"
                )
    if _under(module, ("subroute.expressions",)):
        for name in sorted(imported):
            if not _under(name, EXPRESSIONS_MAY) and name.split(".")[0] not in _STDLIB:
                found.append(
                    f"{module} imports {name}: expressions/ imports lark, the standard library and subroute.errors only"
                )
    return found


_STDLIB = frozenset(__import__("sys").stdlib_module_names) | {"__future__"}


def test_the_rules_catch_forbidden_imports() -> None:
    """The checker itself: each rule fires on a forbidden import and stays quiet on allowed ones."""
    assert violations(
        "subroute.cli.config", imports_of("from confluent_kafka import Consumer", "subroute.cli.config")
    )
    assert violations(
        "subroute.routing.decisions", imports_of("import confluent_kafka", "subroute.routing.decisions")
    )
    assert not violations(
        "subroute.kafka.clients", imports_of("from confluent_kafka import Consumer", "subroute.kafka.clients")
    )
    inside = "def f():\n    from subroute.config.store import read_config\n"
    assert violations("subroute.client.queue_consumer", imports_of(inside, "subroute.client.queue_consumer"))
    assert not violations(
        "subroute.client.queue_consumer",
        imports_of("from subroute.config.model import AppConfig", "subroute.client.queue_consumer"),
    )
    assert violations(
        "subroute.client.replace",
        imports_of("from subroute.routing import decisions", "subroute.client.replace"),
    )
    assert violations(
        "subroute.expressions.plan", imports_of("from subroute import names", "subroute.expressions.plan")
    )
    assert not violations(
        "subroute.expressions.plan",
        imports_of("from . import ast\nimport lark\nimport re", "subroute.expressions.plan"),
    )


def test_every_module_keeps_to_its_room() -> None:
    problems: list[str] = []
    checked = 0
    for folder in ("router", "expressions"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            module = module_name(path)
            imported = imports_of(path.read_text(), module, is_package=path.name == "__init__.py")
            problems.extend(violations(module, imported))
            checked += 1
    assert checked > 40
    assert not problems, "\n".join(problems)


def test_code_imports_the_subroute_package_only() -> None:
    """The repository folders are not import packages of their own: everything goes through ``subroute``
    (what the wheel installs), so code that works here works installed."""
    problems = []
    for folder in ("router", "expressions", "spark", "schemas", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in imports_of(path.read_text(), "x.y"):
                if name.split(".")[0] in {"router", "expressions", "spark", "schemas"}:
                    problems.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not problems, "\n".join(problems)


def module_level_imports(source: str, module: str, is_package: bool = False) -> set[str]:
    """Imports executed when the module loads (function-level ones are deferred on purpose, so they are left out)."""
    tree = ast.parse(source)
    top = ast.Module(
        body=[n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)], type_ignores=[]
    )
    return imports_of(ast.unparse(top), module, is_package)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle found by a depth-first walk (each reported once, from where the walk met it)."""
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                found.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_cycle_finder() -> None:
    assert cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b", "a"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_cycles_in_router_spark_or_expressions() -> None:
    """Deferred (function-level) imports count too: a cycle through them is still a knot of roles."""
    modules = {
        module_name(path): path
        for folder in ("router", "spark", "expressions")
        for path in sorted((ROOT / folder).rglob("*.py"))
    }
    graph = {
        name: {
            imported
            for imported in imports_of(path.read_text(), name, path.name == "__init__.py")
            if imported in modules and imported != name
        }
        for name, path in modules.items()
    }
    # A package's __init__ importing its own submodules is not a cycle of roles.
    graph = {name: {i for i in deps if not i.startswith(name + ".")} for name, deps in graph.items()}
    assert not cycles(graph), cycles(graph)
