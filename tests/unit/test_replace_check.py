"""AMPS replace in the consumer client (subroute.client.replace), without a broker: "after the replace occurs,
only messages that match the new subscription will be delivered"."""

from __future__ import annotations

from subroute import wire
from subroute.client.replace import Resubscription, routed_version
from subroute.config.model import AppConfig, Config, GroupConfig, SubscriptionConfig

SHOP = AppConfig(name="shop", inputs=("in",), properties={"Size": "int"}, filter=("Size >= 0",))


def config(version: int, *expressions: str | None, app: AppConfig = SHOP) -> Config:
    group = GroupConfig("shop", "workers", tuple(SubscriptionConfig(e) for e in expressions))
    return Config(version=version, apps={"shop": app}, groups={("shop", "workers"): group})


def routed(version: int | None, subscription: str | None, size: int | None) -> list[tuple[str, bytes | None]]:
    headers: list[tuple[str, bytes | None]] = []
    if size is not None:
        headers.append(("Size", str(size).encode()))
    if version is not None:
        headers.append((wire.CONFIG_VERSION, str(version).encode()))
    if subscription is not None:
        headers.append((wire.SUBSCRIPTION, subscription.encode()))
    return headers


def test_records_routed_under_the_version_in_force_or_unversioned_are_delivered() -> None:
    check = Resubscription("shop", "workers")
    now = config(3, "Size > 5")
    assert check.matches(now, routed(3, "Size > 0", 1))  # routed under this version: the router's choice
    assert check.matches(now, routed(4, "Size > 0", 1))  # a newer one than this client knows
    assert check.matches(now, routed(None, None, 1))  # not routed by the router


def test_a_record_of_a_subscription_that_was_not_replaced_is_delivered() -> None:
    check = Resubscription("shop", "workers")
    assert check.matches(config(3, "Size > 5", "Size == 1"), routed(2, "Size == 1", 1))


def test_after_a_replace_only_records_matching_the_new_subscription_are_delivered() -> None:
    check = Resubscription("shop", "workers")
    now = config(3, "Size > 5")
    assert check.matches(now, routed(2, "Size > 0", 10))
    assert not check.matches(now, routed(2, "Size > 0", 3))
    assert not check.matches(now, routed(2, "Size > 0", None))  # a missing property matches nothing
    assert check.matches(config(3, None), routed(2, "Size > 0", 3))  # no subscription: takes every message


def test_the_app_filter_in_force_applies_and_a_deleted_group_takes_nothing() -> None:
    check = Resubscription("shop", "workers")
    narrower = AppConfig(name="shop", inputs=("in",), properties={"Size": "int"}, filter=("Size > 100",))
    assert not check.matches(config(3, "Size > 5", app=narrower), routed(2, "Size > 0", 10))
    assert not check.matches(Config(version=3, apps={"shop": SHOP}), routed(2, "Size > 0", 10))


def test_routed_version_reads_only_plain_numbers() -> None:
    assert routed_version([(wire.CONFIG_VERSION, b"12")]) == 12
    assert routed_version([(wire.CONFIG_VERSION, b"-1")]) is None
    assert routed_version([(wire.CONFIG_VERSION, b"9" * 30)]) is None
    assert routed_version([]) is None
