"""A live worker: /metrics carries every metric the dashboard and the alerts use; health endpoints; no secrets."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from importlib import metadata
from pathlib import Path

import pytest

from subroute.ops.http import serve
from subroute.ops.settings import Settings
from tests.integration.harness import ROOT, BackgroundWorker, apply, make_env, produce

pytestmark = pytest.mark.kafka

METRIC = re.compile(r"\bsubroute_[a-z0-9_]+")
SECRET = "hunter2-do-not-print-7f3a"


def referenced_metrics() -> set[str]:
    """Every subroute_* name in the Grafana dashboard and the PrometheusRule alerts."""
    sources = [
        ROOT / "deploy" / "grafana" / "subroute-dashboard.json",
        ROOT / "deploy" / "k8s" / "base" / "prometheusrule.yaml",
    ]
    found: set[str] = set()
    for path in sources:
        found |= set(METRIC.findall(Path(path).read_text()))
    return found


def family_of(sample: str) -> str:
    for suffix in ("_total", "_bucket", "_sum", "_count", "_created"):
        if sample.endswith(suffix):
            return sample[: -len(suffix)]
    return sample


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_live_metrics_cover_dashboard_and_alerts_and_health_endpoints(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert (
        apply(
            env,
            "apps:\n  a:\n    inputs: [INPUT]\n    properties: {N: int}\n    groups:\n      g: {subscriptions: ['N > 0']}\n",
        )
        == 0
    )
    with BackgroundWorker(env) as background:
        server = serve(0, background.metrics.registry, background.worker.healthy, background.worker.ready)
        base = f"http://127.0.0.1:{server.server_port}"
        assert get(f"{base}/healthz")[0] == 200
        produce(env, [{"N": 1}, {"N": -1}, {"N": "x"}])
        deadline = time.monotonic() + 30
        while get(f"{base}/readyz")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert get(f"{base}/readyz") == (200, "ready\n")
        while background.metrics.messages_in._value.get() < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        status, text = get(f"{base}/metrics")
        assert get(f"{base}/nothing")[0] == 404
        server.shutdown()
    assert status == 200
    families = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    wanted = referenced_metrics()
    assert len(wanted) >= 8, wanted  # the dashboard and alerts really were read
    missing = sorted(name for name in wanted if family_of(name) not in families and name not in families)
    assert missing == []
    assert 'subroute_routed_total{app="a",group="g"} 1.0' in text
    assert "subroute_messages_in_total 3.0" in text
    # the runtime collectors a default registry has, the release, and the sampled record age
    assert (
        "process_cpu_seconds_total" in text
        and "python_info{" in text
        and "python_gc_objects_collected_total" in text
    )
    assert f'subroute_build_info{{version="{metadata.version("subroute")}"}} 1.0' in text
    [age_count] = [line for line in text.splitlines() if line.startswith("subroute_record_age_seconds_count")]
    assert float(age_count.split()[1]) >= 1


def test_readyz_is_503_until_the_worker_routes(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    background = BackgroundWorker(env)
    server = serve(0, background.metrics.registry, background.worker.healthy, background.worker.ready)
    try:
        assert get(f"http://127.0.0.1:{server.server_port}/readyz") == (503, "not ready\n")
    finally:
        server.shutdown()


def test_secrets_never_reach_logs_metrics_errors_or_config_get(kafka, unique) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    assert apply(env, "apps:\n  a:\n    inputs: [INPUT]\n    groups:\n      g: {}\n") == 0
    produce(env, [{"N": 1}])
    secret_env = {
        "SUBROUTE_KAFKA_SASL_USERNAME": "router-user",
        "SUBROUTE_KAFKA_SASL_PASSWORD": SECRET,
        "SUBROUTE_KAFKA_SESSION_TIMEOUT_MS": "6000",
    }
    run_env = {**os.environ, **secret_env}
    worker = subprocess.run(
        [
            sys.executable,
            "-m",
            "subroute.cli",
            "worker",
            *env.common(),
            "--metrics-port",
            "0",
            "--exit-on-idle",
            "1.5",
            "--log-level",
            "DEBUG",
        ],
        env=run_env,
        capture_output=True,
        timeout=120,
        cwd=ROOT,
    )
    assert worker.returncode == 0, worker.stderr.decode()[-2000:]
    assert b'"msg"' in worker.stderr  # JSON log lines were written, and none holds the secret
    assert SECRET.encode() not in worker.stdout + worker.stderr

    config_get = subprocess.run(
        [sys.executable, "-m", "subroute.cli", "config", "get", *env.common(), "-o", "json"],
        env=run_env,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
    )
    assert config_get.returncode == 0 and SECRET.encode() not in config_get.stdout + config_get.stderr

    # An error that involves the client configuration names the property, never its value.
    broken = subprocess.run(
        [
            sys.executable,
            "-m",
            "subroute.cli",
            "config",
            "get",
            *env.common(),
            "--kafka-config",
            "no.such.property=1",
        ],
        env=run_env,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
    )
    assert broken.returncode != 0
    assert SECRET.encode() not in broken.stdout + broken.stderr
    assert SECRET not in repr(Settings(kafka_config={"sasl.password": SECRET}))


class _StoreKilled(BaseException):
    """Not an Exception: nothing in the store thread catches it, as with a bug that escapes every handler."""


def test_health_fails_once_the_config_thread_dies(kafka, unique, caplog: pytest.LogCaptureFixture) -> None:
    env = make_env(kafka.bootstrap_servers, unique)
    config = "apps:\n  a:\n    inputs: [INPUT]\n    properties: {N: int}\n    groups:\n      g: {subscriptions: ['N > 0']}\n"
    assert apply(env, config) == 0
    with BackgroundWorker(env) as background:
        worker = background.worker
        server = serve(0, background.metrics.registry, worker.healthy, worker.ready)
        base = f"http://127.0.0.1:{server.server_port}"
        produce(env, [{"N": 1}])
        deadline = time.monotonic() + 30
        while get(f"{base}/readyz")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert get(f"{base}/healthz")[0] == 200 and get(f"{base}/readyz")[0] == 200

        def broken_build(_config: object) -> object:
            raise _StoreKilled("injected: the store thread's build escaped every handler")

        worker.store._build = broken_build  # type: ignore[assignment]
        assert apply(env, config.replace("N > 0", "N > 1")) == 0  # the next change kills the store thread
        while worker.store.alive and time.monotonic() < deadline + 30:
            time.sleep(0.2)
        assert not worker.store.alive
        assert (get(f"{base}/healthz")[0], get(f"{base}/readyz")[0]) == (503, 503)
        server.shutdown()
    stopped = [r for r in caplog.records if r.getMessage().startswith("config store stopped")]
    assert stopped and "_StoreKilled: injected" in stopped[0].getMessage()


def test_worker_refuses_a_config_topic_that_is_not_one_compacted_partition(kafka, unique) -> None:
    from subroute.kafka.clients import TopicSpec, admin_client, ensure_topics

    env = make_env(kafka.bootstrap_servers, unique)
    ensure_topics(
        admin_client(env.settings), [TopicSpec(env.settings.config_topic, 2)]
    )  # delete policy, 2 parts
    process = subprocess.run(
        [sys.executable, "-m", "subroute.cli", "worker", *env.common(), "--metrics-port", "-1"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert process.returncode == 3, process.stderr[-2000:]
    # Apache Kafka reports the default policy (delete); Tansu reports only keys set explicitly (docs/brokers.md)
    assert "has 2 partitions and cleanup.policy=" in process.stderr
    assert "not routing" in process.stderr


def test_input_lag_leaves_out_the_parked_pending_backlog(kafka, unique) -> None:
    """Parked pending records are left uncommitted on purpose: they are a backlog of their own, not work that
    more workers would do, so they must not count as input lag (autoscaling and SubrouteInputLagHigh read it)."""
    env = make_env(kafka.bootstrap_servers, unique)
    nothing = "apps:\n  shop:\n    inputs: [INPUT]\n    properties: {N: int}\n    groups:\n      g: {subscriptions: ['N > 100']}\n"
    assert apply(env, nothing) == 0
    produce(env, [{"N": i} for i in range(30)])  # none matches: all parked
    with BackgroundWorker(env) as worker:
        deadline = time.monotonic() + 60
        while worker.metrics.pending_backlog._value.get() < 30:
            assert time.monotonic() < deadline, "the pending backlog was never measured"
            time.sleep(0.5)
        assert worker.metrics.input_lag._value.get() == 0
