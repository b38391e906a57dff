"""The local stack's test clock (squadron.adapters.moto_clock): how long a scaled ``Wait`` lasts,
and what the moto server accepts as a scale (docs/local-stack.md)."""

from __future__ import annotations

import pytest

from squadron.adapters.moto_clock import SCALE_ENV, scale_of, scaled

SCALED: list[tuple[int, int, int]] = [
    (3600, 3600, 1),  # a reminder's hour in a second
    (7200, 3600, 2),  # two hours stay longer than one
    (30, 3600, 1),  # a wait that waits is never zero (moto counts whole seconds)
    (0, 3600, 0),  # one that does not, does not
    (-5, 3600, -5),  # a timestamp already past: as moto reads it
    (90, 1, 90),  # scale 1: as written
]


@pytest.mark.parametrize(("seconds", "scale", "lasts"), SCALED)
def test_a_scaled_wait_lasts(seconds: int, scale: int, lasts: int) -> None:
    assert scaled(seconds, scale) == lasts


@pytest.mark.parametrize(("environ", "scale"), [({}, 1), ({SCALE_ENV: "3600"}, 3600), ({SCALE_ENV: " "}, 1)])
def test_the_scale_the_server_is_given(environ: dict[str, str], scale: int) -> None:
    assert scale_of(environ) == scale


@pytest.mark.parametrize("text", ["0", "-3", "1.5", "fast"])
def test_a_scale_that_is_no_positive_whole_number_is_refused_with_its_name(text: str) -> None:
    with pytest.raises(ValueError, match=SCALE_ENV):
        scale_of({SCALE_ENV: text})
