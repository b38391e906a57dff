"""The issue dependency graph — pure functions over ``{issue: frozenset(blockers)}``.

An edge ``A -> B`` means "issue A is blocked by issue B". The registry stores
each edge twice (forward on A, reverse on B) so both "what blocks A" and "who
is blocked by B" are single queries; these functions only see the mapping the
shell loaded.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

from squadron.errors import SquadronError

BlockerGraph = Mapping[int, frozenset[int]]


class BlockerError(SquadronError):
    """A blocker edge that must not be stored."""


class CyclicDependencyError(BlockerError):
    def __init__(self, issue: int, blocker: int, cycle: list[int]) -> None:
        self.issue = issue
        self.blocker = blocker
        self.cycle = cycle
        path = " -> ".join(f"#{n}" for n in cycle)
        super().__init__(f"#{issue} cannot be blocked by #{blocker}: that closes the cycle {path}")


class MaxDepthExceededError(BlockerError):
    def __init__(self, issue: int, blocker: int, depth: int, limit: int) -> None:
        self.issue = issue
        self.blocker = blocker
        self.depth = depth
        self.limit = limit
        super().__init__(
            f"#{issue} blocked by #{blocker} makes a blocker chain {depth} deep, over the limit of {limit}"
        )


class SelfBlockError(BlockerError):
    def __init__(self, issue: int) -> None:
        self.issue = issue
        super().__init__(f"#{issue} cannot be blocked by itself")


def path_between(graph: BlockerGraph, start: int, goal: int) -> list[int] | None:
    """A shortest chain of "blocked by" edges from ``start`` to ``goal``, or None."""
    previous: dict[int, int | None] = {start: None}
    queue = deque([start])
    while queue:
        current = queue.popleft()
        if current == goal:
            path = [current]
            while (step := previous[path[-1]]) is not None:
                path.append(step)
            return path[::-1]
        for nxt in sorted(graph.get(current, frozenset())):
            if nxt not in previous:
                previous[nxt] = current
                queue.append(nxt)
    return None


def _longest(graph: BlockerGraph, issue: int, seen: frozenset[int]) -> int:
    children = graph.get(issue, frozenset()) - seen
    if not children:
        return 0
    return 1 + max(_longest(graph, child, seen | {child}) for child in children)


def reverse(graph: BlockerGraph) -> dict[int, frozenset[int]]:
    """``{blocker: issues it blocks}``."""
    blocks: dict[int, set[int]] = {}
    for issue, blockers in graph.items():
        for blocker in blockers:
            blocks.setdefault(blocker, set()).add(issue)
    return {blocker: frozenset(issues) for blocker, issues in blocks.items()}


def depth_of(graph: BlockerGraph, issue: int) -> int:
    """How many "blocked by" edges lead down from ``issue`` at the most (its own blocker chain)."""
    return _longest(graph, issue, frozenset({issue}))


def height_of(graph: BlockerGraph, issue: int) -> int:
    """How many edges lead up to ``issue`` at the most: 0 for an issue that blocks nothing.

    A blocker issue spawned for a blocker spawned for ... has a growing
    height; ``max_issue_depth`` bounds it (EC-010).
    """
    return _longest(reverse(graph), issue, frozenset({issue}))


def check_new_blocker(graph: BlockerGraph, issue: int, blocker: int, *, max_depth: int) -> None:
    """Raise if storing ``issue -> blocker`` would be a self-block, a cycle or too deep a chain."""
    if issue == blocker:
        raise SelfBlockError(issue)
    back = path_between(graph, blocker, issue)
    if back is not None:
        raise CyclicDependencyError(issue, blocker, [issue, *back])
    chain = height_of(graph, issue) + 1 + depth_of(graph, blocker)
    if chain > max_depth:
        raise MaxDepthExceededError(issue, blocker, chain, max_depth)
