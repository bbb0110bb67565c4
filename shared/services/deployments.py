"""Agent deployments (RFC 0082) and the promotion gate (RFC 0081 evidence).

One record per (agentId, version) under ``AGENTDEP#<tenant>`` / ``<agentId>#<version>``; a registered version
with no record is ``draft``. ``GET /agents/{agentId}/deployments`` lists every version's record;
``POST /agents/{agentId}/deployments`` applies one transition:

- ``promote`` moves a version forward along draft → test → staged → active (``toState``, default: the next
  state), or a ``paused`` version back to ``active``. Entering ``staged`` or ``active`` needs eval evidence:
  ``evalRunId`` naming a completed eval run of this tenant that evaluated exactly this agent version, whose summary
  passed, with no fixture miss, and which did not regress against its baseline; anything else is
  ``422 eval_gate_unmet`` whose ``details.reasons`` lists every reason that applies (``{code, message}``, and the
  task ids where it is about tasks: decision 0147); a foreign, malformed or unknown id is the one reason
  ``not_found``, the same bytes whatever it was. ``active`` puts the version on ``channel``
  (default ``stable``); the version that held the channel keeps its state and loses the channel, and becomes the
  new version's rollback target.
- ``pause`` (active → paused), ``deprecate`` (active → deprecated): the version leaves its channels.
- ``rollback`` (active → rolled-back): the rollback target is restored to ``active`` on the same channels and is
  named by ``rollbackPointer``.
- ``adjust-canary``: this host does not split traffic (``canary: false``): refused.

Channels: ``stable`` and ``canary`` are assigned by promotion; ``latest`` is reserved and resolves to the highest
active version. A run resolves a channel once, at create, and records the version it got. A reference with neither
a version nor a channel follows ``stable`` as soon as the agent has any deployment (``default_version``): registering
a version never changes what such a run gets.

Host routes (``/host/openwop-serverless/agents/{agentId}/deployments/{channel}``): every change of the version a
channel serves is one history item under ``AGENTCHAN#<tenant>`` / ``<agentId>#<channel>#<n>`` (``{version,
evalRunId, at, keyId}``, ``version`` null when the channel was left serving nothing), written before the records
change (``if_absent`` on ``n``: two concurrent changes cannot both land); ``GET .../history`` lists them oldest
first; ``POST ...:rollback`` rolls the serving version back (``rolled-back``, as the official ``rollback``) to the
latest earlier version of that channel's history that is still ``active``, else ``409
openwop-serverless.no_previous_deployment``.
"""

from __future__ import annotations

from typing import Any

from shared.errors import (
    NotFoundError,
    ProtocolError,
    RunGoneError,
    VersionConflictError,
    invalid_at,
    invalid_parameter,
)
from shared.ports import Ports
from shared.protocol import codes as c
from shared.protocol.channels import serving
from shared.protocol.semver import semver_key
from shared.services import agent_versions
from shared.services.common import Caller, reference

STATES = ("draft", "test", "staged", "active", "paused", "deprecated", "rolled-back")
CHAIN = ("draft", "test", "staged", "active")
GATED = ("staged", "active")
CHANNELS = ("stable", "canary", "latest")
ASSIGNABLE = ("stable", "canary")


MAX_REASON_TASKS = 20  # task ids a reason names at most (its ``taskCount`` says how many there are)


class EvalGateUnmetError(ProtocolError):
    """``422 eval_gate_unmet`` with ``details.reasons``: every reason that applies, each ``{code, message}`` (and
    ``tasks``/``taskCount`` where it is about tasks). Only the caller's own eval run is described: a foreign,
    malformed or unknown id is the one reason ``not_found``, the same bytes whatever it was."""

    code = c.EVAL_GATE_UNMET

    def __init__(self, reasons: list[dict[str, Any]]) -> None:
        super().__init__("The eval run is not evidence that this version may be promoted.", {"reasons": reasons})


def _reason(code: str, message: str, tasks: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"code": code, "message": message}
    if tasks is not None:
        out["tasks"] = tasks[:MAX_REASON_TASKS]
        out["taskCount"] = len(tasks)
    return out


