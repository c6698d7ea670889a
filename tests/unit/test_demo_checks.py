"""``make demo`` checks what it shows (router/dev/demo_checks.py) and CI runs it (.ci/run); these tests hold the
checks themselves, without a broker or Spark, so that `make test` fails too when the demo's outcome would break:
the demo's edits of examples/subscriptions.yaml still do what it says (one refused with a caret, one that
redrives waiting records), the example gives every group records, and each check passes on the demo's real
output and reports each way that output can go wrong."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from subroute.cli import main as cli
from subroute.config.model import AppConfig, Config, GroupConfig
from subroute.config.yaml import parse_yaml
from subroute.dev import demo
from subroute.dev import demo_checks as checks
from subroute.dev.samples import ORDER_SCHEMA, orders

EXAMPLE = demo.EXAMPLE.read_text()
COUNT = 1000  # the demo's orders, fewer


def config_of(text: str, version: int) -> Config:
    parsed = parse_yaml(text, str(demo.EXAMPLE))  # its schema: file is read beside the example
    assert not parsed.errors
    apps = {v.name: v for v in parsed.values.values() if isinstance(v, AppConfig)}
    groups = {(v.app, v.name): v for v in parsed.values.values() if isinstance(v, GroupConfig)}
    return Config(version, apps, groups)


FIRST = config_of(EXAMPLE, 13)
SECOND = config_of(demo.apac_config(EXAMPLE), 14)
RECORDS = demo.produced(list(orders(COUNT)))  # each order as JSON to orders, then as Avro to orders-avro


def expected(*versions: Config) -> tuple[Counter[tuple[str, str]], Counter[str]]:
    found = checks.expected_destinations(versions, RECORDS, 0)
    return found.destinations, found.redriven


# --- the demo's configuration steps, offline ---------------------------------------------------------------


def test_the_demos_bad_config_is_refused_with_a_caret_under_the_fault(tmp_path: Path, capsys) -> None:
    shutil.copy(ORDER_SCHEMA, tmp_path)  # the Avro app's schema file, beside the edited example
    bad = tmp_path / "bad.yaml"
    bad.write_text(demo.refused_config(EXAMPLE))
    code = cli(["config", "validate", "-f", str(bad)])
    assert checks.check_refusal(code, capsys.readouterr().err, 13, 13) == []


def test_the_demos_apac_subscription_is_valid_and_takes_records_that_waited(tmp_path: Path) -> None:
    shutil.copy(ORDER_SCHEMA, tmp_path)
    updated = tmp_path / "apac.yaml"
    updated.write_text(demo.apac_config(EXAMPLE))
    assert cli(["config", "validate", "-f", str(updated)]) == 0
    _, redriven = expected(FIRST, SECOND)
    assert redriven["fulfilment"] > 0
    assert checks.check_redriven(redriven["fulfilment"], sum(redriven.values())) == []


def test_an_edit_the_example_no_longer_allows_is_an_error_not_a_silent_no_op() -> None:
    with pytest.raises(ValueError, match="no longer holds"):
        demo.refused_config(EXAMPLE.replace("'CustomerId < 10'", "'CustomerId < 11'"))


def test_the_example_gives_every_group_records_and_accounts_for_every_record_in_every_app() -> None:
    found, _ = expected(FIRST)
    for app in FIRST.apps:
        assert sum(n for (a, _), n in found.items() if a == app) == COUNT
        for group in FIRST.groups_of(app):
            assert found[(app, group.name)] > 0, (app, group.name)
    assert checks.check_destinations("run", FIRST, COUNT, found, found) == []


# --- where the messages went ---------------------------------------------------------------------------------


def test_groups_chosen_by_turns_are_compared_as_one_total_and_others_one_by_one() -> None:
    assert sorted(map(sorted, checks.turn_taking(FIRST, "billing"))) == [["general", "general-2"], ["vip"]]
    assert sorted(map(sorted, checks.turn_taking(FIRST, "fulfilment"))) == [["eu", "us"], ["large"]]
    assert sorted(map(sorted, checks.turn_taking(FIRST, "carts"))) == [["shard-a"], ["shard-b"], ["shard-c"]]
    want, _ = expected(FIRST)
    shifted = Counter(want)
    shifted[("billing", "general")] -= 5  # the turns fell differently
    shifted[("billing", "general-2")] += 5
    assert checks.check_destinations("run", FIRST, COUNT, want, shifted) == []
    moved = Counter(want)
    moved[("carts", "shard-a")] -= 1  # a message group placed elsewhere
    moved[("carts", "shard-b")] += 1
    assert checks.check_destinations("run", FIRST, COUNT, want, moved) == [
        f"run: carts shard-a: {want[('carts', 'shard-a')] - 1} read back, {want[('carts', 'shard-a')]} "
        "expected from the config",
        f"run: carts shard-b: {want[('carts', 'shard-b')] + 1} read back, {want[('carts', 'shard-b')]} "
        "expected from the config",
    ]


def test_a_record_missing_from_an_app_is_reported() -> None:
    want, _ = expected(FIRST)
    lost = Counter(want)
    lost[("fulfilment", checks.PENDING)] -= 1
    assert checks.check_destinations("run", FIRST, COUNT, want, lost) == [
        f"run: fulfilment: {COUNT - 1} records accounted for, {COUNT} produced",
        f"run: fulfilment (pending, waiting): {want[('fulfilment', checks.PENDING)] - 1} read back, "
        f"{want[('fulfilment', checks.PENDING)]} expected from the config",
    ]


def test_after_the_change_waiting_records_are_expected_where_the_new_version_sends_them() -> None:
    before, _ = expected(FIRST)
    after, redriven = expected(FIRST, SECOND)
    assert after[("fulfilment", "apac")] == redriven["fulfilment"] > 0
    assert (
        after[("fulfilment", checks.PENDING)]
        == before[("fulfilment", checks.PENDING)] - redriven["fulfilment"]
    )
    assert checks.check_destinations("after", SECOND, COUNT, after, before) != []
    assert checks.check_redriven(0, redriven["fulfilment"]) != []


def test_where_the_broker_drops_commit_metadata_pending_records_routed_past_are_not_a_failure() -> None:
    # Tansu: the records a pass routed past the router's position still count as waiting.
    after, redriven = expected(FIRST, SECOND)
    over = Counter(after)
    over[("fulfilment", checks.PENDING)] += redriven["fulfilment"]
    assert checks.check_destinations("after", SECOND, COUNT, after, over) != []
    assert (
        checks.check_destinations("after", SECOND, COUNT, after, over, pending_counts_routed_past=True) == []
    )
    under = Counter(after)
    under[("fulfilment", checks.PENDING)] -= 1
    assert checks.check_destinations(
        "after", SECOND, COUNT, after, under, pending_counts_routed_past=True
    ) == [
        f"after: fulfilment: {COUNT - 1} records accounted for, {COUNT} produced",
        f"after: fulfilment (pending, waiting): {after[('fulfilment', checks.PENDING)] - 1} read back, "
        f"{after[('fulfilment', checks.PENDING)]} expected from the config",
    ]
    unrouted = Counter(over)
    unrouted[("fulfilment", "apac")] = 0  # nothing redriven: the group's count still says so
    assert (
        checks.check_destinations("after", SECOND, COUNT, after, unrouted, pending_counts_routed_past=True)
        != []
    )


# --- the refusal, the explanation and Spark's report, on the demo's own output --------------------------------

REFUSAL = """\
subroute: apps.billing.groups.vip.subscriptions[0].expression: '<' cannot compare an int with a string (at position 13)
  CustomerId < "ten"
               ^
