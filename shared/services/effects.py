"""GET /runs/{runId}/effects (getRunEffects): the run's Layer-2 effect ledger, projected.

One row per outside effect the run performed, read from what the engine writes before it performs one (never from a
delivery): every claim under the run (``EFFECT#<key>``: an ``http.fetch`` request, a tool call, a model call) and the
ledger rows of ``core.conformance.side-effect`` nodes (``LEDGER#<tenant>``). A claim is written only while the run is
writable and once per key, so a retried task never adds a row, and a replay fork, whose effects are denied, has none
of its own: the projection is the witness of suppression (RFC 0173 §C.2). The shape is
``effect-ledger-projection.schema.json``: ``{runId, effects: [{effectId, nodeId, attempt, keying, state, at}]}``.
"""

from __future__ import annotations

from typing import Any

from shared.keys import EFFECT_PREFIX
from shared.ports import Ports, RunRecord
from shared.services.common import Caller, load_own_run

KEYING = "activity-recipe"  # every key is derived from (run, node, ordinal/turn), not from a provider's identity


def _node_at(ports: Ports, rec: RunRecord, seq_text: str, cache: dict[str, str]) -> str:
    """The node whose ``node.started`` is at sequence ``seq_text`` (an agent's calls are keyed by it)."""
    if seq_text not in cache:
        node = seq_text
        if seq_text.isdigit():
            page = ports.events.read_page(rec.run_id, int(seq_text) - 1, 1)
            if page and page[0].get("nodeId"):
                node = str(page[0]["nodeId"])
        cache[seq_text] = node
    return cache[seq_text]


def _claim_row(ports: Ports, rec: RunRecord, key: str, value: dict[str, Any], cache: dict[str, str]) -> dict[str, Any]:
    """``key`` is ``<node>#<ordinal>`` (http.fetch), ``call#N<node>:<ordinal>#<index>`` (a core.tool node),
    ``call#<order>#<index>`` (an agent's tool call) or ``model#<order>#<turn>`` (a model call)."""
    kind, _, rest = key.partition("#")
    attempt = 1
    if kind == "call" and rest.startswith("N") and ":" in rest:
        node, _, tail = rest[1:].partition(":")
        attempt = int(tail.split("#", 1)[0] or 1)
    elif kind in ("call", "model"):
        node = _node_at(ports, rec, rest.split("#", 1)[0], cache)
    else:
        node, _, ordinal = key.rpartition("#")
        attempt = int(ordinal) if ordinal.isdigit() else 1
    return {
        "effectId": f"{rec.run_id}#{key}",
        "nodeId": node,
        "attempt": max(1, attempt),
        "keying": KEYING,
        "state": "claimed",
        "at": str(value.get("at", rec.created_at)),
    }


def run_effects(ports: Ports, caller: Caller, wire_run_id: str) -> dict[str, Any]:
    rec = load_own_run(ports, caller, wire_run_id)
    cache: dict[str, str] = {}
    rows = [
        _claim_row(ports, rec, sk[len(EFFECT_PREFIX) :], value, cache)
        for sk, value in ports.runs.query_aux(rec.run_id, EFFECT_PREFIX)
    ]
    for effect_id, value in ports.ledger.list_effects(rec.tenant, rec.run_id):
        rows.append(
            {
                "effectId": effect_id,
                "nodeId": str(value["nodeId"]),
                "attempt": max(1, int(value.get("ordinal", 1))),
                "keying": KEYING,
                "state": "completed",
                "at": str(value["at"]),
            }
        )
    rows.sort(key=lambda r: (r["at"], r["effectId"]))
    return {"runId": rec.run_id, "effects": rows}
