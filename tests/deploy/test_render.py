"""The pure-Python kustomize renderer: it renders every kustomization, agrees with `kubectl kustomize` where
that binary exists, and refuses what it does not implement."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from .conftest import TARGETS


def _key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj["metadata"]
    return obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"]


def test_every_kustomization_renders(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for name, resources in rendered.items():
        assert resources, name
        keys = [_key(r) for r in resources]
        assert len(keys) == len(set(keys)), f"{name}: duplicate resources"


def test_overlays_set_the_namespace_everywhere(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for name in ("example", "example-hpa"):
        for r in rendered[name]:
            assert r["metadata"].get("namespace") == "kafka", (name, _key(r))


@pytest.mark.skipif(
    shutil.which("kubectl") is None and shutil.which("kustomize") is None,
    reason="no kubectl or kustomize here to compare deploy/render.py with (the manifests are still rendered and validated by the other tests)",
)
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_renderer_agrees_with_kustomize(render: ModuleType, target: str) -> None:
    command = ["kubectl", "kustomize"] if shutil.which("kubectl") else ["kustomize", "build"]
    out = subprocess.run(
        [*command, str(TARGETS[target])], capture_output=True, text=True, check=True, timeout=120
    )
    expected = [d for d in yaml.safe_load_all(out.stdout) if d]
    actual = render.build(TARGETS[target])
    assert [_key(r) for r in actual] == [_key(r) for r in expected]
    for mine, theirs in zip(actual, expected, strict=True):
        assert mine == theirs, _key(mine)


def test_configmap_hash_suffix_is_kustomizes(render: ModuleType) -> None:
    # Vectors produced by kustomize v5.5 (kubectl 1.32): the hash covers the data only, Go-escaped.
    assert render._hash_suffix({"A": "1", "B": "x<y&z"}) == "mgk8mb4fgh"


def test_generated_configmap_references_follow_the_hash(rendered: dict[str, list[dict[str, Any]]]) -> None:
    resources = rendered["example"]
    names = {r["metadata"]["name"] for r in resources if r["kind"] == "ConfigMap"}
    settings = next(n for n in names if n.startswith("subroute-settings-"))
    text = yaml.safe_dump_all(resources)
    assert "name: subroute-settings\n" not in text
    spark = next(r for r in resources if r["kind"] == "SparkApplication")
    assert spark["spec"]["driver"]["envFrom"][0]["configMapRef"]["name"] == settings
    assert spark["spec"]["image"] == "ghcr.io/example/subroute-spark:0.1.0"


@pytest.mark.parametrize(
    "kustomization",
    [
        {"resources": ["r.yaml"], "commonLabels": {"a": "b"}},
        {"resources": ["r.yaml"], "labels": [{"pairs": {"a": "b"}, "includeSelectors": True}]},
        {"resources": ["r.yaml"], "namePrefix": "x-"},
        {"resources": ["https://example.com/remote"]},
    ],
)
def test_renderer_refuses_what_it_does_not_do(
    render: ModuleType, tmp_path: Path, kustomization: dict
) -> None:
    (tmp_path / "r.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    with pytest.raises(render.RenderError):
        render.build(tmp_path)


def test_strategic_merge_and_json_patches(render: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "d.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "d"},
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "img:1",
                                    "env": [{"name": "A", "value": "1"}, {"name": "B"}],
                                }
                            ]
                        }
                    }
                },
            }
        )
    )
    patch = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "env": [{"name": "B", "value": "2"}]}]}}},
    }
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": ["d.yaml"],
                "images": [{"name": "img", "newName": "reg/img", "newTag": "2"}],
                "patches": [
                    {"patch": yaml.safe_dump(patch)},
                    {
                        "target": {"kind": "Deployment", "name": "d"},
                        "patch": yaml.safe_dump([{"op": "add", "path": "/spec/replicas", "value": 2}]),
                    },
                ],
            }
        )
    )
    (deployment,) = render.build(tmp_path)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "reg/img:2"
    assert container["env"] == [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]
    assert deployment["spec"]["replicas"] == 2
