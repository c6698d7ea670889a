"""Shared fixtures of the deployment tests: the renderer (deploy/render.py) and every rendered kustomization."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
# Every kustomization a user applies (components/hpa is rendered through overlays/example-hpa).
TARGETS = {
    "base": K8S / "base",
    "example": K8S / "overlays" / "example",
    "example-hpa": K8S / "overlays" / "example-hpa",
}
DEPLOYABLE = ("example", "example-hpa")


def load_render() -> ModuleType:
    if "subroute_deploy_render" in sys.modules:
        return sys.modules["subroute_deploy_render"]
    spec = importlib.util.spec_from_file_location("subroute_deploy_render", DEPLOY / "render.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def render() -> ModuleType:
    return load_render()


@pytest.fixture(scope="session")
def rendered(render: ModuleType) -> dict[str, list[dict[str, Any]]]:
    return {name: render.build(path) for name, path in TARGETS.items()}


def find(resources: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [r for r in resources if r["kind"] == kind and (name is None or r["metadata"]["name"] == name)]


def one(resources: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = find(resources, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]
