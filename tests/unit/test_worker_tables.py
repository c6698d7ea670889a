"""The cyclic collector's thresholds while a worker routes (router/worker/tables.py): raised for the poll loop,
and the process's own restored afterwards, also when routing ends with an error."""

from __future__ import annotations

import gc

import pytest

from subroute.worker.tables import (
    OLDER_COLLECTION_RATIO,
    YOUNG_COLLECTION_ALLOCATIONS,
    routing_collection,
)


def test_routing_raises_the_thresholds_and_restores_the_processs_own() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        with routing_collection():
            assert gc.get_threshold() == (
                YOUNG_COLLECTION_ALLOCATIONS,
                OLDER_COLLECTION_RATIO,
                OLDER_COLLECTION_RATIO,
            )
        assert gc.get_threshold() == (700, 10, 10)
        with pytest.raises(RuntimeError), routing_collection():
            raise RuntimeError("the poll loop failed")
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)