NO_EVIDENCE = _reason("no_evidence", "Entering staged or active needs evalRunId: an eval run of this version.")
NOT_FOUND = _reason("not_found", "evalRunId names no eval run of this tenant.")


class NoActiveDeploymentError(ProtocolError):
    code = c.NO_ACTIVE_DEPLOYMENT


class NoPreviousDeploymentError(ProtocolError):
    code = c.NO_PREVIOUS_DEPLOYMENT
    default_message = "The channel has no earlier deployment that is still active to roll back to."


def _stored(ports: Ports, tenant: str, agent_id: str) -> dict[str, dict[str, Any]]:
    """The deployment records written for the agent (versions never deployed have none), by version."""
    return ports.deployments.list_records(tenant, agent_id)


def _records(ports: Ports, tenant: str, agent_id: str) -> dict[str, dict[str, Any]]:
    """Every registered version's record (``draft`` when none was written), by version."""
    stored = _stored(ports, tenant, agent_id)
    return {
        v: stored.get(v) or {"agentId": agent_id, "version": v, "state": "draft"}
        for v in agent_versions.versions(ports, tenant, agent_id)
    }


def _wire(doc: dict[str, Any]) -> dict[str, Any]:
    """The official AgentDeployment shape (host-internal members dropped)."""
    return {
        k: doc[k]
        for k in ("agentId", "version", "state", "canaryPercent", "rollbackPointer", "channels", "evalRunId")
        if doc.get(k) not in (None, [])
    }


def list_deployments(ports: Ports, caller: Caller, agent_id: str) -> dict[str, Any]:
    records = _records(ports, caller.tenant, agent_id)
    if not records:
        raise NotFoundError("No such agent.")
    return {"deployments": [_wire(records[v]) for v in sorted(records, key=semver_key)]}


def _gate(ports: Ports, caller: Caller, agent_id: str, version: str, eval_run_id: str | None) -> str:
    """The eval evidence for entering staged/active, or ``eval_gate_unmet`` with every reason that applies."""
    from shared.engine import evalrun
    from shared.services import summaries

    if eval_run_id is None:
        raise EvalGateUnmetError([NO_EVIDENCE])
    rec = reference(ports, caller, eval_run_id)
    if rec is None or rec.kind != "eval":
        raise EvalGateUnmetError([NOT_FOUND])
    try:
        plan = evalrun.load_plan(ports, rec.run_id)
    except RunGoneError as exc:  # erased meanwhile
        raise EvalGateUnmetError([NOT_FOUND]) from exc
    summary = summaries.stored(ports, rec) if rec.status == "completed" and rec.summary else None
    reasons = _evidence_faults(plan, summary, rec.status, agent_id, version)
    if reasons:
        raise EvalGateUnmetError(reasons)
    return rec.run_id


def _evidence_faults(
    plan: dict[str, Any], summary: dict[str, Any] | None, status: str, agent_id: str, version: str
) -> list[dict[str, Any]]:
    """Why the caller's own eval run is no evidence for ``agent_id@version`` (empty: it is)."""
    out: list[dict[str, Any]] = []
    if plan.get("agentId") != agent_id:
        out.append(_reason("other_agent", "The eval run evaluated another agent."))
    elif plan.get("agentVersion") != version:
        evaluated = plan.get("agentVersion")
        out.append(
            _reason(
                "wrong_version",
                f"The eval run evaluated version {evaluated}, not {version}."
                if evaluated
                else f"The eval run pinned no agent version, not {version}.",
            )
        )
    if summary is None:
        out.append(_reason("unfinished", f"The eval run has no summary to be evidence: it is {status}."))
        return out
    tasks = list(summary.get("tasks") or [])
    if not summary.get("passed"):
        failed = [str(t.get("taskId")) for t in tasks if not t.get("passed")]
        out.append(_reason("not_passed", "The eval run did not pass its suite's bar.", failed))
    missed = [str(t.get("taskId")) for t in tasks if int(t.get("fixtureMissCount", 0))]
    if missed:
        out.append(_reason("fixture_misses", "Tasks met calls their fixtures did not record (unverifiable).", missed))
    regression = summary.get("regression") or {}
    base = {str(k): float(v) for k, v in ((plan.get("baseline") or {}).get("tasks") or {}).items()}
    fell = [
        str(t["taskId"])
        for t in tasks
        if str(t.get("taskId")) in base and float(t["score"]) < base[str(t["taskId"])] - 1e-9
    ]
    if regression.get("verdict") == "regressed":
        out.append(_reason("regressed", "The eval run regressed against its baseline.", fell))
    if float(regression.get("scoreDelta", 0)) < 0:
        delta = float(regression["scoreDelta"])
        out.append(_reason("score_fell", f"The aggregate score fell against the baseline (scoreDelta {delta:.3f})."))
    return out


