"""The registry edge's waiting rules (router/kafka/schema_registry.py): an unreachable registry is retried with
exponential backoff and jitter until it answers, reported on every wait, and given up only when stopping."""

from __future__ import annotations

import pytest

from subroute.kafka.schema_registry import (
    Backoff,
    RegistrySettings,
    RegistryUnavailable,
    retry_while_unavailable,
)


def test_backoff_doubles_to_its_maximum_shortened_by_jitter_and_resets() -> None:
    backoff = Backoff(initial=0.5, maximum=4.0, factor=2.0, jitter=0.0)
    assert [backoff.next_delay() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    backoff.reset()
    assert backoff.next_delay() == 0.5
    jittered = Backoff(initial=1.0, maximum=8.0, jitter=0.25, random=lambda: 1.0)
    assert [jittered.next_delay() for _ in range(3)] == [0.75, 1.5, 3.0]
    endless = Backoff(initial=1.0, maximum=30.0, jitter=0.0, failures=10_000)
    assert endless.next_delay() == 30.0  # no overflow after a long outage


@pytest.mark.parametrize(
    "settings",
    [{"initial": 0.0}, {"initial": 5.0, "maximum": 1.0}, {"factor": 0.5}, {"jitter": 1.0}, {"jitter": -0.1}],
)
def test_a_backoff_that_would_not_wait_or_grow_is_refused(settings: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="bad backoff"):
        Backoff(**settings)  # type: ignore[arg-type]


def test_calls_are_retried_while_the_registry_is_unavailable_and_each_wait_is_reported() -> None:
    outcomes: list[object] = [RegistryUnavailable("http://r", 3, "refused")] * 3 + ["schema"]
    slept: list[float] = []
    reported: list[tuple[int, float]] = []

    def call() -> str:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return str(outcome)

    backoff = Backoff(initial=1.0, maximum=2.0, jitter=0.0)
    result = retry_while_unavailable(
        call,
        backoff,
        sleep=slept.append,
        on_wait=lambda error, delay: reported.append((error.schema_id, delay)),
    )
    assert result == "schema"
    assert slept == [1.0, 2.0, 2.0]
    assert reported == [(3, 1.0), (3, 2.0), (3, 2.0)]
    assert backoff.failures == 0  # reset by the success


def test_stopping_ends_the_wait_with_the_registry_error_and_other_errors_are_not_retried() -> None:
    def unavailable() -> str:
        raise RegistryUnavailable("http://r", 9, "timed out")

    slept: list[float] = []
    with pytest.raises(
        RegistryUnavailable, match=r"schema id 9: the schema registry http://r cannot be read"
    ):
        retry_while_unavailable(unavailable, Backoff(jitter=0.0), sleep=slept.append, stopping=lambda: True)
    assert slept == []

    def broken() -> str:
        raise KeyError("a bug, not an outage")

    with pytest.raises(KeyError):
        retry_while_unavailable(broken, Backoff(), sleep=slept.append)
    assert slept == []


def test_registry_settings_give_numbers_as_numbers_and_never_show_credentials() -> None:
    settings = RegistrySettings.of(
        "https://r:8081", {"basic.auth.user.info": "me:hunter2", "timeout": "5", "ssl.ca.location": "/ca.pem"}
    )
    assert settings.client_config() == {
        "url": "https://r:8081",
        "basic.auth.user.info": "me:hunter2",
        "timeout": 5.0,
        "ssl.ca.location": "/ca.pem",
    }
    assert "hunter2" not in repr(settings)
    assert "/ca.pem" in repr(settings)
    # the client counts retries with range(): an int, or it raises TypeError at the first request
    retries = RegistrySettings.of("http://r", {"max.retries": "0", "retries.wait.ms": "0.5"}).client_config()
    assert (type(retries["max.retries"]), type(retries["retries.wait.ms"])) == (int, float)
