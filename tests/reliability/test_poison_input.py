"""Poison input: headers and records no well-behaved producer sends. The worker keeps routing, counts what does
not decode (``subroute_property_decode_errors_total``, exactly), and every poison message ends somewhere,
routed, pending, filtered or dead-lettered, as its decodable properties dictate (the ledger's oracle decodes
them the same documented way: a value that does not decode as its declared type is a missing property).

Kinds: random header bytes, invalid UTF-8, huge header values (200 kB), values of the wrong type (``12.5``,
``+7``, ``1_000``, out-of-int64, ``TRUE``, ``nan``, ``1e400``), empty values, null values, null keys and
null record values, 2,000 headers on one record, repeated header names (the last wins), odd header names,
and spoofed ``subroute.*`` headers (a garbage config version, a garbage or zero expiration).
"""

from __future__ import annotations

import logging
import os
import random

import pytest

from subroute.config.store import history
from subroute.routing.expiration import is_expired
from subroute.routing.properties import decode_headers
from tests.integration.harness import apply, make_env, run_worker
from tests.reliability.ledger import Ledger, reads
from tests.reliability.support import Message, Stream, app_topics, props_headers, read_outputs

pytestmark = pytest.mark.kafka

APPS = ("p", "q", "all")
CONFIG = """
apps:
  p:
    inputs: [INPUT]
    properties: {N: int, Flag: bool, Name: string}
    groups:
      pos: {subscriptions: [{expression: 'N > 0', priority: 5}]}
      named: {subscriptions: [{expression: 'Name == "x" || Flag', priority: 3}]}
  q:
    inputs: [INPUT]
    dialect: sql92
    properties: {N: int, Amount: float, Name: string}
    filter: ["Amount IS NULL OR Amount >= 0"]
    groups:
      big: {subscriptions: [{expression: "Amount > 10", priority: 5}]}
      rest: {subscriptions: [{expression: "N IS NOT NULL", priority: 1}]}
  all:
    inputs: [INPUT]
    groups:
      everything: {}
"""

