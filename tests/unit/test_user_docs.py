"""What the README promises consumers and operators holds: the header contract names every ``subroute.*`` header
a consumer can meet and no other, the kcat example reads a real group topic of the example config, the
GitOps Job's ``--prune`` is documented with args the CLI accepts, and every repository path and document that
README.md, deploy/README.md, docs/ and the code mention exists (links to their anchors, docs/design.md to its
sections), so a move or a rename fails here."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
import yaml

from subroute import wire
from subroute.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DEPLOY_README = (ROOT / "deploy" / "README.md").read_text()


def _contract_rows() -> dict[str, str]:
    section = README.split("### The header contract", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `(subroute\.[a-z-]+)` \|(.*)$", section, flags=re.MULTILINE)
    return dict(rows)


def _record_headers() -> set[str]:
    """Every header name the router or the client can put on a record a consumer reads."""
    constants = {
        value
        for name, value in vars(wire).items()
        if name.isupper() and isinstance(value, str) and re.fullmatch(r"subroute\.[a-z-]+", value)
    }
    return constants - {wire.DEFAULT_MESSAGE_GROUP}  # a key, not a header


def test_the_header_contract_names_every_header_and_only_those() -> None:
    rows = _contract_rows()
    assert set(rows) == _record_headers()
    for header, text in rows.items():
        assert text.count("|") >= 2 and all(cell.strip() for cell in text.split("|")[:2]), header


def test_the_kcat_example_reads_a_group_topic_of_the_example_config_with_its_headers() -> None:
    block = README.split("### Reading a group topic with kcat", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    argv = shlex.split(block.replace("\\\n", " "))
    assert argv[:2] == ["kcat", "-C"]
    topic = argv[argv.index("-t") + 1]
    assert "%h" in argv[argv.index("-f") + 1]  # the headers are printed
    example = yaml.safe_load((ROOT / "examples" / "subscriptions.yaml").read_text())
    topics = {
        wire.group_topic(wire.DEFAULT_TOPIC_PREFIX, app, group)
        for app, spec in example["apps"].items()
        for group in spec["groups"]
    }
    assert topic in topics


def test_the_gitops_job_documents_prune_with_args_the_cli_accepts() -> None:
    section = DEPLOY_README.split("### The config Job (GitOps)", 1)[1].split("\n## ", 1)[0]
    assert "`--prune`" in section
    patch = yaml.safe_load(section.split("```yaml", 1)[1].split("```", 1)[0])
    [operation] = patch
    assert operation["path"] == "/spec/template/spec/containers/0/args"
    args = build_parser().parse_args(operation["value"])
    assert args.prune is True and args.file == "/config/subscriptions.yaml"
    job = yaml.safe_load((ROOT / "deploy" / "k8s" / "base" / "config-apply-job.yaml").read_text())
    [container] = job["spec"]["template"]["spec"]["containers"]
    base = build_parser().parse_args(container["args"])
    assert base.prune is False and base.file == args.file  # the patch changes nothing but --prune


# --- Every repository path the user docs mention exists, so a move or a rename breaks a test. ---

DOCUMENTS = [ROOT / "README.md", ROOT / "deploy" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# The repository's top-level entries, and router/'s rooms, which README's code map names relative to router/
# (`routing/decisions.py`). Written out rather than listed from disk, so that a moved folder is not silently
# taken off the list of prefixes whose paths are checked.
TOP_LEVEL = {
    "expressions",
    "router",
    "schemas",
    "spark",
    "deploy",
    "tests",
    "docs",
    "examples",
    "jars",
    ".ci",
}
ROUTER_ROOMS = {"admin", "cli", "client", "config", "dev", "kafka", "ops", "routing", "worker"}
FILE_SUFFIXES = r"py|pyi|rs|md|yaml|yml|json|avsc|lark|toml|xml|lock"
BARE_FILE = re.compile(rf"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.(?:{FILE_SUFFIXES})")
CODE_BLOCK = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")
URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s)>]+")
TOKEN_SEPARATORS = re.compile(r"[\s`()\[\]{}<>,;\"'|]+")
SKIPPED_DIRS = {"node_modules", "__pycache__", "target"}


def _repository_files() -> set[str]:
    """Base names of the files under the top-level folders (and at the top), for mentions by name alone."""
    found = {p.name for p in ROOT.iterdir() if p.is_file()}
    for top in TOP_LEVEL:
        for _folder, subfolders, files in os.walk(ROOT / top):
            subfolders[:] = [d for d in subfolders if d not in SKIPPED_DIRS and not d.startswith(".")]
            found.update(files)
            found.update(subfolders)
    return found


def _resolves(mention: str, document: Path) -> bool:
    """``mention`` names something in the repository: from the document's folder, from the root, or (the
    code map's way) from router/. A glob must match at least one file."""
    path = mention.split("#", 1)[0].rstrip("/")
    bases = [document.parent, ROOT, ROOT / "router"]
    return any(list(base.glob(path)) if "*" in path else (base / path).exists() for base in bases)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (hyphens and underscores kept), spaces
    to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(document: Path) -> set[str]:
    text = CODE_BLOCK.sub("", document.read_text())
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)}


