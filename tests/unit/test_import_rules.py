"""The architecture, enforced: which room may import what (README, Code map).

* Only the Kafka edge (router/kafka), the worker, the config store, the consumer client and capacity import
  confluent_kafka; everything else reaches Kafka through them.
* The consumer client (router/client) does not read configuration or routing tables: it is given its app's
  config (``router.config.model``, plain data) by its caller.
* expressions/ is pure: it imports lark and the standard library only, never the router or a Kafka client.
* The routing decisions are pure: nothing in router/routing but capacity imports confluent_kafka (covered by
  the first rule).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

KAFKA_ALLOWED = (
    "router.kafka",
    "router.worker",
    "router.config.store",
    "router.client",
    "router.routing.capacity",
)
CLIENT_MAY_NOT = (
    "router.config",
    "router.routing.decisions",
    "router.routing.capacity",
    "router.routing.explain",
)
CLIENT_MAY = ("router.config.model",)
EXPRESSIONS_MAY = ("expressions", "lark")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


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
    if _under(module, ("router.client",)):
        for name in sorted(imported):
            if _under(name, CLIENT_MAY_NOT) and not _under(name, CLIENT_MAY):
                found.append(
                    f"{module} (the consumer client) imports {name}: it is given its app config instead"
                )
    if _under(module, ("expressions",)):
        for name in sorted(imported):
            top = name.split(".")[0]
            if top not in EXPRESSIONS_MAY and top not in _STDLIB:
                found.append(
                    f"{module} imports {name}: expressions/ imports lark and the standard library only"
                )
    return found


_STDLIB = frozenset(__import__("sys").stdlib_module_names) | {"__future__"}


def test_the_rules_catch_forbidden_imports() -> None:
    """The checker itself: each rule fires on a forbidden import and stays quiet on allowed ones."""
    assert violations(
        "router.cli.config", imports_of("from confluent_kafka import Consumer", "router.cli.config")
    )
    assert violations(
        "router.routing.decisions", imports_of("import confluent_kafka", "router.routing.decisions")
    )
    assert not violations(
        "router.kafka.io", imports_of("from confluent_kafka import Consumer", "router.kafka.io")
    )
    inside = "def f():\n    from router.config.store import read_config\n"
    assert violations("router.client.queue_consumer", imports_of(inside, "router.client.queue_consumer"))
    assert not violations(
        "router.client.queue_consumer",
        imports_of("from router.config.model import AppConfig", "router.client.queue_consumer"),
    )
    assert violations(
        "router.client.redrive", imports_of("from router.routing import decisions", "router.client.redrive")
    )
    assert violations("expressions.plan", imports_of("from router import names", "expressions.plan"))
    assert not violations(
        "expressions.plan", imports_of("from . import ast\nimport lark\nimport re", "expressions.plan")
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
