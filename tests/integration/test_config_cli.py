"""``subroute config`` against the real broker: what apply/delete write, which topics they create, and when
they write nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from confluent_kafka.admin import ConfigResource  # type: ignore[attr-defined]

from subroute import wire
from subroute.cli import main as cli
from subroute.config.codec import app_key, group_key
from subroute.config.store import history, read_config, read_state
from subroute.config.yaml import config_to_document, parse_yaml
from subroute.kafka import clients
from subroute.kafka.clients import TopicSpec, admin_client, ensure_topics, existing_topics
from subroute.ops.settings import Settings

pytestmark = pytest.mark.kafka

CONFIG = """
apps:
  billing:
    inputs: [INPUT]
    properties: {CustomerId: int, Amount: int, OrderType: string}
    filter: ['OrderType == "EXPRESS" || Amount > 1000']
    groups:
      vip:
        subscriptions:
          - {expression: 'CustomerId == 0', priority: 10}
      general:
        subscriptions:
          - {expression: 'CustomerId >= 0', priority: 5, max_unconfirmed: 1000}
      audit: {}
  sized:
    inputs: [INPUT]
    partitions: 2
    groups:
      only: {}
  regex:
    inputs: ['^REGEX_PREFIX']
    groups:
      r: {}
  fresh:
    inputs: [FRESH-never-created]
    groups:
      f: {}
"""


class Corner:
    """One test's part of the shared broker: its topic prefix, input topic and YAML files."""

    def __init__(self, bootstrap: str, unique: str, tmp_path: Path) -> None:
        self.settings = Settings(bootstrap_servers=bootstrap, topic_prefix=unique)
        self.unique = unique
        self.input = f"{unique}-orders"
        self.tmp_path = tmp_path

    def text(self, yaml_text: str) -> str:
        return (
            yaml_text.replace("INPUT", self.input)
            .replace("REGEX_PREFIX", f"{self.unique}-rx-")
            .replace("FRESH", self.unique)
        )

    def file(self, yaml_text: str, name: str = "subscriptions.yaml") -> str:
        path = self.tmp_path / name
        path.write_text(self.text(yaml_text))
        return str(path)

    def run(self, *argv: str) -> int:
        return cli(
            [*argv, "--bootstrap-servers", self.settings.bootstrap_servers, "--topic-prefix", self.unique]
        )

    def records(self) -> int:
        """Records on the config topic (tombstones and refused ones included; not transaction markers)."""
        if self.settings.config_topic not in self.topics():
            return 0
        read: list[int] = []
        read_state(self.settings, on_record=lambda state: read.append(state.version))
        return len(read)

    def topics(self) -> dict[str, int]:
        return existing_topics(admin_client(self.settings))


@pytest.fixture
def corner(kafka: object, unique: str, tmp_path: Path) -> Corner:
    return Corner(kafka.bootstrap_servers, unique, tmp_path)  # type: ignore[attr-defined]


def test_apply_writes_records_and_creates_topics(corner: Corner, capsys: pytest.CaptureFixture[str]) -> None:
    admin = admin_client(corner.settings)
    ensure_topics(
        admin,
        [
            TopicSpec(corner.input, 3),
            TopicSpec(f"{corner.unique}-rx-a", 2),
            TopicSpec(f"{corner.unique}-rx-b", 4),
        ],
    )
    assert corner.run("config", "apply", "-f", corner.file(CONFIG)) == 0
    out = capsys.readouterr().out
    assert "+ app/billing" in out and "+ group/billing/vip" in out and "wrote 10 record(s)" in out

    desired = parse_yaml(corner.text(CONFIG)).values
    config = read_config(corner.settings)
    assert config.version == 10
    assert {
        **{app_key(a): v for a, v in config.apps.items()},
        **{group_key(*k): v for k, v in config.groups.items()},
    } == desired

    topics = corner.topics()
    p = corner.unique
    assert topics[wire.config_topic(p)] == 1
    expected = {
        "billing": (3, ["vip", "general", "audit"]),  # the input's partition count
        "sized": (2, ["only"]),  # partitions: says so
        "regex": (4, ["r"]),  # the largest existing topic the regex matches
        "fresh": (1, ["f"]),  # no input exists yet
    }
    for app, (count, groups) in expected.items():
        for topic in [wire.pending_topic(p, app), wire.dlq_topic(p, app)] + [
            wire.group_topic(p, app, g) for g in groups
        ]:
            assert topics.get(topic) == count, topic

    resource = ConfigResource(ConfigResource.Type.TOPIC, wire.config_topic(p))
    described = admin.describe_configs([resource])[resource].result(timeout=10)
    assert described["cleanup.policy"].value == "compact"


