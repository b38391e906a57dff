"""The registry's contract suites run against every implementation (``support.IMPLEMENTATIONS``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.unit.registry.support import IMPLEMENTATIONS, implementation


@pytest.fixture(params=IMPLEMENTATIONS)
def registry(request: pytest.FixtureRequest) -> Iterator[Any]:
    with implementation(request.param) as found:
        yield found