subroute: 1 error(s): nothing was written; fix them and run again
"""

EXPLANATION = """\
config version 14
app billing
  properties: {'Amount': 2225, 'CustomerId': 59, 'OrderType': 'EXPRESS'}
    Amount from body json /amount: 2225
    CustomerId from body json /customer/id: 59
    OrderType from body json /type: 'EXPRESS'
  filter filter[0]: 'OrderType == "EXPRESS" || Amount > 1000' -> match
  priority   10 vip[0]: 'CustomerId < 10' -> no match
  priority    5 general[0]: 'CustomerId >= 10' -> match
  priority    5 general-2[0]: 'CustomerId >= 10' -> match
  priority    1 general[1]: 'OrderType == "BULK"' -> no match
  decision: route -> general (highest matching priority 5: 2 subscriptions tie, chosen by fairness round-robin)
app fulfilment
  properties: {'Amount': 2225, 'Express': True, 'Price': 1, 'Qty': 2, 'Region': 'EU'}
    Amount from body json /amount: 2225
    Express from body json /express: True
    Price from body json /price: 1
    Qty from body json /qty: 2
    Region from body json /region: 'EU'
  filter filter[0]: "Region IN ('EU', 'US', 'APAC')" -> match
  priority   10 large[0]: 'Amount > 5000' -> no match
  priority    5 eu[0]: "Region = 'EU' AND Amount BETWEEN 0 AND 5000" -> match
  priority    5 us[0]: "Region = 'US' AND Express = TRUE" -> no match
  priority    5 apac[0]: "Region = 'APAC'" -> no match
  decision: route -> eu (highest matching priority 5: one subscription)
