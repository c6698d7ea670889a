"""The config topic must be one compacted partition; anything else is refused with what it is and must be."""

from __future__ import annotations

import pytest

from subroute.config.store import ConfigTopicInvalid, check_config_topic


def test_one_compacted_partition_is_accepted() -> None:
    check_config_topic("subroute.config", 1, {"cleanup.policy": "compact"})
    check_config_topic("subroute.config", 1, {"cleanup.policy": "compact,delete"})


@pytest.mark.parametrize(
    ("partitions", "config", "says"),
    [
        (3, {"cleanup.policy": "compact"}, "has 3 partitions:"),
        (1, {"cleanup.policy": "delete"}, "has cleanup.policy=delete:"),
        (2, {}, "has 2 partitions and cleanup.policy=unknown:"),
    ],
)
def test_anything_else_is_refused(partitions: int, config: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigTopicInvalid, match=says):
        check_config_topic("subroute.config", partitions, config)
