"""The runnable blocks of a Markdown document, and the commands of a shell block (README, "Runnable docs").

A fenced block is runnable when the line right above its opening fence is ``<!-- runnable -->`` (a python or sh
block: run) or ``<!-- runnable file=NAME -->`` (any block: written to NAME for the blocks after it). An HTML
comment renders as nothing on GitHub, so the marker costs the reader nothing. A marker this module cannot take
is an error, never a block silently left out.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[2]
# README.md and every Markdown file of docs/: what the runnable-docs test reads.
DOCUMENTS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))

MARKER = re.compile(r"^\s*<!--\s*runnable\b(?P<options>.*?)-->\s*$")
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
FILE_OPTION = re.compile(r"^file=(?P<name>\S+)$")
LANGUAGES = {"python": "python", "sh": "sh", "bash": "sh", "shell": "sh"}
EXPECTED_EXIT = re.compile(r"\bexit (\d+)\b")
# Shell syntax a command line of a runnable block may not use: each line is one command, run without a shell.
OPERATORS = set(";&|<>()")


class MarkerError(ValueError):
    """A ``<!-- runnable ... -->`` marker that does not mark a block the test can run or write."""


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the block's first line of code (the one after the opening fence)
    kind: str  # "python", "sh" or "file"
    text: str
    file: str | None = None  # kind "file": where the text goes, relative to the document's working directory

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path}:{self.line}"


@dataclass(frozen=True)
class Command:
    line: int  # the document's line where the command starts
    text: str  # as written, continuations joined
    argv: list[str]  # the arguments after ``subroute``
    expected_exit: int


def runnable_blocks(path: Path, text: str | None = None) -> list[Block]:
    """The marked blocks of ``path`` in document order."""
    lines = (path.read_text(encoding="utf-8") if text is None else text).splitlines()
    blocks: list[Block] = []
    number = 0
    while number < len(lines):
        marker = MARKER.match(lines[number])
        number += 1
        if marker is None:
            continue
        where = f"{path.name}:{number}"
        opening = FENCE.match(lines[number]) if number < len(lines) else None
        if opening is None:
            raise MarkerError(f"{where}: a runnable marker must stand on the line right above a fenced block")
        fence, indent = opening["fence"], len(opening["indent"])
        language = opening["info"].split()[0] if opening["info"].split() else ""
        number += 1  # past the opening fence, to the index of the first line of code
        first = number + 1  # its 1-based line
        body: list[str] = []
        while number < len(lines) and not _closes(lines[number], fence):
            body.append(_dedent(lines[number], indent))
            number += 1
        if number == len(lines):
            raise MarkerError(f"{where}: the marked block is never closed")
        blocks.append(_block(path, where, marker["options"].strip(), language, first, "\n".join(body) + "\n"))
        number += 1
    return blocks


def _dedent(line: str, indent: int) -> str:
    """A code line of a fence indented by ``indent`` spaces, without them (CommonMark: at most that many)."""
    cut = len(line) - len(line.lstrip(" "))
    return line[min(cut, indent) :]


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(fence) and set(stripped) == {fence[0]}


def _block(path: Path, where: str, options: str, language: str, line: int, text: str) -> Block:
    if not options:
        kind = LANGUAGES.get(language)
        if kind is None:
            raise MarkerError(
                f"{where}: only python and sh blocks run (this one is {language or 'untagged'!r}); "
                "mark a file with <!-- runnable file=NAME -->"
            )
        return Block(path, line, kind, text)
    option = FILE_OPTION.match(options)
    if option is None:
        raise MarkerError(f"{where}: unknown runnable option {options!r} (known: file=NAME)")
    name = PurePosixPath(option["name"])
    if name.is_absolute() or ".." in name.parts:
        raise MarkerError(f"{where}: file={name} must be a path inside the document's working directory")
    return Block(path, line, "file", text, file=str(name))


def commands(block: Block) -> list[Command]:
    """The ``subroute`` commands of a sh block, one a line (``\\`` continuations joined); other lines are for
    the reader (make, kcat, a pipe into subroute) and are not run."""
    found: list[Command] = []
    pending: list[str] = []
    start = block.line
    for offset, raw in enumerate(block.text.splitlines()):
        if not pending:
            start = block.line + offset
        if raw.rstrip().endswith("\\"):
            pending.append(raw.rstrip()[:-1])
            continue
        line = " ".join([*pending, raw]).strip()
        pending = []
        if line.startswith("subroute "):
            found.append(_command(block, start, line))
    return found


def _command(block: Block, line: int, text: str) -> Command:
    where = f"{block.where.rsplit(':', 1)[0]}:{line}"
    code, comment = _split_comment(text)
    lexer = shlex.shlex(code, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""  # cut above, where the shell cuts: ``a#b`` is one word
    try:
        words = list(lexer)
    except ValueError as exc:
        raise MarkerError(f"{where}: cannot split {text!r}: {exc}") from None
    if any(word and set(word) <= OPERATORS for word in words):
        raise MarkerError(f"{where}: one command a line, without pipes, redirections or ';': {text!r}")
    expected = EXPECTED_EXIT.search(comment)
    return Command(line, text, words[1:], int(expected.group(1)) if expected else 0)


def _split_comment(text: str) -> tuple[str, str]:
    """``text`` cut where the shell's comment starts: a ``#`` at the start of a word, outside quotes."""
    quote = ""
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and quote != "'":
            index += 2  # an escaped character, quoted or not, starts nothing
            continue
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or text[index - 1].isspace()):
            return text[:index], text[index + 1 :]
        index += 1
    return text, ""
