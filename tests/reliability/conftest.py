"""Fixtures of the reliability suite (the session's ``kafka`` broker and ``unique`` come from tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def soak(request: pytest.FixtureRequest) -> bool:
    """True when the run asked for the long soak sizes (``pytest --soak``)."""
    return bool(request.config.getoption("--soak"))


@pytest.fixture
def fast_session_env(kafka: object) -> dict[str, str]:
    """Worker client settings that make a killed member leave the group quickly.

    The brokers this suite starts accept a 3 s session (a dead member is expelled after 3 s; our Apache Kafka
    sets ``group.min.session.timeout.ms`` to 1 s); a cluster of the user's own (``KAFKA_BOOTSTRAP``,
    testcontainers) refuses sessions under its floor, 6 s by default.
    """
    if getattr(kafka, "kind", "") in ("kafka", "tansu"):
        return {"SUBROUTE_KAFKA_SESSION_TIMEOUT_MS": "3000", "SUBROUTE_KAFKA_HEARTBEAT_INTERVAL_MS": "500"}
    return {"SUBROUTE_KAFKA_SESSION_TIMEOUT_MS": "6000", "SUBROUTE_KAFKA_HEARTBEAT_INTERVAL_MS": "1000"}
