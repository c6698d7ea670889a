"""The gauges the alerts compare: each group's max_unconfirmed (from the config in force, series of removed groups
dropped) and whether a worker without partitions is idle (in the group, given none) or still joining."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from subroute.config.model import AppConfig
from subroute.ops.metrics import RouterMetrics
from subroute.ops.settings import Settings
from subroute.routing.capacity import group_limits
from subroute.worker.assignment import Assignment
from subroute.worker.capacity import CapacityMonitor
from tests.unit.test_routing import config, group, sub


def gauge(metrics: RouterMetrics, name: str) -> dict[tuple[str, ...], float]:
    return {
        tuple(sample.labels.values()): sample.value
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.name == name
    }


def test_a_group_limit_is_the_smallest_of_its_subscriptions_and_groups_without_one_have_none() -> None:
    cfg = config(
        AppConfig(name="a", inputs=("in",)),
        AppConfig(name="b", inputs=("in",)),
        groups=[
            group("a", "g1", sub("x > 1", 5, 300), sub("x > 2", 1, 100), sub("x > 3", 1)),
            group("a", "g2", sub("x > 1")),
            group("b", "g3", sub(None, 0, 7)),
        ],
    )
    assert group_limits(cfg) == {("a", "g1"): 100, ("b", "g3"): 7}


def test_the_limit_gauge_follows_the_config_in_force() -> None:
    metrics = RouterMetrics(CollectorRegistry(), runtime=False)
    monitor = CapacityMonitor(Settings(), interval=60, metrics=metrics)
    app = AppConfig(name="a", inputs=("in",))
    monitor.watch(
        config(app, groups=[group("a", "g1", sub(None, 0, 10)), group("a", "g2", sub(None, 0, 20))])
    )
    assert gauge(metrics, "subroute_group_max_unconfirmed") == {("a", "g1"): 10.0, ("a", "g2"): 20.0}
    # g2 removed, g1's limit changed: no series stays behind for the alert to hold on to
    monitor.watch(config(app, groups=[group("a", "g1", sub(None, 0, 15))], version=2))
    assert gauge(metrics, "subroute_group_max_unconfirmed") == {("a", "g1"): 15.0}
    monitor.watch(config(app, groups=[group("a", "g1", sub(None))], version=3))
    assert gauge(metrics, "subroute_group_max_unconfirmed") == {}


class FakeConsumer:
    def incremental_assign(self, partitions: list[Any]) -> None:
        pass

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        return [
            type("Committed", (), {"topic": p.topic, "partition": p.partition, "metadata": None})()
            for p in partitions
        ]


def test_a_member_given_no_partition_has_joined_and_one_that_lost_all_has_not() -> None:
    from confluent_kafka import TopicPartition

    metrics = RouterMetrics(CollectorRegistry(), runtime=False)
    assignment = Assignment(metrics)
    consumer: Any = FakeConsumer()
    assert not assignment.joined  # subscribed, no rebalance yet: joining, not idle
    assignment.on_assign(consumer, [])  # the group's answer to a member it has nothing for
    assert assignment.joined and not assignment.assigned
    assignment.on_assign(consumer, [TopicPartition("in", 0)])
    assert assignment.joined and assignment.assigned == {("in", 0)}
    assignment.on_revoke(consumer, [TopicPartition("in", 0)])  # all taken back (or the membership lost)
    assert not assignment.joined


def test_the_lag_of_a_group_no_longer_measured_goes_with_it(monkeypatch: Any) -> None:
    from subroute.worker import capacity

    lags = {("a", "g1"): 5, ("a", "g2"): 9}
    monkeypatch.setattr(
        capacity,
        "measure_lag",
        lambda _admin, _reader, _prefix, app, group, _metadata=None: lags[(app, group)],
    )
    metrics = RouterMetrics(CollectorRegistry(), runtime=False)
    # presence off: the fake clients answer the lag refresh only
    monitor = CapacityMonitor(Settings(), interval=60, metrics=metrics, presence_interval=0)
    reader: Any = type("Reader", (), {"list_topics": lambda _self, timeout: None})()
    app = AppConfig(name="a", inputs=("in",))
    monitor.watch(
        config(app, groups=[group("a", "g1", sub(None, 0, 10)), group("a", "g2", sub(None, 0, 20))])
    )
    monitor.refresh(None, reader)  # type: ignore[arg-type]  # the fake measure_lag needs no admin client
    assert gauge(metrics, "subroute_group_lag_messages") == {("a", "g1"): 5.0, ("a", "g2"): 9.0}
    monitor.watch(config(app, groups=[group("a", "g1", sub(None, 0, 10))], version=2))
    monitor.refresh(None, reader)  # type: ignore[arg-type]
    assert gauge(metrics, "subroute_group_lag_messages") == {("a", "g1"): 5.0}
