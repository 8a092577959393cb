"""planner.logs: the JSON line's timestamp is the standard library's own text."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import example, given
from hypothesis import strategies as st

from planner.logs import timestamp


@given(st.floats(min_value=-1e9, max_value=4e9, allow_nan=False))
# Fractions that datetime rounds up into the next second, and halves of a microsecond.
@example(1e9 + 0.9999996)
@example(1764700000.9999995)
@example(1e9 + 0.0005)
@example(-0.0000004)
@example(0.0)
def test_timestamp_is_datetimes_isoformat(created: float) -> None:
    expected = datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")
    assert timestamp(created) == expected


def test_timestamp_keeps_up_with_the_second() -> None:
    # The cached calendar part must follow the clock across a second, a day and back.
    for created in (1764700799.999, 1764700800.0, 1764700800.5, 1764614400.25):
        expected = datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")
        assert timestamp(created) == expected
