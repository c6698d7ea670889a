"""The release version is set in pyproject.toml; every other place that names it must agree, so a release
bump that misses one fails here (the Rust crate, the image tags of the manifests, the changelog)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def test_the_native_crate_has_the_package_version() -> None:
    crate = tomllib.loads((ROOT / "router/routing/native/Cargo.toml").read_text())
    assert crate["package"]["version"] == _version()


def test_every_image_tag_in_the_manifests_is_the_package_version() -> None:
    tags: list[tuple[str, str]] = []
    for path in sorted((ROOT / "deploy/k8s").rglob("*.yaml")):
        text = path.read_text()
        tags += [
            (str(path.relative_to(ROOT)), t) for t in re.findall(r"image: subroute(?:-spark)?:(\S+)", text)
        ]
        if path.name == "kustomization.yaml":
            for image in yaml.safe_load(text).get("images", []):
                if "newTag" in image:
                    tags.append((str(path.relative_to(ROOT)), str(image["newTag"])))
    assert len(tags) >= 5, tags  # the worker, the config Job and the Spark job, and the example overlay's two
    assert [(where, tag) for where, tag in tags if tag != _version()] == []


def test_the_changelog_has_a_section_for_the_package_version() -> None:
    sections = re.findall(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), flags=re.MULTILINE)
    assert _version() in sections
