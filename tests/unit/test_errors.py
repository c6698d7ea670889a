"""One base for every error subroute declares: ``except SubrouteError`` catches whatever the package raises on
purpose, while each error keeps the standard base its callers catch it by (ValueError, LookupError ...)."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

from subroute.errors import SubrouteError

ROOT = Path(__file__).resolve().parents[2]
# Repository folder -> import package (pyproject.toml's package-dir).
PACKAGES = {"router": "subroute", "expressions": "subroute.expressions", "spark": "subroute.spark"}


def module_names() -> list[str]:
    names = []
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__main__":  # runs the CLI when imported
                continue
            if parts[-1] == "__init__":
                parts.pop()
            names.append(".".join([package, *parts]))
    return names


def declared_exceptions() -> list[type[BaseException]]:
    found: list[type[BaseException]] = []
    for name in module_names():
        module = importlib.import_module(name)
        for attribute, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and not attribute.startswith("_")  # a module's own signal that never leaves it
            ):
                found.append(value)
    return found


def test_every_declared_error_derives_from_subroute_error() -> None:
    declared = declared_exceptions()
    assert len(declared) > 20  # the walk reached the package's modules
    strays = sorted(
        f"{cls.__module__}.{cls.__qualname__}" for cls in declared if not issubclass(cls, SubrouteError)
    )
    assert not strays, strays


def test_errors_keep_the_standard_bases_callers_catch_them_by() -> None:
    from subroute.config.store import AppNotConfigured
    from subroute.expressions import ExpressionSyntaxError
    from subroute.ops.settings import SettingsError

    assert issubclass(SettingsError, ValueError) and issubclass(AppNotConfigured, LookupError)
    assert issubclass(ExpressionSyntaxError, SubrouteError)
