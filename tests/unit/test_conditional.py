"""read_change_put (squadron.shell.conditional): the one retry loop of a conditional write, played
against a store whose record others change between the read and the put."""

from __future__ import annotations

import pytest

from squadron.domain.agents import ConflictError
from squadron.shell.conditional import Put, read_change_put


class Store:
    """One record with a version; ``writers`` others put first, one before each of our puts."""

    def __init__(self, value: int, writers: int) -> None:
        self.value, self.version, self.writers = value, 1, writers
        self.reads = 0
        self.puts: list[int] = []

    def read(self) -> tuple[int, int]:
        self.reads += 1
        return self.value, self.version

    def put(self, read: tuple[int, int], value: int) -> None:
        if self.writers:  # someone else's write lands between our read and our put
            self.writers -= 1
            self.value, self.version = self.value + 100, self.version + 1
        if read[1] != self.version:
            raise ConflictError("changed meanwhile")
        self.value, self.version = value, self.version + 1
        self.puts.append(value)


CASES: list[tuple[str, int, int, Put[tuple[int, int], int] | None, int, int]] = [
    # (case, others' writes, attempts, what it returns (None: the conflict propagates), reads, value)
    ("no conflict", 0, 3, Put((1, 1), 2), 1, 2),
    ("a conflict, then success on what is there now", 1, 3, Put((101, 2), 102), 2, 102),
    ("two conflicts, then success on the last attempt", 2, 3, Put((201, 3), 202), 3, 202),
    ("conflicts past the bound", 3, 3, None, 3, 301),
    ("a single attempt lost", 1, 1, None, 1, 101),
]


@pytest.mark.parametrize(
    ("writers", "attempts", "returned", "reads", "value"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_lost_put_reads_again_and_decides_again_up_to_the_bound(
    writers: int, attempts: int, returned: Put[tuple[int, int], int] | None, reads: int, value: int
) -> None:
    store = Store(1, writers)

    def change(read: tuple[int, int]) -> int:
        return read[0] + 1

    if returned is None:
        with pytest.raises(ConflictError):
            read_change_put(store.read, change, store.put, attempts=attempts)
    else:
        assert read_change_put(store.read, change, store.put, attempts=attempts) == returned
    assert (store.reads, store.value) == (reads, value)
    assert len(store.puts) == (0 if returned is None else 1)  # never written twice


def test_nothing_to_do_puts_nothing() -> None:
    store = Store(5, writers=3)
    assert read_change_put(store.read, lambda read: None, store.put) == Put((5, 1), None)
    assert store.puts == [] and store.version == 1


def test_a_fresh_read_in_hand_is_the_first_attempts() -> None:
    store = Store(1, writers=1)
    done = read_change_put(store.read, lambda read: read[0] + 1, store.put, first=lambda: (1, 1))
    assert done == Put((101, 2), 102) and store.reads == 1  # read again only after the conflict


def test_an_error_of_the_read_or_the_change_is_not_retried() -> None:
    store = Store(1, writers=0)

    def refuse(read: tuple[int, int]) -> int:
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        read_change_put(store.read, refuse, store.put)
    assert store.reads == 1 and store.puts == []