BAD_INTS = [b"12.5", b"1e3", b" 7", b"+7", b"1_000", b"99999999999999999999", b"-", b"", b"\xff", b"\xd9\xa3"]
BAD_BOOLS = [b"TRUE", b"1", b"yes", b"", b"true ", b"\x00"]
BAD_FLOATS = [b"nan", b"inf", b"-Infinity", b"1e400", b"1,5", b"", b" 2", b"0x10"]
BAD_STRINGS = [b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\x80" * 10]


def poison(rng: random.Random, i: int) -> Message:
    kind = i % 12
    headers: list[tuple[str, bytes | None]]
    key: bytes | None = f"k{i}".encode()
    value: bytes | None = f"poison{i}".encode()
    if kind == 0:  # random bytes everywhere
        headers = [(n, os.urandom(rng.randrange(0, 16))) for n in ("N", "Flag", "Name", "Amount")]
    elif kind == 1:  # invalid UTF-8 in a string property
        headers = [("N", str(i).encode()), ("Name", rng.choice(BAD_STRINGS))]
    elif kind == 2:  # a huge header value
        headers = [("Name", b"x" * 200_000), ("N", b"3")]
    elif kind == 3:  # wrong types
        headers = [
            ("N", rng.choice(BAD_INTS)),
            ("Flag", rng.choice(BAD_BOOLS)),
            ("Amount", rng.choice(BAD_FLOATS)),
        ]
    elif kind == 4:  # empty values
        headers = [("N", b""), ("Flag", b""), ("Name", b""), ("Amount", b"")]
    elif kind == 5:  # null values, null key, null record value
        headers = [("N", None), ("Name", None), ("Amount", b"12.5")]
        key, value = None, None
    elif kind == 6:  # many headers
        headers = [(f"h{j}", str(j).encode()) for j in range(2000)] + [("N", b"5")]
    elif kind == 7:  # repeated names: the last value wins (a bad one makes the property missing)
        headers = [("N", b"1"), ("N", b"oops"), ("Flag", b"false"), ("Flag", b"true")]
    elif kind == 8:  # odd header names
        headers = [("", b"1"), ("ü", b"\xff"), ("N ", b"4"), ("n", b"4"), ("Name", "é".encode())]
    elif kind == 9:  # a spoofed config version (garbage) on the input
        headers = [("subroute.config-version", b"abc"), ("Name", b"zz")]
    elif kind == 10:  # garbage expiration: ignored
        headers = [("subroute.expiration", b"\xff\xfe soon"), ("N", b"2")]
    else:  # a zero expiration: expired at once, dead-lettered for every app
        headers = [("subroute.expiration", b"0"), ("N", b"2")]
    return key, value, headers, None


def stream(count: int, seed: int) -> list[Message]:
    rng = random.Random(seed)
    out: list[Message] = []
    for i in range(count):
        if i % 3 == 0:
            out.append(
                (
                    b"ok",
                    f"ok{i}".encode(),
                    props_headers({"N": i, "Flag": i % 2 == 0, "Amount": (i % 11 - 5) * 3.5}),
                    None,
                )
            )
        else:  # every kind of poison in turn (by i % 12 alone, kinds 0, 3, 6 and 9 never came up)
            out.append(poison(rng, len(out) - (i + 2) // 3))
    return out


def test_poison_headers_are_counted_and_every_message_still_lands(kafka, unique, caplog) -> None:
    # The worker's own account (assignments, commits, rewinds) is shown should the ledger ever find a loss: one
    # in-CI run lost one record of 3,000 (seed 398974345), not reproduced since in 26 runs.
    caplog.set_level(logging.INFO, logger="subroute")
    seed = int(os.environ.get("SUBROUTE_RELIABILITY_SEED", random.randrange(1 << 30)))
    print(f"\nseed {seed}")
    env = make_env(kafka.bootstrap_servers, unique, partitions=2)
    assert apply(env, CONFIG) == 0
    sent = Stream(env.settings, env.input, stream(3_000, seed)).start().join()
    metrics = run_worker(env, idle=2.0)

    configs = history(env.settings)
    config = configs[max(configs)]
    outputs = read_outputs(env.settings, app_topics(env.settings, APPS))
    report = Ledger(env.prefix, configs, sent).verify(outputs)
    print(report.summary())
    report.assert_clean()
    for fate in ("routed", "pending", "filtered", "dlq"):
        assert report.fates[fate] > 0, report.fates

    registry = metrics.registry
    for name in APPS:
        app = config.apps[name]
        expected = 0
        for s in sent:
            if reads(app, s.topic) and not is_expired(app, s.headers, s.timestamp, s.timestamp + 60_000):
                # The metric counts header values that do not decode as the app's declared type (every
                # property the test's expressions read is declared; undeclared headers are not properties).
                declared = [(k, v) for k, v in s.headers if k in app.properties]
                expected += decode_headers(declared, app.properties)[1]
        counted = sum(
            s.value
            for family in registry.collect()
            for s in family.samples
            if s.name == "subroute_property_decode_errors_total" and s.labels.get("app") == name
        )
        print(f"app {name}: {counted:.0f} property decode errors counted, {expected} expected")
        assert counted == expected
    assert registry.get_sample_value("subroute_messages_in_total") == len(sent)
    assert (registry.get_sample_value("subroute_malformed_messages_total") or 0) == 0
    forged = sum(
        1 for s in sent for k, _ in s.headers if k.startswith("subroute.") and k != "subroute.expiration"
    )
    assert forged > 0
    assert registry.get_sample_value("subroute_dropped_headers_total") == forged
    # and none of them reached a routed record: only the router's own subroute.* headers are there
    for output in outputs:
        stamped = [k for k, _ in output.headers if k == "subroute.config-version"]
        assert len(stamped) == 1, output.headers


def test_record_near_the_size_limit_does_not_stop_the_worker(kafka, unique) -> None:
    """An input record just under the producer's ``message.max.bytes`` (1,000,000): its routed copy carries the
    router's headers on top and no longer fits. The worker must not crash or stall on it (a poison pill that
    stops a partition forever): it must route or dead-letter it, and keep routing what follows."""
    env = make_env(kafka.bootstrap_servers, unique, partitions=1)
    assert apply(env, CONFIG) == 0
    big = b"v" * 999_900  # accepted by the broker as an input record; with the routing headers, too large
    messages: list[Message] = [(b"a", b"before", props_headers({"N": 1}), None)]
    messages.append((b"b", big, props_headers({"N": 2}), None))
    messages.extend((b"c", f"after{i}".encode(), props_headers({"N": 3 + i}), None) for i in range(10))
    sent = Stream(env.settings, env.input, messages).start().join()
    assert len(sent) == len(messages)
    import threading

    result: list[object] = []

    def run() -> None:
        try:
            result.append(run_worker(env, idle=2.0))
        except BaseException as exc:  # the worker must not raise out of run()
            result.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the worker did not finish within 60 s: it is stuck on the oversized record"
    assert not isinstance(result[0], BaseException), f"the worker crashed: {result[0]!r}"
    outputs = read_outputs(env.settings, app_topics(env.settings, APPS))
    values = {o.value for o in outputs}
    assert {f"after{i}".encode() for i in range(10)} <= values, "records after the big one were not routed"
    stubs = [o for o in outputs if o.header("subroute.dlq-reason") == "too-large"]
    assert stubs and all(o.value is None and o.topic.endswith(".dlq") for o in stubs), stubs
    assert {o.header("subroute.source") for o in stubs} == {f"{env.input}/0/1"}  # the big record, and only it
