"""The wheel a user installs: one top-level import package, ``subroute``, with its data files and the native
core (pyproject.toml's package-dir maps the repository folders into it)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_installs_one_package_named_subroute(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--wheel-dir",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        timeout=900,
    )
    [wheel] = tmp_path.glob("subroute-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    distribution, version = wheel.name.split("-")[:2]
    assert {n.split("/")[0] for n in names} == {"subroute", f"{distribution}-{version}.dist-info"}
    for expected in (
        "subroute/py.typed",
        "subroute/cli/__main__.py",
        "subroute/client/queue_consumer.py",
        "subroute/expressions/sql92.lark",
        "subroute/expressions/bmq.lark",
        "subroute/schemas/app_config.avsc",
        "subroute/spark/job.py",
        "subroute/routing/_native.pyi",
    ):
        assert expected in names, expected
    assert any(n.startswith("subroute/routing/_native.") and n.endswith(".so") for n in names)
