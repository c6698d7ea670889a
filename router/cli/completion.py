"""``subroute completion bash|zsh|fish``: the shell script that completes subroute's commands and flags
(argcomplete: each TAB asks ``subroute`` itself, so completion follows the installed version)."""

from __future__ import annotations

import argparse
import sys

import argcomplete
from argcomplete.shell_integration import shellcode

SHELLS = ("bash", "zsh", "fish")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "completion",
        help='print the shell completion script: eval "$(subroute completion bash)"',
        description="Prints a script that completes subroute's commands, flags and choices. bash: add "
        "'eval \"$(subroute completion bash)\"' to ~/.bashrc; zsh: 'eval \"$(subroute completion zsh)\"' in "
        "~/.zshrc (after compinit); fish: 'subroute completion fish | source'.",
    )
    parser.add_argument("shell", choices=SHELLS)
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    sys.stdout.write(shellcode(["subroute"], shell=args.shell))
    return 0


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer a shell's completion request (the script above sets _ARGCOMPLETE) and exit; otherwise return."""
    argcomplete.autocomplete(parser)
