"""checkov over what gets deployed (the rendered overlays, which hold every base resource) and the Dockerfile:
no failed check. Checks skipped in a manifest carry their reason in a `checkov.io/skipN` annotation.

checkov pins `packaging<24`, which pytest 9 does not accept, so it usually lives in its own virtualenv: the test
looks for $SUBROUTE_CHECKOV, then `checkov` beside this interpreter, then .venv-checkov/bin/checkov, then PATH.
It runs checkov once (a few seconds) with --skip-download: no network."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import DEPLOY, DEPLOYABLE, ROOT

# Checks skipped in the manifests, each with its reason next to it (deploy/k8s/base/*.yaml annotations).
JUSTIFIED_SKIPS = {"CKV_K8S_35", "CKV_K8S_43"}


def _checkov() -> str | None:
    candidates = [
        os.environ.get("SUBROUTE_CHECKOV"),
        str(Path(sys.executable).parent / "checkov"),
        str(ROOT / ".venv-checkov" / "bin" / "checkov"),
        shutil.which("checkov"),
    ]
    return next((c for c in candidates if c and Path(c).exists()), None)


@pytest.fixture(scope="module")
def checkov_report(
    rendered: dict[str, list[dict[str, Any]]], tmp_path_factory: pytest.TempPathFactory
) -> list[dict]:
    checkov = _checkov()
    if checkov is None:
        pytest.skip(
            "checkov not installed: python -m venv .venv-checkov && .venv-checkov/bin/pip install checkov"
        )
    directory = tmp_path_factory.mktemp("checkov")
    for target in DEPLOYABLE:
        (directory / f"{target}.yaml").write_text(yaml.safe_dump_all(rendered[target], sort_keys=False))
    shutil.copy(DEPLOY / "Dockerfile", directory / "Dockerfile")
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"}
    result = subprocess.run(
        [
            checkov,
            "-d",
            str(directory),
            "--framework",
            "kubernetes",
            "dockerfile",
            "-o",
            "json",
            "--skip-download",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode in (0, 1), result.stderr[-2000:]
    report = json.loads(result.stdout)
    return report if isinstance(report, list) else [report]


def test_checkov_finds_nothing(checkov_report: list[dict]) -> None:
    frameworks = {r["check_type"] for r in checkov_report}
    assert frameworks == {"kubernetes", "dockerfile"}, frameworks
    failed = [
        (c["check_id"], c["resource"], c.get("severity"))
        for r in checkov_report
        for c in r["results"]["failed_checks"]
    ]
    assert failed == []
    for r in checkov_report:
        assert r["summary"]["passed"] > 50, r["check_type"]


def test_checkov_skips_are_the_justified_ones(checkov_report: list[dict]) -> None:
    skipped = [c for r in checkov_report for c in r["results"]["skipped_checks"]]
    assert {c["check_id"] for c in skipped} <= JUSTIFIED_SKIPS
    for check in skipped:
        assert len(check.get("check_result", {}).get("suppress_comment", "")) > 20, check["check_id"]
