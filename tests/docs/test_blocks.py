"""Which blocks of a document are runnable and what their lines run (README, "Runnable docs"); and, without a
broker, that every runnable block of README.md and docs/ is one the CLI parses and Python compiles."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from subroute.cli.main import build_parser
from tests.docs.blocks import DOCUMENTS, ROOT, Block, MarkerError, commands, runnable_blocks

DOC = Path("guide.markdown")  # any name: the path only labels the blocks

SAMPLE = """\
# Guide

```python
print("not marked: not run")
```

<!-- runnable file=conf/app.yaml -->
```yaml
apps:
  a: {}
```

<!-- runnable -->
~~~sh
subroute config apply -f conf/app.yaml
~~~

- a list item:

  <!--   runnable   -->
  ```python title
  import os
    # indented under the fence
  ```
"""


def test_marked_blocks_are_found_in_order_with_the_line_of_their_first_code_line() -> None:
    blocks = runnable_blocks(DOC, SAMPLE)
    assert [(b.kind, b.line, b.file) for b in blocks] == [
        ("file", 9, "conf/app.yaml"),
        ("sh", 15, None),
        ("python", 22, None),
    ]
    assert blocks[0].text == "apps:\n  a: {}\n"
    assert blocks[2].text == "import os\n  # indented under the fence\n"  # the fence's own indent removed


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("<!-- runnable -->\n\n```python\nx = 1\n```\n", "right above a fenced block"),
        ("<!-- runnable -->\nsubroute status\n", "right above a fenced block"),
        ("<!-- runnable -->", "right above a fenced block"),
        ("<!-- runnable -->\n```yaml\na: 1\n```\n", "only python and sh blocks run"),
        ("<!-- runnable -->\n```\nsubroute status\n```\n", "only python and sh blocks run"),
        ("<!-- runnable once -->\n```sh\nsubroute status\n```\n", "unknown runnable option 'once'"),
        (
            "<!-- runnable file=../up.yaml -->\n```yaml\na: 1\n```\n",
            "inside the document's working directory",
        ),
        ("<!-- runnable file=/etc/x -->\n```yaml\na: 1\n```\n", "inside the document's working directory"),
        ("<!-- runnable -->\n```sh\nsubroute status\n", "never closed"),
    ],
)
def test_a_marker_that_marks_no_block_the_test_can_take_is_an_error(text: str, error: str) -> None:
    with pytest.raises(MarkerError, match=error):
        runnable_blocks(DOC, text)


def _sh(text: str) -> Block:
    return Block(DOC, 10, "sh", text)


def test_only_lines_that_start_with_subroute_run_each_with_the_exit_its_comment_names() -> None:
    block = _sh(
        "make demo                       # for the reader\n"
        "render | subroute config validate -f -\n"
        "subroute config apply -f a.yaml --dry-run   # exit 0 when nothing changes\n"
        "subroute config diff -f a.yaml  # exit 1 if anything\n"
        "subroute expr check 'x # y == \"#\"' --type x=int \\\n"
        "  --prop x=1   # exit 2 with a caret\n"
        "  subroute status#not-a-comment\n"
    )
    found = [(c.line, c.argv, c.expected_exit) for c in commands(block)]
    assert found == [
        (12, ["config", "apply", "-f", "a.yaml", "--dry-run"], 0),
        (13, ["config", "diff", "-f", "a.yaml"], 1),
        (14, ["expr", "check", 'x # y == "#"', "--type", "x=int", "--prop", "x=1"], 2),
        (16, ["status#not-a-comment"], 0),
    ]


@pytest.mark.parametrize(
    "line",
    [
        "subroute config get > config.yaml",
        "subroute status | head",
        "subroute status; subroute dlq list a",
        "subroute status && subroute dlq list a",
    ],
)
def test_a_command_line_with_shell_operators_is_refused(line: str) -> None:
    with pytest.raises(MarkerError, match="one command a line"):
        commands(_sh(line + "\n"))


def test_an_unbalanced_quote_is_refused_with_the_line() -> None:
    with pytest.raises(MarkerError, match=r"guide\.markdown:10: cannot split"):
        commands(_sh("subroute expr check 'a == 1\n"))


def test_every_runnable_block_of_the_docs_parses_without_a_broker() -> None:
    """The quick half of tests/docs/test_runnable_docs.py: a renamed flag or a syntax error fails here first."""
    marked = {path: runnable_blocks(path) for path in DOCUMENTS}
    kinds = {
        str(path.relative_to(ROOT)): {b.kind for b in blocks} for path, blocks in marked.items() if blocks
    }
    # the docs this test was written for keep their examples runnable
    assert {"file", "sh"} <= kinds["README.md"]
    assert {"file", "sh", "python"} <= kinds["docs/queue-semantics.md"]
    parser = build_parser()
    for blocks in marked.values():
        for block in blocks:
            if block.kind == "python":
                compile("\n" * (block.line - 1) + block.text, str(block.path), "exec")
            elif block.kind == "sh":
                for command in commands(block):
                    stderr = io.StringIO()
                    with contextlib.redirect_stderr(stderr):
                        try:
                            parser.parse_args(command.argv)
                        except SystemExit:
                            pytest.fail(
                                f"{block.path.name}:{command.line}: {command.text}\n{stderr.getvalue()}"
                            )
