"""What the README promises consumers and operators holds: the header contract names every ``subroute.*`` header
a consumer can meet and no other, the kcat example reads a real group topic of the example config, and the
GitOps Job's ``--prune`` is documented with args the CLI accepts."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from subroute import names
from subroute.cli.main import build_parser
from subroute.client.delivery import CANCELS, MOVED_FROM

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
        for name, value in vars(names).items()
        if name.isupper() and isinstance(value, str) and re.fullmatch(r"subroute\.[a-z-]+", value)
    }
    # a key, not a header
    return (constants - {names.DEFAULT_MESSAGE_GROUP}) | {CANCELS, MOVED_FROM}  # the client's own


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
        names.group_topic(names.DEFAULT_TOPIC_PREFIX, app, group)
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
