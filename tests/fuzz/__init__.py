"""Fuzzers of the untrusted inputs: repository configuration, globs, webhook bodies.

Every generated input runs in a forked child (tests/support/bounded.py) under a memory
ceiling and a wall-clock deadline, and its CPU time is checked against a generous bound
(:data:`CPU_SECONDS`): the product's own limits keep real cases far below it, so the
bound cannot flake on a loaded machine, while a hang or an explosion fails the test
with the input that caused it.

``make test`` runs a modest, fixed set of examples per fuzzer; ``make fuzz`` runs many
random ones (``FUZZ_EXAMPLES``, default 2000 there).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

#: Examples per fuzzer.
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "20"))
#: A long run explores at random; the normal run is the same every time.
LONG_RUN = "FUZZ_EXAMPLES" in os.environ
#: Per input: CPU seconds allowed (real cases take milliseconds), memory, and the kill deadline.
CPU_SECONDS = 5.0
MEMORY_MIB = 512
DEADLINE_SECONDS = 60.0

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not LONG_RUN,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
