"""Which consumer group holds a message group, and when it lets go (router/routing/holders.py): seed 002's "only
one consumer can be processing messages from a particular group at a given time. When the consumer acknowledges
all of its acquired messages, then the broker may pass the next pending message from that group to a different
consumer"."""

from __future__ import annotations

from subroute.routing.holders import Holders

TOPIC = "p.billing.general"


def held(window: int = 0) -> Holders:
    holders = Holders()
    holders.window = window
    holders.hold("billing", b"7", "general")
    return holders


def committed(offset: int, group: str = "general") -> dict[tuple[str, str], dict[tuple[str, int], int]]:
    return {("billing", group): {(TOPIC, 2): offset}}


def test_a_message_group_is_held_until_its_holder_commits_past_its_newest_record() -> None:
    holders = held()
    holders.settled = 0
    holders.delivered("billing", b"7", "general", TOPIC, 2, 40)
    holders.delivered("billing", b"7", "general", TOPIC, 2, 41)
    holders.delivered("billing", b"7", "general", TOPIC, 2, 39)  # reports of one partition, any order
    assert holders.release(committed(41)) == 0  # 41 itself is not confirmed yet
    assert holders.release({}) == 0  # nothing measured: nothing confirmed
    assert holders.holder("billing", b"7") == "general"
    assert holders.release(committed(42)) == 1
    assert holders.holder("billing", b"7") is None and len(holders) == 0 and holders.by_app == {}


def test_a_record_still_on_its_way_keeps_the_group() -> None:
    holders = held(window=3)
    holders.settled = 2
    holders.delivered("billing", b"7", "general", TOPIC, 2, 5)
    # its window has not settled: a later record of the group may not be reported yet
    assert holders.release(committed(100)) == 0
    holders.settled = 3
    assert holders.release(committed(100)) == 1


def test_routing_again_renews_the_window_and_keeps_the_position() -> None:
    holders = held(window=1)
    holders.delivered("billing", b"7", "general", TOPIC, 2, 5)
    holders.window = 2
    holders.hold("billing", b"7", "general")
    holders.settled = 1
    assert holders.release(committed(6)) == 0  # the window-2 record may still be on its way
    holders.settled = 2
    assert holders.release(committed(6)) == 1


def test_a_group_whose_records_were_all_dead_lettered_is_released_once_settled() -> None:
    holders = held()
    assert holders.release({}) == 0
    holders.settled = 0
    assert holders.release({}) == 1  # nothing of it reached the group topic


def test_a_moved_group_counts_reports_of_its_new_holder_only() -> None:
    holders = held()
    holders.hold("billing", b"7", "vip")  # its holder left: placed afresh
    holders.delivered("billing", b"7", "general", TOPIC, 2, 9)  # a late report of the old placement
    holders.settled = 0
    holders.delivered("billing", b"7", "vip", "p.billing.vip", 0, 3)
    assert holders.release(committed(10)) == 0
    assert holders.release({("billing", "vip"): {("p.billing.vip", 0): 4}}) == 1


def test_delivery_reports_are_read_by_group_topic() -> None:
    holders = held()
    holders.topics = {TOPIC: ("billing", "general")}
    holders.reported("p.billing.dlq", 0, 99, b"7")  # not a group topic
    holders.reported(TOPIC, 2, 12, None)  # no key: not a message group's
    holders.reported(TOPIC, 2, 11, b"7")
    holders.settled = 0
    assert holders.release(committed(11)) == 0
    assert holders.release(committed(12)) == 1


def test_a_group_read_back_from_a_group_topic_is_held_unless_placed_here_since() -> None:
    holders = held()
    assert not holders.restore("billing", b"7", "vip", "p.billing.vip", 0, 3)  # ours is newer
    assert holders.restore("billing", b"8", "vip", "p.billing.vip", 0, 3)
    assert holders.restore("billing", b"8", "vip", "p.billing.vip", 0, 2)  # an older record changes nothing
    assert holders.holder("billing", b"8") == "vip"
    # read back from the log: nothing of it in flight, so the commit alone releases it
    assert holders.release({("billing", "vip"): {("p.billing.vip", 0): 3}}) == 0
    assert holders.release({("billing", "vip"): {("p.billing.vip", 0): 4}}) == 1
    assert holders.holder("billing", b"7") == "general"


def test_groups_no_longer_grouping_messages_are_forgotten() -> None:
    holders = held()
    holders.hold("billing", b"8", "vip")
    holders.hold("carts", b"8", "g1")
    holders.keep({("billing", "vip"), ("carts", "g1")})
    assert (holders.holder("billing", b"7"), holders.holder("billing", b"8")) == (None, "vip")
    assert holders.held_per_app() == {"billing": 1, "carts": 1}
