"""Every runnable block of README.md and docs/*.md runs as written, against the real broker (README, "Runnable
docs"): a renamed module, function or flag breaks this test, not a reader's first try."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.blocks import DOCUMENTS, ROOT, runnable_blocks
from tests.docs.session import DocSession

pytestmark = pytest.mark.kafka

RUNNABLE = [path for path in DOCUMENTS if any(block.kind != "file" for block in runnable_blocks(path))]


@pytest.mark.parametrize("document", RUNNABLE, ids=[str(path.relative_to(ROOT)) for path in RUNNABLE])
def test_the_runnable_blocks_of_the_document_run(document: Path, kafka, unique: str, tmp_path: Path) -> None:
    with DocSession(tmp_path, kafka.bootstrap_servers, unique) as session:
        for block in runnable_blocks(document):
            session.run(block)
        # the document's commands and code never stopped the router running beside them
        assert session.stop_worker() == 0, session.worker_log.read_text(errors="replace")[-4000:]
