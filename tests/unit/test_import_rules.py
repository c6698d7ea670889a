"""The architecture, enforced: the layer order of the rooms, and which room may import what (README, Code map).

* The rooms stand in layers (``LAYERS``, bottom to top). A module imports its own room and rooms of lower layers
  only: never a room above it, never another room of its own layer. An import upward fails with both rooms and
  their layers named.
* Only the Kafka edge (router/kafka), the worker, the config store, the consumer client, the operator actions
  (router/admin) and the Spark job (its own Kafka source) import confluent_kafka; everything else reaches Kafka
  through them.
* routing/ is pure: it imports no Kafka I/O (neither confluent_kafka nor subroute.kafka).
* The consumer client (router/client) does not read configuration or routing tables: it is given its app's
  config (``subroute.config.model``, plain data) by its caller.
* expressions/ is pure: it imports lark, the standard library and the package's error base only, never the
  router or a Kafka client.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Bottom to top. A room is a module prefix (the longest that matches wins: the demo stands above the CLI it drives,
# the rest of dev/ below the CLI whose ``subroute dev`` command runs it).
LAYERS: list[tuple[str, ...]] = [
    ("subroute.wire", "subroute.errors"),  # the wire format and the error base: import nothing of subroute
    ("subroute.durations", "subroute.topic_patterns", "subroute.expressions", "subroute.schemas"),
    ("subroute.ops",),  # settings, metrics, logs, HTTP endpoints, progress bars
    (
        "subroute.kafka",
    ),  # the Kafka edge: clients, topic creation from plain specs, consumer groups from outside
    ("subroute.config",),  # the control plane, and the topic layout a config needs
    ("subroute.routing",),  # the decisions, pure
    ("subroute.worker", "subroute.client"),  # the router and the consumer library: neither imports the other
    ("subroute.admin",),  # operator actions reading across rooms: status, drain, redrive
    ("subroute.spark",),
    ("subroute.dev",),  # local brokers, jars, samples and the demo's checks
    ("subroute.cli",),
    ("subroute.dev.demo",),  # the demo runs the CLI
]
KAFKA_ALLOWED = (
    "subroute.kafka",
    "subroute.worker",
    "subroute.config.store",
    "subroute.client",
    "subroute.admin",
    "subroute.spark",  # the Spark job's own Kafka source and commits run on the executors
)
ROUTING_MAY_NOT = ("confluent_kafka", "subroute.kafka")
CLIENT_MAY_NOT = (
    "subroute.config",
    "subroute.routing.decisions",
    "subroute.routing.capacity",
    "subroute.routing.explain",
)
CLIENT_MAY = ("subroute.config.model",)
EXPRESSIONS_MAY = ("subroute.expressions", "subroute.errors", "lark")
# Repository folder -> import package (pyproject.toml's package-dir).
PACKAGES = {
    "router": "subroute",
    "expressions": "subroute.expressions",
    "spark": "subroute.spark",
    "schemas": "subroute.schemas",
}


def room_of(module: str) -> tuple[str, int] | None:
    """The room ``module`` belongs to and its layer (0: the bottom); None for a module of no room. The package
    itself (router/__init__.py, empty) is at the bottom: ``from subroute import wire`` names it too."""
    if module == "subroute":
        return module, 0
    found: tuple[str, int] | None = None
    for layer, rooms in enumerate(LAYERS):
        for room in rooms:
            if _under(module, (room,)) and (found is None or len(room) > len(found[0])):
                found = (room, layer)
    return found


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


def layer_violations(module: str, imported: set[str]) -> list[str]:
    """Imports of a room above ``module``'s, or of another room of its layer."""
    own = room_of(module)
    if own is None:
        return [f"{module} is in no room: add its room to LAYERS"]
    found = []
    for name in sorted(imported):
        other = room_of(name)
        if other is None or other[0] == own[0]:
            continue
        if other[1] > own[1]:
            found.append(
                f"{module} ({own[0]}, layer {own[1]}) imports {name} ({other[0]}, layer {other[1]}): "
                "a room imports only rooms of lower layers (LAYERS, bottom to top)"
            )
        elif other[1] == own[1]:
            found.append(
                f"{module} ({own[0]}) imports {name} ({other[0]}): rooms of one layer do not import each other"
            )
    return found


def violations(module: str, imported: set[str]) -> list[str]:
    found = layer_violations(module, imported)
    if any(_under(name, ("confluent_kafka",)) for name in imported) and not _under(module, KAFKA_ALLOWED):
        found.append(f"{module} imports confluent_kafka: only {', '.join(KAFKA_ALLOWED)} may")
    if _under(module, ("subroute.routing",)):
        for name in sorted(imported):
            if _under(name, ROUTING_MAY_NOT):
                found.append(f"{module} imports {name}: routing/ is pure, it imports no Kafka I/O")
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
        "subroute.expressions.plan", imports_of("from subroute import wire", "subroute.expressions.plan")
    )
    assert not violations(
        "subroute.expressions.plan",
        imports_of("from . import ast\nimport lark\nimport re", "subroute.expressions.plan"),
    )


def test_the_layer_rule_catches_upward_and_sideways_imports() -> None:
    def check(module: str, source: str) -> list[str]:
        return layer_violations(module, imports_of(source, module))

    upward = check("subroute.routing.decisions", "def f():\n    from subroute.worker import loop\n")
    assert any(
        "(subroute.routing, layer 5) imports subroute.worker.loop (subroute.worker, layer 6)" in v
        for v in upward
    )
    assert check("subroute.spark.plan", "from subroute.cli import output")  # spark stands below the CLI
    assert check("subroute.kafka.topics", "from subroute.config.model import Config")
    assert check("subroute.wire", "from subroute import errors")  # the bottom imports nothing of subroute
    sideways = check("subroute.client.reader", "from subroute.worker.capacity import CapacityMonitor")
    assert sideways and all("rooms of one layer do not import each other" in v for v in sideways)
    assert check("subroute.dev.broker", "from subroute.cli import main")
    assert check("subroute.cli.newcommand", "from subroute.worker import loop") == []
    assert check("subroute.dev.demo", "from subroute.cli import main") == []  # the demo drives the CLI
    assert (
        check("subroute.admin.status", "from subroute import wire\nfrom subroute.worker import capacity")
        == []
    )
    assert check("subroute.newroom", "") == ["subroute.newroom is in no room: add its room to LAYERS"]
    assert violations("subroute.routing.newmodule", imports_of("from subroute.kafka import clients", "x.y"))


def test_every_room_stands_in_one_layer() -> None:
    rooms = [room for layer in LAYERS for room in layer]
    assert len(rooms) == len(set(rooms))
    folders = {p.name for p in (ROOT / "router").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in (ROOT / "router").glob("*.py") if p.name != "__init__.py"}
    assert {f"subroute.{name}" for name in folders | modules} | {
        f"subroute.{name}" for name in ("expressions", "spark", "schemas")
    } <= set(rooms)


def test_every_module_keeps_to_its_room() -> None:
    problems: list[str] = []
    checked = 0
    for folder in PACKAGES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            module = module_name(path)
            imported = imports_of(path.read_text(), module, is_package=path.name == "__init__.py")
            problems.extend(violations(module, imported))
            checked += 1
    assert checked > 100
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
