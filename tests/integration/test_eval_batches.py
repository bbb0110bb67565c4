"""An eval's trials run in batches (the Map's ItemBatcher, decision 0163): a child execution runs its batch's trials
one after another; an invocation short of time stops before a trial and its retry runs only the rest."""

from __future__ import annotations

from typing import Any

import pytest

from shared.engine import evalrun, evaltrial
from tests.helpers import setting
from tests.integration.test_eval_runs import BASE, run_eval
from tests.wire import all_events


def test_batch_size_keeps_the_concurrency_busy_and_a_driven_trial_alone() -> None:
    # a large eval: the most a batch holds; a small one: what keeps each of the concurrent children busy
    assert evalrun.batch_size(1_000, False, 4, 50) == 50
    assert evalrun.batch_size(40, False, 4, 25) == 10
    assert evalrun.batch_size(500, False, 4, 50) == 42  # 12 batches: three for each of the four children at once
    assert evalrun.batch_size(3, False, 4, 25) == 1
    assert evalrun.batch_size(3, False, 1, 25) == 3
    # a trial its driver runs waits on its own task token: one to a child
    assert evalrun.batch_size(1_000, True, 4, 25) == 1


@pytest.fixture()
def invocations(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, list[tuple[int, int]]]]:
    """Each ``trials`` invocation of the eval's trial function: its retry count and the trials it ran."""
    seen: list[tuple[int, list[tuple[int, int]]]] = []
    trials_task, trial_task = evalrun.trials_task, evalrun.trial_task

    def ran_trial(ports: Any, item: dict[str, Any], **kw: Any) -> dict[str, Any]:
        seen[-1][1].append((int(item["t"]), int(item["k"])))
        return trial_task(ports, item, **kw)

    def spied(ports: Any, batch: list[dict[str, Any]], *, retry: int, **kw: Any) -> dict[str, Any]:
        seen.append((retry, []))
        return trials_task(ports, batch, retry=retry, **kw)

    monkeypatch.setattr(evalrun, "trials_task", spied)
    monkeypatch.setattr(evalrun, "trial_task", ran_trial)
    return seen


def _completed(host: Any) -> tuple[str, list[Any]]:
    client = host.client(host.key_a)
    run_id = run_eval(client, BASE)
    return run_id, all_events(client, run_id)


def test_one_child_runs_its_batch_of_trials_in_one_invocation(host, invocations) -> None:
    # Given an eval of three trials and one concurrent child: one batch of three
    with setting("EVAL_MAX_CONCURRENCY", "1"):
        _run_id, events = _completed(host)
    # Then one invocation ran the three trials, each once, and the eval completed with every trial in its log
    assert invocations == [(0, [(0, 1), (1, 1), (2, 1)])]
    assert sum(1 for e in events if e.type == "agent.invocation-started") == 3
    assert sum(1 for e in events if e.type == "eval.scored") == 3


def test_an_invocation_out_of_time_stops_and_its_retries_run_only_the_rest(host, invocations, monkeypatch) -> None:
    # Given a batch of three whose invocation never has time for a second trial (the reserve is past any time left)
    monkeypatch.setattr(evalrun, "BATCH_RESERVE_MS", 10**9)
    with setting("EVAL_MAX_CONCURRENCY", "1"):
        _run_id, events = _completed(host)
    # Then each invocation ran one trial and stopped; each retry skipped the stored ones: every trial ran once
    assert invocations == [(0, [(0, 1)]), (1, [(1, 1)]), (2, [(2, 1)])]
    assert sum(1 for e in events if e.type == "agent.invocation-started") == 3
    assert [e.type for e in events[-2:]] == ["eval.completed", "run.completed"]


def _trial_transactions(host: Any) -> tuple[list[list[dict[str, Any]]], list[Any]]:
    """An eval of three trials in one batch, run to its end: the transactions that wrote its TRIAL# items, and its
    events."""
    from shared.wiring import get_ports

    sent: list[list[dict[str, Any]]] = []

    def before(params: Any = None, model: Any = None, **_: Any) -> None:
        if model.name == "TransactWriteItems" and any(
            e["Put"]["Item"].get("sk", {}).get("S", "").startswith("TRIAL#")
            for e in params["TransactItems"]
            if "Put" in e
        ):
            sent.append(list(params["TransactItems"]))

    with setting("EVAL_MAX_CONCURRENCY", "1"):
        client = get_ports().tool_calls._c  # type: ignore[attr-defined]  # (the setting's ports)
        client.meta.events.register("before-parameter-build", before)
        try:
            _run_id, events = _completed(host)
        finally:
            client.meta.events.unregister("before-parameter-build", before)
    return sent, events


def _trials_in(tx: list[dict[str, Any]]) -> int:
    return sum(1 for e in tx if "Put" in e and e["Put"]["Item"].get("sk", {}).get("S", "").startswith("TRIAL#"))


def test_a_batch_writes_its_trials_together_with_one_check_of_its_run(host, invocations, monkeypatch) -> None:
    # Given an eval of three trials in one batch, none of them slow enough to be written alone (however loaded the
    # machine: the hold's time rule has its own tests)
    monkeypatch.setattr(evalrun, "HOLD_MS", 10**9)
    monkeypatch.setattr(evaltrial, "HOLD_MS", 10**9)
    sent, events = _trial_transactions(host)
    # Then the three trials' items (their TRIAL# items and their calls' records) went in one transaction, beside one
    # check that the run is writable, not a transaction and a check each (decision 0187)
    assert [_trials_in(tx) for tx in sent] == [3]
    checks = [e for e in sent[0] if "ConditionCheck" in e]
    assert len(checks) == 1 and checks[0]["ConditionCheck"]["Key"]["sk"]["S"] == "RUN"
    assert sum(1 for e in events if e.type == "eval.scored") == 3


def test_trials_slower_than_the_hold_are_written_one_by_one(host, invocations, monkeypatch) -> None:
    # Given a batch of three whose trials each take at least the hold (here: any time at all)
    monkeypatch.setattr(evalrun, "HOLD_MS", 0)
    sent, events = _trial_transactions(host)
    # Then each trial's items were written before the next trial began, each in a transaction of its own
    assert [_trials_in(tx) for tx in sent] == [1, 1, 1]
    assert sum(1 for e in events if e.type == "eval.scored") == 3


def test_an_invocation_that_fails_keeps_the_trials_it_ended_and_its_retry_runs_the_rest(
    host, invocations, monkeypatch
) -> None:
    # Given a batch of three whose first invocation fails in its third trial (an error the Trial state retries)
    spied = evalrun.trial_task
    failed: list[bool] = []

    def failing(ports: Any, item: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if (int(item["t"]), int(item["k"])) == (2, 1) and not failed:
            failed.append(True)
            invocations[-1][1].append((2, 1))
            raise RuntimeError("the third trial's first attempt fails")
        return spied(ports, item, **kw)

    monkeypatch.setattr(evalrun, "trial_task", failing)
    with setting("EVAL_MAX_CONCURRENCY", "1"):
        _run_id, events = _completed(host)
    # Then the two trials that ended before the failure were written (held writes are flushed as it fails) and the
    # retry ran only the third: each trial ran to its end once
    assert invocations == [(0, [(0, 1), (1, 1), (2, 1)]), (1, [(2, 1)])]
    assert sum(1 for e in events if e.type == "agent.invocation-started") == 3
    assert [e.type for e in events[-2:]] == ["eval.completed", "run.completed"]
