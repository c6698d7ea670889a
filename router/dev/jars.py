"""Java artifacts for development and tests, resolved from Maven Central by ``jars/pom.xml`` and cached.

Dev tooling only: the product never needs a jar. Each profile of the pom (``kafka``: the Apache Kafka server;
``spark-kafka``: Spark's Kafka connector; ``schema-registry``: Apicurio Registry's distribution zip) is copied flat into ``<cache>/<profile>-<hash of the pom>/``, so a
changed pom resolves again and an unchanged one is never downloaded twice (Maven keeps its own copy in
``~/.m2`` besides). The cache is ``$SUBROUTE_JARS_CACHE`` or ``.cache/jars`` beside the pom. A profile that
resolves to zips (an application's distribution) is unpacked once beside them (``unpacked``).

Java sources the development tools run (the Kafka Streams router of ``tests/perf/``) are compiled with ``javac``
against a profile's jars and cached the same way, in ``<cache>/classes-<folder>-<hash of the pom and the
sources>/``: a fresh clone builds them with Java 17 and Maven only, and an unchanged source is compiled once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from subroute.errors import SubrouteError

POM_NAME = "jars/pom.xml"
_COMPLETE = ".complete"  # written last: a directory without it is a resolution that did not finish


class JarsNotAvailable(SubrouteError, RuntimeError):
    """Maven or Java is missing, or Maven could not resolve the artifacts."""


def find_pom() -> Path:
    """``$SUBROUTE_JARS_POM``, else ``jars/pom.xml`` in the first folder above this file that has one."""
    override = os.environ.get("SUBROUTE_JARS_POM")
    if override:
        return Path(override)
    for folder in Path(__file__).resolve().parents:
        candidate = folder / POM_NAME
        if candidate.is_file():
            return candidate
    raise JarsNotAvailable(
        f"{POM_NAME} not found above {Path(__file__).parent}: the local Apache Kafka broker runs from a "
        "source checkout (or set SUBROUTE_JARS_POM)"
    )


def _cache(pom: Path) -> Path:
    return Path(os.environ.get("SUBROUTE_JARS_CACHE") or pom.parent.parent / ".cache" / "jars")


def _publish(staging: Path, target: Path) -> Path:
    """Move a finished ``staging`` folder to ``target``, marked complete, unless another process got there first."""
    (staging / _COMPLETE).touch()
    try:
        staging.rename(target)
    except OSError:  # another process finished the same work first: use its copy
        shutil.rmtree(staging, ignore_errors=True)
        if not (target / _COMPLETE).exists():
            raise
    return target


def resolve(profile: str) -> Path:
    """The folder holding every jar of ``profile``, resolving it with Maven the first time."""
    pom = find_pom()
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    cache = _cache(pom)
    target = cache / f"{profile}-{digest}"
    if (target / _COMPLETE).exists():
        return target
    mvn = shutil.which("mvn")
    if mvn is None or shutil.which("java") is None:
        raise JarsNotAvailable(
            "the local Apache Kafka broker needs Java 17+ and Maven (mvn) on PATH; "
            "without them use --engine tansu (SUBROUTE_TEST_BROKER=tansu for the tests)"
        )
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{profile}-", dir=cache))
    command = [
        mvn,
        "--batch-mode",
        "--quiet",
        "--file",
        str(pom),
        "--activate-profiles",
        profile,
        "dependency:copy-dependencies",
        f"-DoutputDirectory={staging}",
        "-DincludeScope=runtime",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-10:])
        raise JarsNotAvailable(f"Maven could not resolve profile {profile!r} of {pom}:\n{tail}")
    return _publish(staging, target)


def unpacked(profile: str) -> Path:
    """The folder holding every zip of ``profile`` unpacked (into one tree), unpacking them the first time."""
    resolved = resolve(profile)
    target = resolved / "unpacked"
    if (target / _COMPLETE).exists():
        return target
    archives = sorted(resolved.glob("*.zip"))
    if not archives:
        raise JarsNotAvailable(f"profile {profile!r} resolved to no zip in {resolved}")
    staging = Path(tempfile.mkdtemp(prefix=".unpacked-", dir=resolved))
    for archive in archives:
        with zipfile.ZipFile(archive) as opened:
            opened.extractall(staging)  # Maven Central's checksum-verified artifacts, not user input
    return _publish(staging, target)


def jar_files(profile: str) -> list[Path]:
    return sorted(resolve(profile).glob("*.jar"))


def compile_java(profile: str, sources: Path) -> Path:
    """The class files of every ``.java`` file under ``sources``, compiled for Java 17 against ``profile``'s jars
    the first time (and again whenever a source or the pom changes)."""
    pom = find_pom()
    files = sorted(sources.rglob("*.java"))
    if not files:
        raise JarsNotAvailable(f"no .java file under {sources}")
    digest = hashlib.sha256(pom.read_bytes())
    for file in files:
        digest.update(file.relative_to(sources).as_posix().encode() + b"\0" + file.read_bytes() + b"\0")
    cache = _cache(pom)
    target = cache / f"classes-{sources.name}-{digest.hexdigest()[:12]}"
    if (target / _COMPLETE).exists():
        return target
    jars = resolve(profile)
    javac = shutil.which("javac")
    if javac is None:
        raise JarsNotAvailable("compiling Java sources needs a JDK 17+ (javac on PATH)")
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".classes-{sources.name}-", dir=cache))
    command = [javac, "--release", "17", "-encoding", "UTF-8", "-cp", str(jars / "*"), "-d", str(staging)]
    done = subprocess.run([*command, *map(str, files)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
        raise JarsNotAvailable(f"javac could not compile {sources}:\n{tail}")
    return _publish(staging, target)


def java_classpath(profile: str, sources: Path) -> str:
    """``-cp`` for ``java``: the compiled ``sources`` and every jar of ``profile``."""
    return os.pathsep.join([str(compile_java(profile, sources)), str(resolve(profile) / "*")])


def main(profiles: list[str]) -> int:
    """``python -m subroute.dev.jars PROFILE...``: resolve (or find cached) and print each profile's folder."""
    try:
        for profile in profiles:
            print(resolve(profile))
    except JarsNotAvailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