def test_apply_again_writes_nothing(corner: Corner, capsys: pytest.CaptureFixture[str]) -> None:
    path = corner.file(CONFIG)
    assert corner.run("config", "apply", "-f", path) == 0
    before = corner.records()
    capsys.readouterr()
    assert corner.run("config", "apply", "-f", path) == 0
    assert "no changes" in capsys.readouterr().out
    assert corner.records() == before == 10


def test_apply_writes_only_what_changed(corner: Corner, capsys: pytest.CaptureFixture[str]) -> None:
    assert corner.run("config", "apply", "-f", corner.file(CONFIG)) == 0
    changed = CONFIG.replace("'CustomerId == 0', priority: 10", "'CustomerId == 1', priority: 10")
    capsys.readouterr()
    assert corner.run("config", "apply", "-f", corner.file(changed, "v2.yaml")) == 0
    out = capsys.readouterr().out
    assert "~ group/billing/vip" in out and "wrote 1 record(s)" in out
    assert corner.records() == 11
    assert (
        read_config(corner.settings).groups[("billing", "vip")].subscriptions[0].expression
        == "CustomerId == 1"
    )


def test_bad_config_writes_nothing_and_shows_every_error(
    corner: Corner, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = CONFIG.replace("'CustomerId == 0'", "'CustomerId == '").replace("audit: {}", "pending: {}")
    assert corner.run("config", "apply", "-f", corner.file(bad)) == 2
    err = capsys.readouterr().err
    assert "apps.billing.groups.vip.subscriptions[0].expression" in err
    lines = err.splitlines()
    shown = next(i for i, line in enumerate(lines) if line.strip() == "CustomerId ==")
    assert lines[shown + 1].strip() == "^"
    assert "apps.billing.groups.pending" in err and "reserved" in err
    assert "2 error(s): nothing was written" in err
    assert not [t for t in corner.topics() if t.startswith(corner.unique)]


def test_dry_run_writes_nothing(corner: Corner, capsys: pytest.CaptureFixture[str]) -> None:
    assert corner.run("config", "apply", "--dry-run", "-f", corner.file(CONFIG)) == 0
    out = capsys.readouterr().out
    assert "+ app/billing" in out and "dry run: nothing written" in out
    assert not [t for t in corner.topics() if t.startswith(corner.unique)]


def test_prune_deletes_what_the_file_no_longer_names(
    corner: Corner, capsys: pytest.CaptureFixture[str]
) -> None:
    assert corner.run("config", "apply", "-f", corner.file(CONFIG)) == 0
    smaller = CONFIG.split("  sized:")[0].replace("      audit: {}\n", "")
    path = corner.file(smaller, "smaller.yaml")
    capsys.readouterr()
    assert corner.run("config", "apply", "-f", path) == 0
    assert "kept 7 record(s) the file does not name" in capsys.readouterr().out
    assert corner.records() == 10

    # diff says what apply with the same flags would do: nothing without --prune, the deletions with it
    assert corner.run("config", "diff", "-f", path) == 0
    assert (
        capsys.readouterr().out
        == "no changes\nkept 7 record(s) the file does not name (use --prune to delete them)\n"
    )
    assert corner.run("config", "diff", "--prune", "-f", path) == 1
    diffed = capsys.readouterr().out
    assert corner.run("config", "apply", "--prune", "--dry-run", "-f", path) == 0
    assert capsys.readouterr().out == diffed + "dry run: nothing written\n"
    assert corner.run("config", "apply", "--prune", "-f", path) == 0
    out = capsys.readouterr().out
    assert "- group/billing/audit" in out and "- app/fresh" in out
    config = read_config(corner.settings)
    assert set(config.apps) == {"billing"}
    assert set(config.groups) == {("billing", "vip"), ("billing", "general")}
    assert corner.run("config", "diff", "-f", path) == 0


def test_get_prints_what_apply_wrote(corner: Corner, capsys: pytest.CaptureFixture[str]) -> None:
    assert corner.run("config", "apply", "-f", corner.file(CONFIG)) == 0
    capsys.readouterr()
    assert corner.run("config", "get") == 0
    as_yaml = capsys.readouterr().out
    assert as_yaml.startswith("# config version 10 ")
    assert parse_yaml(as_yaml).values == parse_yaml(corner.text(CONFIG)).values
    assert corner.run("config", "get", "-o", "json") == 0
    whole = json.loads(capsys.readouterr().out)
    config = read_config(corner.settings)
    assert whole == {
        "version": config.version,
        "config_topic": corner.settings.config_topic,
        "config": config_to_document(config),
    }
    assert corner.run("config", "get", "-o", "table") == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0] == f"config version {config.version}"
    assert table[1].split() == ["app", "inputs", "group", "priority", "max_unconfirmed", "expression"]
    general = next(line for line in table if " general " in line)
    assert general.split()[:5] == ["billing", corner.input, "general", "5", "1000"]
    # What get prints can be applied again as it is.
    assert corner.run("config", "diff", "-f", corner.file(as_yaml, "got.yaml")) == 0


