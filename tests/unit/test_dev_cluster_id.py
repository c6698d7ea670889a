"""The KRaft cluster id handed to the storage tool (subroute.dev.kafka)."""

import base64

from subroute.dev.kafka import new_cluster_id


def test_cluster_ids_never_look_like_an_option() -> None:
    # One random id in 64 starts with "-"; 3,000 draws hold such an id with probability 1 - (63/64)**3000.
    ids = [new_cluster_id() for _ in range(3000)]
    assert not [i for i in ids if i.startswith("-")]
    assert len(set(ids)) == len(ids)
    assert all(len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)
