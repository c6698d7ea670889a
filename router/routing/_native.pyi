"""Types of the native routing core (router/native, a PyO3 extension); see router/routing/native_plan.py."""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

class Entry:
    def __init__(
        self,
        kind: int,
        slot: int,
        op: int,
        keys: Sequence[tuple[int, int, float, bytes]],
        residual: Sequence[int],
    ) -> None: ...
    @property
    def kind(self) -> int: ...

class NativePlan:
    def __init__(
        self,
        props: Sequence[tuple[str, int]],
        nodes: Sequence[tuple[str, bool, list[int], float, bytes, list[bytes]]],
        entries: Sequence[Entry],
        opens: Sequence[int],
        requires: Sequence[int],
    ) -> None: ...
    def match_batch(
        self, records: Iterable[Sequence[tuple[str, bytes | None]] | None]
    ) -> list[list[int]]: ...
    def match_batch_with_errors(
        self, records: Iterable[Sequence[tuple[str, bytes | None]] | None]
    ) -> list[tuple[list[int], list[int]]]: ...
    def stats(self) -> list[int]: ...
    def __len__(self) -> int: ...

class NativeDecider:
    def __init__(
        self,
        plan: NativePlan,
        apps: Sequence[
            tuple[
                tuple[int, int, list[int], list[int], int, int],
                tuple[int, bool, bool, str | None, bytes, int | None],
                list[tuple[int, int | None, int, str, int, Any]],
                tuple[Any, ...],
            ]
        ],
        owner: Sequence[int],
        exact: Sequence[bool],
        filter_count: int,
        environments: Sequence[Sequence[tuple[str, int]]],
        expiration_name: str,
        kinds: tuple[Any, ...],
    ) -> None: ...
    def sizes(self) -> tuple[int, int]: ...
    def add_route(self, groups: Sequence[tuple[int, Sequence[int]]]) -> int: ...
    def decide(
        self,
        records: Iterable[Sequence[tuple[str, bytes | None]] | None],
        routes: Sequence[int],
        timestamps: Sequence[int],
        now_ms: int,
        counts: Sequence[tuple[int, int, bool]],
        cursors: Sequence[int],
        absent: Sequence[int],
        *,
        holders: Mapping[str, Mapping[bytes, str]] | None = None,
    ) -> tuple[
        int, list[Any], list[tuple[int, int]], list[tuple[int, int]], list[tuple[str, bytes, str]]
    ]: ...
