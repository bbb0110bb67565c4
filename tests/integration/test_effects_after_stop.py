"""No effect after cancel or erasure: an effect is performed only while its run is writable.

Randomized: many runs of ``conformance-replay-side-effect`` with short holds (the in-task sleep path, <= 1.5 s)
are cancelled or erased at random points. After each, the effect ledger shows no row written after the run
stopped being writable, and an erased run leaves no row at all. ``make bench`` runs the same check at 200+.
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor

from openwop_client.types import CreateRunRequest

from tests.faults import MAX_HOLD_MS, cancel_at_random, effects_after_cancel
from tests.helpers import eventually
from tests.wire import all_events, raw, wait_terminal

# What a task does after its hold ends (check the run is writable, write its effect) takes well under this here
TASK_STEP_S = 0.5
# A quiet window that outlasts any task of a stopped run: its longest hold, then its step
RUN_ON_S = MAX_HOLD_MS / 1000 + TASK_STEP_S


def _ports():
    from shared.wiring import get_ports

    return get_ports()


def _ledger(run_id: str) -> list[dict]:
    return [v for _, v in _ports().host.query("LEDGER#tenant-a", run_id + "#")]


def test_no_effect_lands_after_a_cancel_at_a_random_point(host):
    # Given 40 runs with 0-1.5 s holds, each cancelled at a random point in its life
    client = host.client(host.key_a)
    rng = random.Random(9)
    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(lambda _: cancel_at_random(client, random.Random(rng.random())), range(40)))
    cancelled = effects_before_cancel = 0
    for run_id, how in outcomes:
        final = wait_terminal(client, run_id)
        if how == "late":
            assert final.status == "completed"
            continue
        # Then a cancelled run's effect, if any, was written before the run stopped being writable
        assert final.status == "cancelled"
        cancelled += 1
        events = all_events(client, run_id)
        cancelled_at = next(e.timestamp for e in events if e.type == "run.cancelled")
        rows = _ledger(run_id)
        assert len(rows) <= 1
        effects_before_cancel += len(rows)
        for row in rows:
            assert row["at"] <= cancelled_at, (run_id, row, cancelled_at)
    # and, once every task has had time to run on (a quiet window past the longest hold since the last cancel), no
    # row appears later for a cancelled run
    time.sleep(RUN_ON_S)
    late = [
        r
        for r, how in outcomes
        if how == "cancelled"
        and effects_after_cancel(
            _ports(), "tenant-a", r, next(e.timestamp for e in all_events(client, r) if e.type == "run.cancelled")
        )
    ]
    assert late == []
    assert cancelled >= 10  # the randomization really cancelled runs mid-flight
    assert effects_before_cancel < cancelled  # and most of them before their effect


def _erase_at_random(host, rng: random.Random) -> str:
    client = host.client(host.key_a)
    run = client.runs_create(
        CreateRunRequest(workflowId="conformance-replay-side-effect", inputs={"delayMs": rng.randint(0, MAX_HOLD_MS)})
    )
    time.sleep(rng.uniform(0, 1.6))  # the scenario's random erasure point, not a wait
    _delete(host.base_url, host.key_a, run.runId)
    return run.runId


def _delete(base_url: str, key: str, run_id: str) -> None:
    assert raw(base_url, "DELETE", f"/runs/{run_id.replace('/', '~2F')}", key=key).status == 204


def test_no_effect_row_survives_an_erasure_at_a_random_point(host):
    # Given 20 runs with short holds, each erased at a random point in its life
    rng = random.Random(11)
    with ThreadPoolExecutor(8) as pool:
        erased = list(pool.map(lambda _: _erase_at_random(host, random.Random(rng.random())), range(20)))
    # Then, after the erasure hook ran and every task had time to run on (a quiet window past the longest hold since
    # the last erasure), no ledger row is left for any of them
    time.sleep(RUN_ON_S)
    for run_id in erased:
        eventually(
            lambda r=run_id: (
                _ledger(r) == [] and not _ports().events.read_events(r) and not _ports().runs.query_aux(r, "EFFECT#")
            ),
            timeout=60,
        )  # a bound, not a target
    time.sleep(2 * TASK_STEP_S)  # a second look, past a task's write that raced the clean-up's last delete
    assert [r for r in erased if _ledger(r)] == []