def test_get_never_prints_secrets(corner: Corner, capsys: pytest.CaptureFixture[str]) -> None:
    assert corner.run("config", "apply", "-f", corner.file(CONFIG)) == 0
    capsys.readouterr()
    assert corner.run("config", "get", "--kafka-config", "sasl.password=hunter2-secret") == 0
    captured = capsys.readouterr()
    assert "hunter2" not in captured.out + captured.err


def test_delete_dry_run_shows_the_keys_and_writes_nothing(
    corner: Corner, capsys: pytest.CaptureFixture[str]
) -> None:
    assert corner.run("config", "apply", "-f", corner.file(CONFIG)) == 0
    records, config = corner.records(), read_config(corner.settings)
    capsys.readouterr()
    assert corner.run("config", "delete", "group", "billing", "audit", "--dry-run") == 0
    out = capsys.readouterr().out
    assert f"- {group_key('billing', 'audit')}\n" in out
    assert "dry run: would delete group audit of app billing; nothing written" in out
    assert corner.run("config", "delete", "app", "billing", "--dry-run") == 0
    out = capsys.readouterr().out
    assert all(f"- {k}\n" in out for k in (app_key("billing"), group_key("billing", "vip")))
    assert "dry run: would delete app billing and 3 group(s); nothing written" in out
    assert corner.run("config", "delete", "app", "nope", "--dry-run") == 2
    assert corner.run("config", "delete", "group", "billing", "nope", "--dry-run") == 2
    assert corner.records() == records
    assert read_config(corner.settings) == config