def _path_mentions(text: str) -> set[str]:
    """Tokens shaped like a repository path (``a/b``, ``a/``, ``a/*.lark``) whose first part is a top-level
    folder or a room of router/: any in code (backticks, blocks), and in prose those that end like a file or
    a folder (prose has ratios such as "router/pipe"). Absolute paths and URLs are not repository paths."""
    blocks = CODE_BLOCK.findall(text)
    prose = CODE_BLOCK.sub(" ", text)
    code = [*blocks, *re.findall(r"`([^`\n]+)`", prose)]
    prose = re.sub(r"`[^`\n]*`", " ", prose)
    found: set[str] = set()
    for chunk, in_code in [*((c, True) for c in code), (prose, False)]:
        for token in TOKEN_SEPARATORS.split(URL.sub(" ", chunk)):
            token = token.rstrip(".:*")
            if "/" not in token or token.startswith(("/", "~", ".cache")) or re.search(r"[…=$]", token):
                continue
            if token.split("/", 1)[0] not in TOP_LEVEL | ROUTER_ROOMS:
                continue
            if in_code or token.endswith("/") or BARE_FILE.fullmatch(token.rsplit("/", 1)[1]):
                found.add(token)
    return found


def _name_mentions(text: str) -> set[str]:
    """Files named alone (``checkpoint.py``, ``DESIGN.md``): in prose and as a whole backtick span, not inside
    commands, where names like ``NEW.yaml`` are the user's own."""
    prose = CODE_BLOCK.sub("", text)
    spans = set(re.findall(r"`([^`\n]+)`", prose))
    prose = re.sub(r"`[^`\n]*`", " ", URL.sub(" ", prose))
    words = {word.rstrip(".:*") for word in TOKEN_SEPARATORS.split(prose)}
    return {name for name in spans | words if BARE_FILE.fullmatch(name)}


def _broken_mentions(document: Path) -> list[str]:
    text = document.read_text()
    broken: list[str] = []
    for target in LINK.findall(text):
        if URL.match(target) or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        linked = (document.parent / path) if path else document
        if not linked.exists():
            broken.append(f"link {target}")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"link {target}: no heading with that anchor")
    broken += [f"path {m}" for m in sorted(_path_mentions(text)) if not _resolves(m, document)]
    files = _repository_files()
    broken += [f"file {m}" for m in sorted(_name_mentions(text)) if m not in files]
    return broken


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_the_docs_mention_exists(document: Path) -> None:
    assert _broken_mentions(document) == []


def test_the_path_check_finds_a_moved_file_a_missing_anchor_and_a_missing_document(tmp_path: Path) -> None:
    document = tmp_path / "doc.md"
    document.write_text(
        "# Title\n\nSee `router/routing/decided.py`, [the rule](#no-such-heading), DESIGN.md §2 and\n"
        "[semantics](../nowhere.md); `router/routing/decisions.py` and [title](#title) are fine.\n"
    )
    assert _broken_mentions(document) == [
        "link #no-such-heading: no heading with that anchor",
        "link ../nowhere.md",
        "path router/routing/decided.py",
        "file DESIGN.md",
    ]


# --- Every document the code and the docs cite is in the repository, down to the design's sections. ---

DESIGN = ROOT / "docs" / "design.md"
CITATION = re.compile(r"(?<![\w./-])([\w./-]*[\w-]\.md)\b((?:,? §\d+)*)")
SOURCE_SUFFIXES = {".py", ".pyi", ".rs", ".toml", ".yaml", ".yml", ".md", ".lark"}


def _design_sections() -> set[str]:
    return set(re.findall(r"^## (\d+)\. ", DESIGN.read_text(), flags=re.MULTILINE))


def _cited(path: Path) -> list[str]:
    """Documents ``path`` cites (``docs/brokers.md``, ``docs/design.md §2, §5``) that are not in the
    repository, or design sections that do not exist."""
    broken: list[str] = []
    files = _repository_files()
    for document, sections in CITATION.findall(path.read_text()):
        if not (_resolves(document, path) or ("/" not in document and document in files)):
            broken.append(document)
        elif Path(document).name == DESIGN.name:
            broken += [
                f"{document} §{n}" for n in re.findall(r"\d+", sections) if n not in _design_sections()
            ]
    return broken


def _sources() -> list[Path]:
    found = [ROOT / "Makefile", ROOT / "pyproject.toml", *DOCUMENTS]
    for top in TOP_LEVEL:
        for folder, subfolders, files in os.walk(ROOT / top):
            subfolders[:] = [d for d in subfolders if d not in SKIPPED_DIRS and not d.startswith(".")]
            found += [Path(folder, f) for f in files if Path(f).suffix in SOURCE_SUFFIXES]
    # This file names missing documents on purpose, to show they are found.
    return sorted(set(found) - {Path(__file__).resolve()})


def test_every_document_the_code_and_docs_cite_is_in_the_repository() -> None:
    broken = {str(p.relative_to(ROOT)): b for p in _sources() if (b := _cited(p))}
    assert broken == {}


def test_the_citation_check_finds_a_missing_document_and_a_missing_section(tmp_path: Path) -> None:
    source = tmp_path / "module.py"
    source.write_text(
        '"""Routes per DESIGN.md §2 and docs/design.md §2, §5, §42; see docs/brokers.md, BROKER-NOTES.md."""\n'
    )
    assert _cited(source) == ["DESIGN.md", "docs/design.md §42", "BROKER-NOTES.md"]
