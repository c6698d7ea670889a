"""Shell completion: ``subroute completion bash|zsh|fish`` prints the script, and bash, given it, completes
subroute's commands, flags and formats (by asking the installed ``subroute``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from subroute.cli.main import main

BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    ("shell", "marker"), [("bash", "complete -o"), ("zsh", "#compdef subroute"), ("fish", "complete")]
)
def test_the_script_is_printed(shell: str, marker: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    assert marker in script and "subroute" in script and "_ARGCOMPLETE" in script


def bash_completes(line: str) -> list[str]:
    assert (BIN / "subroute").exists(), "the subroute command is installed beside this Python"
    bash = shutil.which("bash")
    assert bash is not None
    script = (
        'eval "$(subroute completion bash)"\n'
        f"COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; COMP_TYPE=9\n"
        "_python_argcomplete subroute\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    environ = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run([bash, "-c", script], capture_output=True, text=True, env=environ, timeout=60)
    assert result.returncode == 0, result.stderr
    return sorted(word.strip() for word in result.stdout.splitlines() if word.strip())


def test_bash_completes_commands_subcommands_flags_and_formats() -> None:
    assert bash_completes("subroute con") == ["config"]
    assert bash_completes("subroute dlq re") == ["redrive"]
    assert bash_completes("subroute config d") == ["delete", "diff"]
    assert bash_completes("subroute status --boot") == ["--bootstrap-server", "--bootstrap-servers"]
    assert bash_completes("subroute status -o ") == ["json", "table", "yaml"]
