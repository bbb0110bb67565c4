"""An effect's claim is its claimant's for exactly as long as the invocation that claimed it can run."""

from __future__ import annotations

from shared import manifest
from shared.engine.kernel import EFFECT_LEASE_S, EFFECT_RECHECK_MAX_S


def test_the_lease_is_the_advance_tasks_lambda_timeout():
    # Given the function that runs every Advance task (the one place a claim is made)
    advance = next(f for f in manifest.FUNCTIONS if f.name == "advance_run")
    # Then a claim outlives any invocation that could still hold it, and no longer
    assert EFFECT_LEASE_S == advance.timeout_s == 300
    # and a delivery that met a live claim looks again well within it
    assert 0 < EFFECT_RECHECK_MAX_S < EFFECT_LEASE_S
