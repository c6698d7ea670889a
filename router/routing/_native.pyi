"""Types of the native routing core (router/native, a PyO3 extension); see router/routing/native_plan.py."""

from collections.abc import Iterable, Sequence

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