def test_delete_tombstones_an_app_and_its_groups(corner: Corner, capsys: pytest.CaptureFixture[str]) -> None:
    assert corner.run("config", "apply", "-f", corner.file(CONFIG)) == 0
    assert corner.run("config", "delete", "group", "billing", "audit") == 0
    assert ("billing", "audit") not in read_config(corner.settings).groups
    assert corner.run("config", "delete", "app", "billing") == 0
    assert "deleted app billing and 2 group(s)" in capsys.readouterr().out
    assert corner.records() == 10 + 1 + 3

    configs = history(corner.settings)
    tail = [(sorted(c.apps), len(c.groups)) for c in list(configs.values())[-4:]]
    assert tail == [
        (["billing", "fresh", "regex", "sized"], 5),
        (["billing", "fresh", "regex", "sized"], 4),  # inside the delete: never published by a worker
        (["billing", "fresh", "regex", "sized"], 3),
        (["fresh", "regex", "sized"], 3),
    ]
    assert corner.run("config", "delete", "app", "billing") == 2  # not found: input refused, as everywhere
    assert corner.run("config", "delete", "group", "sized", "nope") == 2
    assert "has no group 'nope'" in capsys.readouterr().err


def test_unreachable_broker_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        cli(
            [
                "config",
                "get",
                "--bootstrap-servers",
                "127.0.0.1:1",
                "--kafka-config",
                "socket.timeout.ms=1000",
            ]
        )
        == 3  # Kafka failed: not 1, which `config diff` uses for "differences"
    )
    assert "subroute: Kafka at 127.0.0.1:1" in capsys.readouterr().err


