"""The pure engine: definition validation, scheduling by trigger rules, loop bounds, the fold."""

from __future__ import annotations

import pytest

from shared.engine import state as st
from shared.engine.registry import NODE_TYPES
from shared.engine.workflow import DefinitionError, InputsError, bind_inputs, load_workflow
from shared.protocol import codes as c

TYPES = set(NODE_TYPES)


def wf(nodes, edges, **settings):
    return load_workflow(
        {
            "id": "w",
            "nodes": [{"id": n, "typeId": "core.noop"} for n in nodes],
            "edges": [
                {"id": f"{s}-{t}", "sourceNodeId": s, "targetNodeId": t, **({"triggerRule": r} if r else {})}
                for s, t, r in edges
            ],
            "settings": settings,
        },
        TYPES,
    )


def ev(t, seq, node=None, **payload):
    e = {
        "type": t,
        "sequence": seq,
        "timestamp": "2026-12-02T00:00:00.000Z",
        "payload": {**({"nodeId": node} if node else {}), **payload},
    }
    if node:
        e["nodeId"] = node
    return e


def run(w, script):
    """Fold a scripted list of (type, node[, outcome]) after run.started; return the state."""
    s = st.new_state()
    st.apply(s, ev(c.RUN_STARTED, 0, inputs={}), w)
    for i, (t, n, *_rest) in enumerate(script, start=1):
        payload = (
            {"outputs": {}}
            if t == c.NODE_COMPLETED
            else {"error": {"code": "x", "message": "m"}}
            if t == c.NODE_FAILED
            else {}
        )
        st.apply(s, ev(t, i, n, **payload), w)
    return s


@pytest.mark.parametrize(
    "doc,why",
    [
        ({"id": "w", "nodes": []}, "no nodes"),
        ({"id": "w", "nodes": [{"id": "a", "typeId": "core.nope"}]}, "unknown typeId"),
        ({"id": "w", "nodes": [{"id": "a", "typeId": "core.noop"}, {"id": "a", "typeId": "core.noop"}]}, "duplicate"),
        (
            {
                "id": "w",
                "nodes": [{"id": "a", "typeId": "core.noop"}],
                "edges": [{"sourceNodeId": "a", "targetNodeId": "zz"}],
            },
            "unknown node",
        ),
        (
            {
                "id": "w",
                "nodes": [{"id": "a", "typeId": "core.noop"}, {"id": "b", "typeId": "core.noop"}],
                "edges": [{"sourceNodeId": "a", "targetNodeId": "b"}, {"sourceNodeId": "b", "targetNodeId": "a"}],
                "settings": {"maxLoopbackIterations": 3},
            },
            "no entry",
        ),
        (
            {
                "id": "w",
                "nodes": [
                    {"id": "s", "typeId": "core.noop"},
                    {"id": "a", "typeId": "core.noop"},
                    {"id": "b", "typeId": "core.noop"},
                ],
                "edges": [
                    {"sourceNodeId": "s", "targetNodeId": "a"},
                    {"sourceNodeId": "a", "targetNodeId": "b"},
                    {"sourceNodeId": "b", "targetNodeId": "a"},
                ],
            },
            "cycle without bound",
        ),
        (
            {
                "id": "w",
                "nodes": [{"id": "a", "typeId": "core.noop"}],
                "edges": [{"sourceNodeId": "a", "targetNodeId": "a", "triggerRule": "sometimes"}],
            },
            "unknown rule",
        ),
    ],
)
def test_bad_definitions_are_refused(doc, why):
    with pytest.raises(DefinitionError):
        load_workflow(doc, TYPES)


def test_entries_and_sequence():
    w = wf(["a", "b", "c"], [("a", "b", None), ("b", "c", None)])
    s = run(w, [])
    assert s["ready"] == ["a"]
    s = run(w, [(c.NODE_STARTED, "a"), (c.NODE_COMPLETED, "a")])
    assert s["ready"] == ["b"] and s["nodes"]["a"]["terminals"] == 1