def transition(ports: Ports, caller: Caller, agent_id: str, body: Any) -> dict[str, Any]:
    records = _records(ports, caller.tenant, agent_id)
    if not records:
        raise NotFoundError("No such agent.")
    version = body.version
    if version not in records:
        raise invalid_at("/version", "exists", "The agent has no such version.")
    rec = dict(records[version])
    state = rec["state"]
    changed: dict[str, dict[str, Any]] = {}
    _refuse_canary(body)
    if body.transition == "promote":
        changed = _promote(ports, caller, agent_id, body, records, rec)
    elif body.transition in ("pause", "deprecate"):
        if state != "active":
            raise invalid_at("/transition", "state", f"Only an active version can be {body.transition}d.")
        rec["state"] = "paused" if body.transition == "pause" else "deprecated"
        rec["channels"] = []
    elif body.transition == "rollback":
        previous = rec.get("previous")
        if state != "active" or previous not in records:
            raise NoActiveDeploymentError("There is no earlier active version to roll back to.")
        changed.update(_rolled_back({**records, version: rec}, version, previous))
        rec = changed.pop(version)
    if body.reason is not None:
        rec["reason"] = body.reason
    _write(ports, caller, agent_id, records, {**changed, version: rec})
    return _wire(rec)


def _refuse_canary(body: Any) -> None:
    if body.transition == "adjust-canary" or (body.canaryPercent is not None and body.canaryPercent < 100):
        raise invalid_at(
            "/transition" if body.transition == "adjust-canary" else "/canaryPercent",
            "const",
            "This host does not split traffic between versions (canary: false).",
        )


