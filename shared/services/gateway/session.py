"""Gateway sessions (decision 0143): the token that opens a run's gateway, the run a token resolves to, and the
writes a gateway call makes on that run: an ordinal claimed, then the call's records and events appended in one
transaction (decision 0149: two writes a call, the ordinal riding the first).

A token is derived, never stored: ``owg_`` + base64url(HMAC-SHA-256(K, gatewayId ‖ nonce)), K = HMAC(pepper,
"openwop-serverless gateway") under the API-key pepper (the current one mints, current and previous verify, so a
rotation keeps live tokens), the random nonce on the run item (``data.session.nonce``). A copy of the tables cannot
forge one. ``authenticate`` answers the same ``401 unauthenticated`` bytes for an unknown gateway id, another
tenant's run and a wrong or missing token; a matching token on an ended run is ``409 run_terminal``, past
``expiresAt`` it is ``410 run_expired`` (the run failed ``session_expired`` then and there if it still runs).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from typing import Any

from shared.caches import LockedLRUCache
from shared.errors import (
    ConflictError,
    OrdinalTakenError,
    RunExpiredError,
    RunGoneError,
    RunTerminalError,
    ServiceUnavailableError,
    UnauthenticatedError,
)
from shared.ports import Ports, RunRecord, StagedWrite
from shared.protocol import codes as c
from shared.services.gateway import EVAL, PRODUCTION, REPLAY, GatewaySession

TOKEN_PREFIX = "owg_"
SESSION_KIND = "session"
SESSION_INVOCATION = "s:0"
TOOL_CALLS, MODEL_CALLS = "toolCalls", "modelCalls"
COUNTERS = (TOOL_CALLS, MODEL_CALLS)
_KEY_LABEL = b"openwop-serverless gateway"
_MAX_TOKEN = 128
ATTEMPTS = 10  # tries of a write that lost a race (the log's head, an ordinal) before 503
_DUMMY_NONCE = "-" * 32  # an unknown gateway id is checked against this, so its refusal costs what a wrong token's does


class GatewayUnauthenticatedError(UnauthenticatedError):
    default_message = "A valid gateway token for this gateway is required."


def derive_token(pepper: str, gateway_id: str, nonce: str) -> str:
    key = hmac.new(pepper.encode("utf-8"), _KEY_LABEL, hashlib.sha256).digest()
    mac = hmac.new(key, gateway_id.encode("utf-8") + b"\x00" + nonce.encode("utf-8"), hashlib.sha256).digest()
    return TOKEN_PREFIX + base64.urlsafe_b64encode(mac).decode("ascii").rstrip("=")


def token_for(ports: Ports, gateway_id: str, nonce: str) -> str:
    """The token of ``gateway_id`` (minted under the current pepper)."""
    from shared.services.auth import peppers

    return derive_token(peppers(ports).current, gateway_id, nonce)


def _token_matches(ports: Ports, gateway_id: str, nonce: str, presented: str) -> bool:
    from shared.services.auth import peppers

    ok = False
    for pepper in peppers(ports).all():  # constant time per pepper, and every pepper tried
        ok |= hmac.compare_digest(derive_token(pepper, gateway_id, nonce).encode(), presented.encode())
    return ok


def _bearer(authorization: str | None) -> str | None:
    if not authorization or not authorization.startswith("Bearer "):
        return None
    token = authorization[len("Bearer ") :].strip()
    if not token.startswith(TOKEN_PREFIX) or len(token) > _MAX_TOKEN or not token.isascii():
        return None
    return token


def session_facts(rec: RunRecord) -> dict[str, Any] | None:
    """The session facts of a run that has a gateway (``data.session``), else None."""
    facts = rec.data.get("session")
    return facts if isinstance(facts, dict) and isinstance(facts.get("nonce"), str) else None


def _run_of(ports: Ports, gateway_id: str) -> RunRecord | None:
    from shared.protocol.ids import BadIdError, decode_run_id

    try:
        run_id = decode_run_id(gateway_id)
    except BadIdError:
        return None
    return ports.runs.get_run(run_id)


def authenticate(ports: Ports, gateway_id: str, authorization: str | None) -> GatewaySession:
    """The session ``authorization`` opens at ``gateway_id`` (the projected run id, as in the URL; an eval
    trial's ``<evalRunId>.t<taskIndex>.<trial>``)."""
    from shared.engine.externaltrial import parse_gateway_id

    token = _bearer(authorization)
    trial = parse_gateway_id(gateway_id)
    if trial is not None:
        return _trial_session(ports, trial, token)
    rec = _run_of(ports, gateway_id) if token is not None else None
    facts = session_facts(rec) if rec is not None else None
    # the id the token was minted for is the run id itself, however the URL spelled it
    bound = rec.run_id if rec is not None else gateway_id
    matched = _token_matches(ports, bound, facts["nonce"] if facts else _DUMMY_NONCE, token or "")
    if rec is None or facts is None or not matched:
        raise GatewayUnauthenticatedError()
    if rec.terminal:
        raise RunTerminalError("The session has ended.")
    expires_ms = int(facts["expiresAtMs"])
    if ports.clock.now_ms() >= expires_ms:
        expire(ports, rec.run_id)
        raise RunExpiredError("The session expired.")
    return _session(ports, rec, facts)


def _trial_session(ports: Ports, trial: tuple[str, int, int], token: str | None) -> GatewaySession:
    """An eval trial's gateway: open while its ``TWAIT#`` item waits and the eval run runs; the same refusals,
    with the same bytes, as a session's."""
    from shared.engine import externaltrial as xt
    from shared.engine.evalplan import load_plan
    from shared.engine.evaltrial import invocation_id, order_key

    wire_run, task_index, k = trial
    rec = _run_of(ports, wire_run) if token is not None else None
    doc = xt.trial_state(ports, rec.run_id, task_index, k) if rec is not None and rec.kind == "eval" else None
    bound = xt.gateway_id(rec.run_id, task_index, k) if rec is not None else wire_run
    matched = _token_matches(ports, bound, str(doc["nonce"]) if doc else _DUMMY_NONCE, token or "")
    if rec is None or doc is None or not matched:
        raise GatewayUnauthenticatedError()
    if rec.terminal or doc.get("status") != xt.WAITING:
        raise RunTerminalError("The trial has ended.")
    if ports.clock.now_ms() >= int(doc["expiresAtMs"]):
        raise RunExpiredError("The trial expired.")
    plan = load_plan(ports, rec.run_id)
    from shared.engine.registry import agent_from_version

    version = _version_doc(ports, rec.tenant, str(plan["agentId"]), str(plan["agentVersion"]))
    return GatewaySession(
        gateway_id=bound,
        tenant=rec.tenant,
        run_id=rec.run_id,
        mode=EVAL,
        agent=agent_from_version(version),
        invocation_id=invocation_id(str(doc["taskId"]), k),
        order_key=order_key(task_index, k),
        expires_at_ms=int(doc["expiresAtMs"]),
        task_index=task_index,
        trial=k,
        run=rec,
    )


# agent versions are immutable: a warm container reads each one once
_versions: LockedLRUCache[tuple[str, str, str], dict[str, Any]] = LockedLRUCache(maxsize=64)


def _version_doc(ports: Ports, tenant: str, agent_id: str, version: str) -> dict[str, Any]:
    key = (tenant, agent_id, version)
    doc = _versions.get(key)
    if doc is None:
        doc = ports.agents.get_version(tenant, agent_id, version)
        if doc is None:  # an agent version is never deleted while a run pins it
            raise ServiceUnavailableError()
        _versions[key] = doc
    return doc


def _session(ports: Ports, rec: RunRecord, facts: dict[str, Any]) -> GatewaySession:
    from shared.engine.registry import agent_from_version

    doc = _version_doc(ports, rec.tenant, str(facts["agentId"]), str(facts["agentVersion"]))
    fork = rec.data.get("fork") or {}
    replay = fork.get("mode") == "replay"
    return GatewaySession(
        gateway_id=rec.run_id,
        tenant=rec.tenant,
        run_id=rec.run_id,
        mode=REPLAY if replay else PRODUCTION,
        agent=agent_from_version(doc),
        invocation_id=str(facts.get("invocationId") or SESSION_INVOCATION),
        order_key=str(facts["orderKey"]),
        expires_at_ms=int(facts["expiresAtMs"]),
        source_run_id=str(fork.get("sourceRunId")) if replay and fork.get("sourceRunId") else None,
        run=rec,
    )


def expire(ports: Ports, run_id: str) -> bool:
    """Fail a still-running session ``session_expired``; False when it has already ended (a no-op)."""
    from shared.engine.runcore import fail_obj

    failure = fail_obj(c.SESSION_EXPIRED, "the session was not completed before its expiresAt")
    try:
        append(ports, run_id, [(c.RUN_FAILED, {"error": failure})], status="failed", updates={"error": failure})
    except (RunTerminalError, RunGoneError):
        return False
    return True


def claim(ports: Ports, session: GatewaySession, counter: str) -> int:
    """The next 0-based ordinal of ``counter`` (``toolCalls`` | ``modelCalls``) on the session's run, claimed
    atomically while the run still runs (``409 run_terminal`` once it does not)."""
    if counter not in COUNTERS:
        raise ValueError(f"unknown gateway counter {counter!r}")
    if session.mode == EVAL and session.task_index is not None and session.trial is not None:
        from shared.engine.externaltrial import counter_sk

        return ports.runs.claim_aux_counter(session.run_id, counter_sk(session.task_index, session.trial), counter)
    try:
        return ports.runs.claim_counter(session.run_id, counter, require_status=("running",))
    except ConflictError as exc:
        raise RunTerminalError("The session has ended.") from exc


def record_events(ports: Ports, session: GatewaySession, events: list[tuple[str, dict[str, Any]]]) -> None:
    """Append ``(type, payload)`` events to the session's run log (the engine's append: SSE, the viewer and the
    events routes see them); ``409 run_terminal`` once the run has ended. An eval trial's calls are not appended
    one by one: its events are made from the records when the trial is scored, in suite order, as a host agent's."""
    if session.mode == EVAL:
        return
    append(ports, session.run_id, events)


def append(
    ports: Ports,
    run_id: str,
    events: list[tuple[str, dict[str, Any]]],
    *,
    status: str | None = None,
    updates: dict[str, Any] | None = None,
    rec: RunRecord | None = None,
    staged: Sequence[StagedWrite] = (),
    claim: tuple[str, int] | None = None,
) -> list[dict[str, Any]]:
    """Append to a running run, re-reading on a lost race; ``status`` moves it (a terminal one stamps
    ``completedAt``). ``RunTerminalError`` when the run no longer runs, ``RunGoneError`` when it is gone.

    One write when nothing races it (decision 0149): ``rec`` is the run as the caller last read it (authentication's
    read: the first try needs no read of its own; a stale one loses the head's condition and is read again), and
    ``staged`` (a call's record) and ``claim`` (its ordinal, counter and expected value) are written in the same
    transaction. ``OrdinalTakenError`` when the claimed ordinal was taken meanwhile: the caller decides again."""
    from shared.engine import kernel
    from shared.engine import state as st

    for _ in range(ATTEMPTS):
        if rec is None:
            rec = ports.runs.get_run(run_id)
        if rec is None:
            raise RunGoneError(run_id)
        if rec.status != "running":
            raise RunTerminalError("The session has ended.")
        if claim is not None and rec.counters.get(claim[0], 0) != claim[1]:
            raise OrdinalTakenError(rec.counters.get(claim[0], 0))
        seq = rec.last_seq + 1
        evs = [kernel.make_event(ports, run_id, seq + i, t, p, None) for i, (t, p) in enumerate(events)]
        state = kernel.load_state(ports, rec)
        for ev in evs:
            st.apply(state, ev, None)
        run_updates = kernel.state_updates(ports, rec, state, seq + len(evs) - 1)
        run_updates.update(updates or {})
        if status is not None:
            run_updates["status"] = status
            if status in c.TERMINAL_STATUSES and evs:
                run_updates["completedAt"] = evs[-1]["timestamp"]
        try:
            ports.events.append_events(
                run_id,
                seq,
                evs,
                run_updates=run_updates,
                require_status=("running",),
                expires_at=rec.expires_at,
                staged=staged,
                claim=claim,
            )
        except ConflictError:
            rec = None  # another call appended (or claimed) first, or the run ended: read again
            continue
        return evs
    raise ServiceUnavailableError()  # the log stayed contended through every attempt
