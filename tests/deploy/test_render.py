"""What `kubectl kustomize` makes of every kustomization: distinct resources, the overlays' namespace on all of
them, and the generated ConfigMap's hashed name wherever it is referenced (kustomizeconfig.yaml)."""

from __future__ import annotations

from typing import Any

import yaml


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


def test_generated_configmap_references_follow_the_hash(rendered: dict[str, list[dict[str, Any]]]) -> None:
    resources = rendered["example"]
    names = {r["metadata"]["name"] for r in resources if r["kind"] == "ConfigMap"}
    settings = next(n for n in names if n.startswith("subroute-settings-"))
    text = yaml.safe_dump_all(resources)
    assert "name: subroute-settings\n" not in text
    spark = next(r for r in resources if r["kind"] == "SparkApplication")
    assert spark["spec"]["driver"]["envFrom"][0]["configMapRef"]["name"] == settings
    assert spark["spec"]["image"] == "ghcr.io/example/subroute-spark:0.1.0"