"""

AVRO_EXPLANATION = """\
config version 14
app carts
  properties: {'Customer': 59, 'Market': 'EU'}
    Customer from header Customer: 59
    Market from body avro /region: 'EU'
  filter filter[0]: 'Market != "LATAM"' -> match
  priority    0 shard-a[0]: '*' -> match
  priority    0 shard-b[0]: '*' -> match
  priority    0 shard-c[0]: '*' -> match
  decision: route -> shard-b (highest matching priority 0: 3 subscriptions tie, chosen by rendezvous hash of message group (Customer))
"""

APPS = ["billing", "fulfilment"]  # the apps reading orders


def test_the_refusal_check_holds_on_the_demos_output_and_finds_each_fault() -> None:
    assert checks.check_refusal(2, REFUSAL, 13, 13) == []
    assert checks.check_refusal(0, REFUSAL, 13, 13) == [
        "the bad subscription was not refused: exit code 0, not 2"
    ]
    no_caret = REFUSAL.replace("               ^\n", "")
    assert checks.check_refusal(2, no_caret, 13, 13) == [
        "the refusal does not show the expression with a caret under the fault"
    ]
    assert checks.check_refusal(2, REFUSAL, 13, 15) == [
        "the refused config wrote something: version 13 -> 15"
    ]


def test_the_explanation_check_holds_on_the_demos_output_and_finds_each_fault() -> None:
    assert checks.check_explanation(0, EXPLANATION, APPS, 14) == []
    assert checks.check_explanation(3, "", APPS, 14) == [
        "explain failed: exit code 3",
        "explain does not name the config version in force (14)",
        *(f"explain gives no decision for app {app}" for app in APPS),
    ]
    undecided = EXPLANATION.replace("  decision: route -> eu", "  (nothing)")
    assert checks.check_explanation(0, undecided, APPS, 14) == [
        "explain gives no decision for app fulfilment"
    ]
    assert checks.check_explanation(0, EXPLANATION, APPS, 15) == [
        "explain does not name the config version in force (15)"
    ]


def test_the_spark_check_wants_every_routed_record_landed_once_and_reported_per_group() -> None:
    found = {("billing", "vip"): 20, ("billing", "general"): 30, ("billing", checks.PENDING): 7}
    report = {("billing", "vip"): 20, ("billing", "general"): 30}
    assert checks.check_spark(50, report, found) == []
    assert checks.check_spark(0, {}, found) == [
        "Spark's report has no rows",
        "Spark landed 0 records, 50 were routed to group topics",
        "Spark's report: billing general: 0 rows, 30 on the group topic",
        "Spark's report: billing vip: 0 rows, 20 on the group topic",
    ]
    assert checks.check_spark(50, {**report, ("billing", "vip"): 19}, found) == [
        "Spark's report: billing vip: 19 rows, 20 on the group topic"
    ]


# --- the demo routes on what the bodies say ------------------------------------------------------------------


def test_the_demos_apps_read_their_properties_from_json_and_avro_bodies() -> None:
    """billing and fulfilment read the JSON orders' nested fields, fulfilment's priority is AMPS's /price * /qty,
    carts reads the Avro copies with the app schema file beside the example (its message groups by a header)."""
    assert {app: spec.format for app, spec in FIRST.apps.items()} == {
        "billing": "json",
        "fulfilment": "json",
        "carts": "avro",
    }
    assert FIRST.apps["billing"].paths["CustomerId"] == "/customer/id"
    assert FIRST.apps["fulfilment"].priority == "Price * Qty"
    assert FIRST.apps["carts"].schema is not None and FIRST.apps["carts"].inputs == (demo.AVRO_TOPIC,)
    assert checks.sources(FIRST, "carts") == {"Customer": "header Customer", "Market": "body avro /region"}


def test_the_reference_routes_the_demos_records_on_their_bodies() -> None:
    """With the bodies taken away, the same records land elsewhere: where they went depends on the body."""
    found, _ = expected(FIRST)
    hollow = [(topic, headers, b"{}" if topic == demo.INPUT_TOPIC else b"") for topic, headers, _ in RECORDS]
    without = checks.expected_destinations([FIRST], hollow, 0).destinations
    for app in FIRST.apps:
        assert {k: n for k, n in found.items() if k[0] == app} != {
            k: n for k, n in without.items() if k[0] == app
        }


def test_the_sources_check_holds_on_the_demos_output_and_finds_each_fault() -> None:
    assert checks.check_sources(EXPLANATION, SECOND, APPS) == []
    assert checks.check_sources(AVRO_EXPLANATION, SECOND, ["carts"]) == []
    headers_only = EXPLANATION.replace("from body json /customer/id", "from header CustomerId")
    assert checks.check_sources(headers_only, SECOND, ["billing"]) == [
        "explain does not show billing's property CustomerId from body json /customer/id"
    ]
    undecoded = AVRO_EXPLANATION.replace("'EU'\n", "absent (could not be decoded: counted)\n")
    assert checks.check_sources(undecoded, SECOND, ["carts"]) == [
        "explain: carts's property Market from body avro /region could not be decoded",
        "explain shows no property of carts decoded from the body",
    ]


def test_the_bands_check_wants_each_record_in_the_band_of_price_times_qty() -> None:
    """fulfilment's priority Price * Qty (AMPS's /price * /qty) spreads its records over bands 1..9 (the samples'
    small prices and quantities), and a record in another band than the reference's is reported."""
    bands = checks.expected_destinations([FIRST], RECORDS, 0).bands
    assert {app for app, _ in bands} == {"fulfilment"}
    assert {band for _, band in bands} == set(range(1, 10)) - {7}  # no price 1..5 times qty 1..3 makes 7
    assert checks.check_bands(bands, bands) == []
    moved = Counter(bands)
    moved[("fulfilment", 2)] -= 1
    moved[("fulfilment", 9)] += 1
    assert checks.check_bands(bands, moved) == [
        f"fulfilment band 2: {bands[('fulfilment', 2)] - 1} read back, {bands[('fulfilment', 2)]} expected",
        f"fulfilment band 9: {bands[('fulfilment', 9)] + 1} read back, {bands[('fulfilment', 9)]} expected",
    ]
    flat = Counter({("fulfilment", 0): 10})
    assert checks.check_bands(flat, flat) == [
        "no record expected above priority band 0: the priority no longer reads the bodies"
    ]
