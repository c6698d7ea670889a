"""Network cut: every byte between the clients and the broker dropped for 10 s while a worker routes a backlog and a live stream.

A dedicated broker (Apache Kafka, or Tansu when the session runs on it) listens on one port and advertises the proxy's port in its metadata, so every
client connection, the bootstrap and all the ones metadata leads to, goes through ``tcp_proxy.TcpProxy`` (a
proxy in front of a broker that advertises itself would be bypassed after the first metadata call). The cut
blackholes everything (no RST: clients only notice through their own timeouts), longer than the worker's 6 s
session, so the group expels the worker while it is cut off. The test's own producer is behind the same proxy
(its records wait in its queue during the cut).

Requirements: the worker process survives the cut, routes again after it (recovery time measured from the end
of the cut to the first record consumed, and to input offsets committed up to the end of the stream), exits
0 on SIGTERM, and the ledger finds every input message where the config dictates: none lost.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest

from subroute.config.store import history
from subroute.dev.broker import free_port, local_broker
from tests.integration.harness import apply, make_env
from tests.reliability.ledger import Ledger
from tests.reliability.scenarios import APPS, CONFIG, orders
from tests.reliability.support import (
    Stream,
    WorkerProcess,
    app_topics,
    committed_to_end,
    input_ends,
    positions_from_log,
    read_outputs,
    wait_for,
)
from tests.reliability.tcp_proxy import TcpProxy

pytestmark = pytest.mark.kafka

CUT_SECONDS = 10.0


@contextlib.contextmanager
def broker_behind_proxy(engine: str) -> Iterator[TcpProxy]:
    """A broker of its own whose advertised address is a proxy's: every connection passes the proxy."""
    broker_port = free_port()
    with TcpProxy(broker_port) as proxy, local_broker(engine, broker_port, advertised_port=proxy.port):
        yield proxy


def test_network_cut_under_load_recovers_and_loses_nothing(kafka, unique) -> None:
    # The shared broker is unused: this test needs one that advertises the proxy, of the same engine (Apache
    # Kafka also when the session runs on a cluster of the user's own, which cannot be made to advertise it).
    with broker_behind_proxy("tansu" if kafka.is_tansu else "kafka") as proxy:
        env = make_env(proxy.address, unique, partitions=2)
        assert apply(env, CONFIG) == 0
        # Load: a backlog of 60,000 records, then a live stream of 20,000 more at 2,000/s. The cut starts while
        # the worker works through the backlog, so batches are in flight (produced, not yet committed).
        backlog = Stream(env.settings, env.input, orders(60_000)).start().join()
        stream = Stream(env.settings, env.input, orders(20_000, start=60_000), rate=2_000).start()
        worker = WorkerProcess(env.settings, env={"SUBROUTE_KAFKA_SESSION_TIMEOUT_MS": "6000"})
        findings: list[str] = []
        try:
            wait_for(
                lambda: worker.messages_in() >= 4_000, 60, "the worker to route 4,000 records", interval=0.02
            )
            before = worker.messages_in()
            proxy.cut(CUT_SECONDS)
            at_heal = worker.messages_in()
            healed = time.monotonic()
            print(
                f"\ncut {CUT_SECONDS:.0f} s: {before:.0f} consumed before, {at_heal:.0f} at the end of the cut; "
                f"{proxy.stats.bytes_dropped} bytes dropped, {proxy.stats.connections_closed_by_cut} "
                "connections closed at the heal"
            )
            try:
                first = wait_for(
                    lambda: worker.messages_in() > at_heal or not worker.alive(), 120, "routing to resume"
                )
                if worker.alive():
                    print(f"first record consumed {first:.1f} s after the heal")
            except AssertionError as exc:
                findings.append(str(exc))
            logged = positions_from_log(env.settings, backlog + stream.join())
            print(logged.summary())
            if logged.missing:
                findings.append(f"the broker lost {len(logged.missing)} acknowledged input records")
            sent = logged.sent
            ends = input_ends(sent)
            if worker.alive():
                try:
                    caught_up = wait_for(
                        lambda: not worker.alive() or committed_to_end(env.settings, sent, ends),
                        180,
                        "input offsets committed to the end of the stream",
                        interval=0.5,
                    )
                    print(
                        f"input committed to the end {time.monotonic() - healed:.1f} s after the heal "
                        f"(waited {caught_up:.1f} s after the stream ended)"
                    )
                except AssertionError as exc:
                    findings.append(str(exc))
            if not worker.alive():
                findings.append(
                    f"the worker exited by itself after the network cut (code {worker.process.returncode}):\n"
                    + worker.log_tail(3000)
                )
            elif worker.terminate() != 0:
                findings.append(
                    f"the worker did not exit 0 on SIGTERM after the cut:\n{worker.log_tail(3000)}"
                )
        finally:
            worker.close()
        if findings:
            # Still prove (or disprove) loss: drain with a fresh worker, then run the ledger.
            drain = WorkerProcess(
                env.settings, "--exit-on-idle", "3", env={"SUBROUTE_KAFKA_SESSION_TIMEOUT_MS": "6000"}
            )
            try:
                drain.wait(180)
            finally:
                drain.close()
        outputs = read_outputs(env.settings, app_topics(env.settings, APPS))
        ledger = Ledger(env.prefix, history(env.settings), sent)
        report = ledger.verify(outputs)
        print(report.summary())
        assert not findings, "\n\n".join([*findings, report.summary()])
        report.assert_clean()
