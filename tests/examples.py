"""How many examples a property test draws: one rule for every hypothesis test.

A test names its number as `examples(N)`. `make test` (what CI runs) draws N. `make check`, the
fast tier, sets METAHARNESS_EXAMPLES_SCALE=0.25 and draws a quarter of N (at least MINIMUM): the
same properties on fewer inputs, so a developer's loop stays in minutes and CI still searches
deep. Tests that name no number get hypothesis's default, scaled the same way (tests/conftest.py
loads the profile).
"""

from __future__ import annotations

import os

SCALE = float(os.environ.get("METAHARNESS_EXAMPLES_SCALE", "1"))
MINIMUM = 20
DEFAULT = 100  # hypothesis's own default max_examples


def examples(n: int) -> int:
    """The examples a test that names N draws in this tier."""
    return n if SCALE >= 1 else max(min(n, MINIMUM), round(n * SCALE))
