"""A trial's trajectory from its events, and the first step where a candidate's departs from its baseline's."""

from __future__ import annotations

from typing import Any

from shared.engine.trajectory import describe, first_divergence, steps, task_divergence


def ev(t: str, **payload: Any) -> dict[str, Any]:
    return {"type": t, "payload": payload}


def scripted(args: dict[str, Any], answer: Any = "done", outcome: Any = None) -> list[dict[str, Any]]:
    return [
        ev("agent.invocation-started", invocationId="t:1"),
        ev("agent.tool-called", toolName="search", callId="t:1#0", inputs=args),
        ev("agent.tool-returned", toolName="search", callId="t:1#0", status="ok", outcome=outcome or {"n": 1}),
        ev("agent.decided", decision=answer),
        ev("agent.invocation-completed", invocationId="t:1", outcome="completed"),
    ]


def test_steps_are_the_model_turns_tool_calls_answers_and_final_output_in_order() -> None:
    # Given a model agent's events: one turn asking for a tool, the call, its answer, a final turn, the judge after
    events = [
        ev("provider.usage", inputTokens=1),
        *scripted({"q": "a"})[1:3],
        ev("provider.usage"),
        ev("agent.decided", decision="x"),
        ev("agent.invocation-completed"),
        ev("provider.usage"),
    ]
    # When its steps are read with the model-call log's texts
    got = steps(events, {0: "", 1: "x"})
    # Then the judge's call after the invocation is no step
    assert got == [
        {"type": "model-output", "turn": 0, "text": ""},
        {"type": "tool-call", "tool": "search", "args": {"q": "a"}},
        {"type": "tool-answer", "tool": "search", "status": "ok", "answer": {"n": 1}},
        {"type": "model-output", "turn": 1, "text": "x"},
        {"type": "final-output", "output": "x"},
    ]


def test_a_changed_argument_is_tool_arguments_at_its_pointers() -> None:
    # Given the same call with one nested argument changed
    base = steps(scripted({"q": "a", "opts": {"limit": 1, "a/b": 0}}))
    cand = steps(scripted({"q": "a", "opts": {"limit": 2, "a/b": 1}}))
    # When compared
    div = first_divergence(base, cand)
    # Then the first step differs at the escaped RFC 6901 pointers of the arguments
    assert div is not None
    assert (div["step"], div["kind"], div["pointers"]) == (0, "tool-arguments", ["/opts/a~1b", "/opts/limit"])
    assert div["baseline"]["args"]["opts"]["limit"] == 1 and div["candidate"]["args"]["opts"]["limit"] == 2


def test_each_kind_of_difference_has_its_kind() -> None:
    base = steps(scripted({"q": "a"}))
    other_tool = [dict(s, tool="fetch") if s["type"] == "tool-call" else s for s in base]
    assert first_divergence(base, other_tool)["kind"] == "tool-call"  # type: ignore[index]
    answer = steps(scripted({"q": "a"}, outcome={"n": 2}))
    assert first_divergence(base, answer) == {
        "step": 1,
        "kind": "tool-call",
        "pointers": ["/n"],
        "baseline": base[1],
        "candidate": answer[1],
    }
    final = steps(scripted({"q": "a"}, answer={"v": 1, "w": 2}))
    got = first_divergence(steps(scripted({"q": "a"}, answer={"v": 1, "w": 3})), final)
    assert got is not None and (got["step"], got["kind"], got["pointers"]) == (2, "final-output", ["/w"])
    model = [{"type": "model-output", "turn": 0, "text": "a"}]
    assert first_divergence(model, [{"type": "model-output", "turn": 0, "text": "b"}])["kind"] == "model-output"  # type: ignore[index]
    # one trajectory ends where the other goes on (an invocation that failed before deciding)
    short = base[:2]
    assert first_divergence(base, short) == {
        "step": 2,
        "kind": "length",
        "baseline": base[2],
        "candidate": None,
        "pointers": [],
    }
    # an extra tool call where the baseline decided
    assert first_divergence(base[2:], base)["kind"] == "tool-call"  # type: ignore[index]
    assert first_divergence(base, [dict(s) for s in base]) is None


def test_trials_pair_by_number_and_the_lowest_differing_pair_is_the_tasks() -> None:
    # Given trial 1 the same on both sides and trial 2 differing (trial 3 only on the candidate side)
    same, other = steps(scripted({"q": "a"})), steps(scripted({"q": "b"}))
    div = task_divergence({1: same, 2: same}, {1: same, 2: other, 3: other})
    # Then the divergence is trial 2's
    assert div is not None and (div["trial"], div["step"], div["pointers"]) == (2, 0, ["/q"])
    assert task_divergence({1: same}, {1: same, 2: other}) is None


def test_a_content_free_divergence_keeps_pointers_and_drops_values() -> None:
    # Given two trials whose final outputs differ, of a content-free agent
    div = task_divergence(
        {1: steps(scripted({}, answer={"s": "secret-1"}))},
        {1: steps(scripted({}, answer={"s": "secret-2"}))},
        content_free=True,
    )
    # Then the pointer stays and no value is carried
    assert div is not None and div["pointers"] == ["/s"]
    assert div["baseline"] == div["candidate"] == {"type": "final-output"}
    assert "secret" not in describe(div)


def test_describe_names_trial_step_kind_pointer_and_both_values() -> None:
    div = task_divergence({1: steps(scripted({"q": "a"}))}, {1: steps(scripted({"q": "b"}))})
    assert div is not None
    assert describe(div) == (
        'trial 1 step 0 tool-arguments at /q: baseline tool-call search {"q":"a"} / '
        'candidate tool-call search {"q":"b"}'
    )