def test_all_success_waits_for_every_source_and_skips_after_a_failure():
    w = load_workflow(
        {
            "id": "w",
            "nodes": [{"id": n, "typeId": "core.noop"} for n in "abj"],
            "edges": [{"sourceNodeId": "a", "targetNodeId": "j"}, {"sourceNodeId": "b", "targetNodeId": "j"}],
        },
        TYPES,
    )
    s = run(w, [(c.NODE_STARTED, "a"), (c.NODE_COMPLETED, "a")])
    assert "j" not in s["ready"]
    s2 = run(w, [(c.NODE_STARTED, "a"), (c.NODE_COMPLETED, "a"), (c.NODE_STARTED, "b"), (c.NODE_COMPLETED, "b")])
    assert s2["ready"] == ["j"]


def test_a_failure_without_a_handler_fails_the_run_and_all_complete_handles_it():
    w = wf(["a", "b"], [("a", "b", None)])
    s = run(w, [(c.NODE_STARTED, "a"), (c.NODE_FAILED, "a")])
    assert s["failure"]["nodeId"] == "a" and s.get("skips") == ["b"]
    w2 = wf(["a", "b"], [("a", "b", "all_complete")])
    s2 = run(w2, [(c.NODE_STARTED, "a"), (c.NODE_FAILED, "a")])
    assert s2["failure"] is None and s2["ready"] == ["b"]


def test_back_edge_is_followed_while_the_target_is_under_its_bound():
    w = wf(
        ["start", "effect", "wait"],
        [("start", "effect", "any_success"), ("effect", "wait", None), ("wait", "effect", "any_success")],
        maxLoopbackIterations=2,
    )
    assert [e.back for e in w.edges] == [False, False, True]
    visit = [
        (c.NODE_STARTED, "start"),
        (c.NODE_COMPLETED, "start"),
        (c.NODE_STARTED, "effect"),
        (c.NODE_COMPLETED, "effect"),
        (c.NODE_STARTED, "wait"),
        (c.NODE_COMPLETED, "wait"),
    ]
    s = run(w, visit)
    assert s["ready"] == ["effect"] and s["nodes"]["wait"]["status"] == "pending"
    s = run(
        w,
        visit
        + [
            (c.NODE_STARTED, "effect"),
            (c.NODE_COMPLETED, "effect"),
            (c.NODE_STARTED, "wait"),
            (c.NODE_COMPLETED, "wait"),
        ],
    )
    assert s["ready"] == [] and s["nodes"]["effect"]["visits"] == 2 and s["nodes"]["effect"]["terminals"] == 2


def test_cancel_clears_the_active_node_without_a_terminal():
    w = wf(["a"], [])
    s = run(w, [(c.NODE_STARTED, "a"), (c.NODE_CANCELLED, "a")])
    assert s["active"] is None and s["nodes"]["a"]["terminals"] == 0


def test_fold_equals_stepwise_application():
    w = wf(["a", "b"], [("a", "b", None)])
    events = [
        ev(c.RUN_STARTED, 0, inputs={"x": 1}),
        ev(c.NODE_STARTED, 1, "a"),
        ev(c.NODE_COMPLETED, 2, "a", outputs={"o": 1}),
    ]
    folded = st.fold(events, w)
    half = st.fold(events[:2], w)
    assert st.fold(events[2:], w, half) == folded
    assert st.projection(folded)["variables"] == {"x": 1}


def test_inputs_bind_defaults_required_and_types():
    doc = {
        "variables": [
            {"name": "n", "type": "number", "required": True, "defaultValue": 5},
            {"name": "s", "type": "string"},
            {"name": "r", "type": "boolean", "required": True},
        ]
    }
    assert bind_inputs(doc, {"r": True}) == {"n": 5, "r": True}
    with pytest.raises(InputsError):
        bind_inputs(doc, {})
    with pytest.raises(InputsError):
        bind_inputs(doc, {"r": True, "n": "five"})
    with pytest.raises(InputsError):
        bind_inputs(doc, {"r": True, "n": True})