def _promote(
    ports: Ports, caller: Caller, agent_id: str, body: Any, records: dict[str, dict[str, Any]], rec: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """Promote ``rec`` (in place) to ``toState`` or the next state of the chain, gated by eval evidence where the
    target asks for it; an active target takes its channel. Returns the other records that change."""
    state = rec["state"]
    target = body.toState or (CHAIN[CHAIN.index(state) + 1] if state in CHAIN[:-1] else None)
    resume = state == "paused" and target == "active"
    if (
        target is None
        or target not in CHAIN
        or not (resume or (state in CHAIN and CHAIN.index(target) > CHAIN.index(state)))
    ):
        raise invalid_at(
            "/toState" if body.toState else "/transition",
            "state",
            f"A {state} version cannot be promoted to {target or 'a later state'}.",
        )
    if (target in GATED and not resume) or body.evalRunId is not None:  # named evidence is always checked
        rec["evalRunId"] = _gate(ports, caller, agent_id, body.version, body.evalRunId)
    rec["state"] = target
    if target != "active":
        return {}
    return _assign_channel(body.channel or "stable", records, body.version, rec)


def _assign_channel(
    channel: str, records: dict[str, dict[str, Any]], version: str, rec: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """Give ``rec`` the channel (in place), taking it from the version that held it (then ``rec``'s previous one).
    Returns the other records that change."""
    if channel not in ASSIGNABLE:
        raise invalid_at("/channel", "enum", "The channel is not one this host assigns (stable, canary).")
    changed: dict[str, dict[str, Any]] = {}
    for v, other in records.items():
        if v != version and channel in (other.get("channels") or []):
            rec["previous"] = v
            changed[v] = {**other, "channels": [ch for ch in other["channels"] if ch != channel]}
    rec["channels"] = sorted(set(rec.get("channels") or []) | {channel})
    return changed


def _rolled_back(records: dict[str, dict[str, Any]], current: str, target: str) -> dict[str, dict[str, Any]]:
    """``current`` rolled back to ``target``: the target is active again on every channel the current one held."""
    rec = records[current]
    restored = {
        **records[target],
        "state": "active",
        "channels": sorted(set(records[target].get("channels") or []) | set(rec.get("channels") or [])),
    }
    return {target: restored, current: {**rec, "state": "rolled-back", "rollbackPointer": target, "channels": []}}


def _history(ports: Ports, tenant: str, agent_id: str, channel: str) -> list[dict[str, Any]]:
    return ports.deployments.list_history(tenant, agent_id, channel)


def _write(
    ports: Ports, caller: Caller, agent_id: str, records: dict[str, dict[str, Any]], changed: dict[str, dict[str, Any]]
) -> None:
    """Store a transition: first one history item per channel whose serving version it changes (claimed by
    position, so a concurrent change of the same channel loses with ``409``), then the changed records."""
    after = {**records, **changed}
    at = ports.clock.iso()
    for channel in ASSIGNABLE:
        now = serving(after, channel)
        if now == serving(records, channel):
            continue
        n = len(_history(ports, caller.tenant, agent_id, channel))
        entry = {
            "version": now,
            "evalRunId": after[now].get("evalRunId") if now else None,
            "at": at,
            "keyId": caller.key_id or None,
        }
        if not ports.deployments.put_history(caller.tenant, agent_id, channel, n, entry):
            raise VersionConflictError("The channel changed meanwhile; read it again and retry.")
    for v, doc in changed.items():
        ports.deployments.put_record(caller.tenant, agent_id, v, doc)


def _channel_records(ports: Ports, caller: Caller, agent_id: str, channel: str) -> dict[str, dict[str, Any]]:
    if channel not in ASSIGNABLE:
        raise invalid_parameter("channel", "The channel is not one this host assigns (stable, canary).")
    records = _records(ports, caller.tenant, agent_id)
    if not records:
        raise NotFoundError("No such agent.")
    return records


def channel_history(ports: Ports, caller: Caller, agent_id: str, channel: str) -> dict[str, Any]:
    """``GET /host/openwop-serverless/agents/{agentId}/deployments/{channel}/history``: every change, oldest first."""
    _channel_records(ports, caller, agent_id, channel)
    return {"agentId": agent_id, "channel": channel, "history": _history(ports, caller.tenant, agent_id, channel)}


def rollback_channel(ports: Ports, caller: Caller, agent_id: str, channel: str) -> dict[str, Any]:
    """``POST /host/openwop-serverless/agents/{agentId}/deployments/{channel}:rollback``."""
    records = _channel_records(ports, caller, agent_id, channel)
    current = serving(records, channel)
    earlier = [e.get("version") for e in reversed(_history(ports, caller.tenant, agent_id, channel))]
    target = next(
        (v for v in earlier if v is not None and v != current and v in records and records[v]["state"] == "active"),
        None,
    )
    if current is None or target is None:
        raise NoPreviousDeploymentError()
    _write(ports, caller, agent_id, records, _rolled_back(records, current, target))
    return {"agentId": agent_id, "channel": channel, "version": target, "rolledBackVersion": current}


def resolve_channel(ports: Ports, tenant: str, agent_id: str, channel: str) -> str:
    """The version a channel serves now (``latest``: the highest active version); 400 no_active_deployment else."""
    got = serving(_records(ports, tenant, agent_id), channel)
    if got is None:
        raise NoActiveDeploymentError("The channel resolves to no active version of the agent.")
    return got


def default_version(ports: Ports, tenant: str, agent_id: str) -> str | None:
    """The version a reference with neither a version nor a channel gets: what ``stable`` serves once the agent has
    any deployment (none active there: ``400 no_active_deployment``), the newest registered release while it has
    none; None for an agent with no versions (a built-in or scripted agent)."""
    stored = _stored(ports, tenant, agent_id)
    if not stored:
        return agent_versions.latest(ports, tenant, agent_id)
    got = serving(stored, "stable")
    if got is None:
        raise NoActiveDeploymentError("The agent has deployments and none serves stable: name a version or a channel.")
    return got
