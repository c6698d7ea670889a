"""Run one document's runnable blocks, top to bottom, as a user of a deployment would (README, "Runnable docs").

The document gets a working directory of its own (``examples/`` linked into it), ``SUBROUTE_BOOTSTRAP_SERVERS``
and a topic prefix of its own in ``SUBROUTE_TOPIC_PREFIX``, and a router worker routing under that prefix in the
background. File blocks are written there (the input topics a subscriptions file names are created with one
partition if missing: producers' topics, which subroute never creates, and which a broker's auto-creation would
size differently from one broker to the next); sh blocks' ``subroute`` lines run through ``subroute.cli.main`` in
this process; python blocks run as a script in a fresh interpreter.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import yaml

from subroute.cli.main import main as cli
from subroute.kafka.clients import TopicSpec, admin_client, ensure_topics
from subroute.ops.settings import Settings
from tests.docs.blocks import ROOT, Block, Command, commands

# A python block that has not finished by then is reported with its output and the worker's log.
PYTHON_TIMEOUT = 180.0
WORKER_STOP_TIMEOUT = 30.0


class DocFailure(AssertionError):
    """A block of the document did not run as written."""


class DocSession:
    def __init__(self, workdir: Path, bootstrap_servers: str, prefix: str) -> None:
        self.workdir = workdir
        self.environment = {"SUBROUTE_BOOTSTRAP_SERVERS": bootstrap_servers, "SUBROUTE_TOPIC_PREFIX": prefix}
        self.worker_log = workdir / "worker.log"
        self._worker: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> DocSession:
        (self.workdir / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
        executable = Path(sys.executable).parent / "subroute"  # the console script a user runs
        with self.worker_log.open("wb") as log:
            self._worker = subprocess.Popen(
                [str(executable), "worker", "--metrics-port", "0"],
                cwd=self.workdir,
                env={**os.environ, **self.environment},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_worker()

    def stop_worker(self) -> int | None:
        """SIGTERM the worker (it finishes its batch, commits and leaves) and return its exit code."""
        worker, self._worker = self._worker, None
        if worker is None:
            return None
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
        try:
            return worker.wait(WORKER_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
            return None

    def run(self, block: Block) -> None:
        if block.kind == "file":
            assert block.file is not None
            target = self.workdir / block.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text, encoding="utf-8")
            inputs = _input_topics(block.text)
            if inputs:
                settings = Settings(bootstrap_servers=self.environment["SUBROUTE_BOOTSTRAP_SERVERS"])
                ensure_topics(admin_client(settings), [TopicSpec(topic) for topic in inputs])
        elif block.kind == "sh":
            for command in commands(block):
                self.run_command(block, command)
        else:
            self.run_python(block)

    def run_command(self, block: Block, command: Command) -> None:
        stdout, stderr = io.StringIO(), io.StringIO()
        with self._environment(), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = cli(command.argv)
            except SystemExit as exc:  # argparse refusing the line
                code = exc.code if isinstance(exc.code, int) else 2
        if code != command.expected_exit:
            raise DocFailure(
                f"{block.where.rsplit(':', 1)[0]}:{command.line}: `{command.text}` exited {code}, the document "
                f"expects {command.expected_exit}\n--- stdout\n{stdout.getvalue()}--- stderr\n{stderr.getvalue()}"
            )

    def run_python(self, block: Block) -> None:
        # Blank lines before the code: a traceback's line numbers are the document's.
        script = self.workdir / f"{block.path.name}.py"
        script.write_text("\n" * (block.line - 1) + block.text, encoding="utf-8")
        try:
            done = subprocess.run(
                [sys.executable, str(script)],
                cwd=self.workdir,
                env={**os.environ, **self.environment},
                capture_output=True,
                text=True,
                timeout=PYTHON_TIMEOUT,
            )
        except subprocess.TimeoutExpired as exc:
            raise DocFailure(
                f"{block.where}: the python block did not finish within {PYTHON_TIMEOUT:.0f} s\n"
                f"--- output\n{_text(exc.stdout)}{_text(exc.stderr)}--- worker log\n{self._worker_tail()}"
            ) from None
        if done.returncode != 0:
            raise DocFailure(
                f"{block.where}: the python block exited {done.returncode}\n--- stdout\n{done.stdout}"
                f"--- stderr\n{done.stderr}--- worker log\n{self._worker_tail()}"
            )

    @contextlib.contextmanager
    def _environment(self) -> Iterator[None]:
        saved = {name: os.environ.get(name) for name in self.environment}
        cwd = Path.cwd()
        os.environ.update(self.environment)
        os.chdir(self.workdir)
        try:
            yield
        finally:
            os.chdir(cwd)
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    def _worker_tail(self, lines: int = 40) -> str:
        if not self.worker_log.exists():
            return ""
        return "\n".join(self.worker_log.read_text(errors="replace").splitlines()[-lines:]) + "\n"


def _input_topics(text: str) -> list[str]:
    """The input topic names (not ``^regex`` patterns) of a subscriptions file; none for any other file."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    apps = document.get("apps") if isinstance(document, dict) else None
    if not isinstance(apps, dict):
        return []
    return sorted(
        {
            topic
            for app in apps.values()
            if isinstance(app, dict)
            for topic in app.get("inputs") or []
            if isinstance(topic, str) and not topic.startswith("^")
        }
    )


def _text(output: bytes | str | None) -> str:
    if output is None:
        return ""
    return output.decode(errors="replace") if isinstance(output, bytes) else output