def test_get_on_an_empty_prefix_prints_no_apps_and_fails(
    corner: Corner, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped --topic-prefix reads an empty config topic: nothing to get is an error naming the prefix."""
    assert corner.run("config", "get") == 2
    captured = capsys.readouterr()
    assert yaml.safe_load(captured.out) == {"apps": {}}
    assert captured.err.startswith(
        f"subroute: no configuration under topic prefix {corner.settings.topic_prefix!r}"
    )
    assert "--topic-prefix" in captured.err


def test_apply_checks_limits_on_the_file_plus_the_records_it_keeps(
    kafka, unique, monkeypatch, capsys
) -> None:
    from subroute.config.store import read_config
    from tests.integration.harness import apply, make_env

    monkeypatch.setenv("SUBROUTE_MAX_SUBSCRIPTIONS_TOTAL", "3")
    env = make_env(kafka.bootstrap_servers, unique)
    first = "apps:\n  a:\n    inputs: [INPUT]\n    properties: {x: int}\n    groups:\n      g: {subscriptions: ['x == 1', 'x == 2']}\n"
    second = "apps:\n  b:\n    inputs: [INPUT]\n    properties: {x: int}\n    groups:\n      g: {subscriptions: ['x == 1', 'x == 2']}\n"
    assert apply(env, first) == 0
    version = read_config(env.settings).version
    assert apply(env, second) == 2  # a's 2 are kept: 4 in force would pass the limit of 3
    assert "SUBROUTE_MAX_SUBSCRIPTIONS_TOTAL" in capsys.readouterr().err
    assert read_config(env.settings).version == version
    assert apply(env, second, "--prune") == 0  # a is deleted: 2 in force


def test_apply_creates_band_topics_and_keeps_parked_records(corner: Corner, kafka) -> None:
    from subroute.kafka.clients import topic_settings

    ranked = "apps:\n  ranked:\n    inputs: [INPUT]\n    priority: '1'\n    groups:\n      g: {}\n"
    assert corner.run("config", "apply", "-f", corner.file(ranked)) == 0
    topics = corner.topics()
    group = f"{corner.unique}.ranked.g"
    assert {group, *(f"{group}.p{band}" for band in range(1, 10))} <= set(topics)  # before any worker ran
    admin = admin_client(corner.settings)
    for parked in (f"{corner.unique}.ranked.pending", f"{corner.unique}.ranked.dlq"):
        _, config = topic_settings(admin, parked)
        assert config["retention.ms"] == "-1", parked
        assert config["retention.bytes"] == "-1", parked


def test_group_retention_and_replication_factor_reach_the_topics_apply_creates(
    corner: Corner, kafka, capsys: pytest.CaptureFixture[str]
) -> None:
    from subroute.kafka.clients import topic_settings

    plain = "apps:\n  plain:\n    inputs: [INPUT]\n    groups:\n      g: {}\n"
    assert corner.run("config", "apply", "-f", corner.file(plain), "--group-retention-ms", "3600000") == 0
    _, config = topic_settings(admin_client(corner.settings), f"{corner.unique}.plain.g")
    assert config["retention.ms"] == "3600000"
    _, parked = topic_settings(admin_client(corner.settings), f"{corner.unique}.plain.dlq")
    assert parked["retention.ms"] == "-1"

    # One broker cannot hold 2 replicas: Apache Kafka refuses the topics, so the factor reached the broker, and
    # apply writes nothing (topics come before records). Tansu accepts any factor (docs/brokers.md).
    written = corner.records()
    more = plain.replace("plain:", "other:")
    code = corner.run("config", "apply", "-f", corner.file(more), "--replication-factor", "2")
    if kafka.is_tansu:
        assert code == 0
        return
    assert code == 3
    assert "replication" in capsys.readouterr().err.lower()
    assert corner.records() == written


def test_apply_validates_the_whole_config_it_leaves_in_force(
    corner: Corner, capsys: pytest.CaptureFixture[str]
) -> None:
    """Workers refuse a version that is not valid as a whole, so apply checks the file plus what it keeps: an
    app retyped by the file must still fit the groups the file does not name."""
    assert corner.run("config", "apply", "-f", corner.file(CONFIG)) == 0
    before = corner.records()
    retyped = "apps:\n  billing:\n    inputs: [INPUT]\n    properties: {CustomerId: string}\n"
    capsys.readouterr()
    assert corner.run("config", "apply", "-f", corner.file(retyped, "retyped.yaml")) == 2
    err = capsys.readouterr().err
    assert "apps.billing.groups.vip" in err and "nothing was written" in err
    assert corner.records() == before
    assert corner.run("config", "apply", "--prune", "-f", corner.file(retyped, "retyped.yaml")) == 0


def test_an_unreadable_record_is_named_and_pruned(corner: Corner, capsys: pytest.CaptureFixture[str]) -> None:
    from subroute.kafka.clients import producer

    assert corner.run("config", "apply", "-f", corner.file(CONFIG)) == 0
    hand = producer(corner.settings)
    hand.produce(corner.settings.config_topic, key=b"app/stray", value=b"\x00garbage")
    assert hand.flush(10) == 0
    capsys.readouterr()
    assert corner.run("config", "apply", "-f", corner.file(CONFIG)) == 2
    assert "app/stray" in capsys.readouterr().err
    assert corner.run("config", "apply", "--prune", "-f", corner.file(CONFIG)) == 0
    assert "- app/stray (unreadable record)" in capsys.readouterr().out
    assert sorted(read_config(corner.settings).apps) == ["billing", "fresh", "regex", "sized"]


def test_apply_refuses_an_input_that_reads_subroutes_own_topics(
    corner: Corner, capsys: pytest.CaptureFixture[str]
) -> None:
    assert corner.run("config", "apply", "-f", corner.file(CONFIG)) == 0
    before = corner.records()
    thief = "apps:\n  thief:\n    inputs: ['^.*']\n    groups:\n      g: {}\n"
    capsys.readouterr()
    assert corner.run("config", "apply", "-f", corner.file(thief, "thief.yaml")) == 2
    err = capsys.readouterr().err
    assert "apps.thief.inputs[0]: selects subroute's own topic" in err and "\n  ^.*\n  ^" in err
    assert corner.records() == before
    # Written by hand anyway, the version is refused by every reader: the last good one stays in force.
    from subroute.config.codec import encode
    from subroute.config.model import AppConfig
    from subroute.config.store import ConfigVersionRefused
    from subroute.kafka.clients import producer

    key, value, headers = encode(AppConfig(name="thief", inputs=(f"{corner.unique}.billing.vip",)))
    hand = producer(corner.settings)
    hand.produce(corner.settings.config_topic, key=key.encode(), value=value, headers=headers)
    assert hand.flush(10) == 0
    with pytest.raises(ConfigVersionRefused, match="selects subroute's own topic"):
        read_config(corner.settings)


def test_explain_prints_table_json_and_yaml(corner: Corner, capsys: pytest.CaptureFixture[str]) -> None:
    assert corner.run("config", "apply", "-f", corner.file(CONFIG)) == 0
    capsys.readouterr()
    argv = ("explain", "--app", "billing", "--header", "CustomerId=0", "--header", "OrderType=EXPRESS")
    assert corner.run(*argv, "-o", "json") == 0
    document = json.loads(capsys.readouterr().out)
    assert document["config_version"] == read_config(corner.settings).version
    [billing] = document["apps"]
    assert (
        billing["app"] == "billing" and billing["action"]
    )  # where it goes depends on presence (no consumers)
    matched = [s["expression"] for s in billing["subscriptions"] if s["match"]]
    assert "CustomerId == 0" in matched
    assert corner.run(*argv, "-o", "yaml") == 0
    assert yaml.safe_load(capsys.readouterr().out) == document
    assert corner.run(*argv) == 0  # table (the default): for people
    text = capsys.readouterr().out
    assert text.startswith(f"config version {document['config_version']}\n") and "billing" in text


def test_explain_reads_a_stored_record_and_answers_at_once_where_there_is_none(
    corner: Corner, capsys: pytest.CaptureFixture[str]
) -> None:
    assert corner.run("config", "apply", "-f", corner.file(CONFIG)) == 0
    producer = clients.producer(corner.settings)
    producer.produce(corner.input, value=b"x", headers=[("CustomerId", b"0"), ("OrderType", b"EXPRESS")])
    producer.flush(10)
    capsys.readouterr()
    where = ["--topic", corner.input, "--partition", "0"]
    assert corner.run("explain", *where, "--offset", "0", "-o", "json") == 0
    [billing] = [a for a in json.loads(capsys.readouterr().out)["apps"] if a["app"] == "billing"]
    assert "CustomerId == 0" in [s["expression"] for s in billing["subscriptions"] if s["match"]]
    for missing in (["--offset", "5"], ["--offset", "-3"], ["--partition", "9", "--offset", "0"]):
        argv = ["explain", "--topic", corner.input, "--partition", "0", *missing]
        assert corner.run(*argv) == 2
        assert "no record at" in capsys.readouterr().err
    # Past the end, the read gives up at once: with the time it is allowed, a wait would outlast the test's limit.
    assert clients.read_record(corner.settings, corner.input, 0, 1, timeout=3600) is None


@pytest.mark.parametrize(
    "command",
    [
        ["config", "diff", "-f", "FILE"],
        ["dlq", "list", "billing"],
        ["explain", "--app", "billing", "--header", "CustomerId=1"],
        ["status"],
    ],
    ids=["config-diff", "dlq-list", "explain", "status"],
)
def test_every_command_reports_an_unreachable_broker_as_exit_3(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not 1 (``config diff``'s "differences"), not a traceback: one line naming the broker."""
    config = tmp_path / "subscriptions.yaml"
    config.write_text("apps:\n  billing:\n    inputs: [orders]\n    groups:\n      g: {}\n")
    argv = [str(config) if part == "FILE" else part for part in command]
    closed = ["--bootstrap-servers", "127.0.0.1:1", "--kafka-config", "socket.timeout.ms=1000"]
    assert cli([*argv, *closed]) == 3
    err = capsys.readouterr().err
    assert "subroute: Kafka at 127.0.0.1:1" in err and "Traceback" not in err
