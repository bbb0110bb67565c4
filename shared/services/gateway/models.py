"""The model gateway (decision 0143): ``POST G/v1/chat/completions``, OpenAI's chat completions for an external
agent, recorded like a host agent's model calls and served from that record in a replay.

Every call claims the next ordinal of the run's ``modelCalls`` (the run must still run), then:

- **production and eval trials** forward to the version's model binding with the tenant's credential (the agent
  holds only its gateway token): ``openai`` gets the body as sent with the binding's ``model`` and ``stream:
  false``; ``bedrock`` and ``mock`` get it translated to a ``ModelRequest`` (``chat.to_model_request``) and their
  answer rendered back as a ``chat.completion``;
- **a replay fork** calls no provider: call ``n`` is answered with the source run's call ``n``. A request that
  differs from the recorded one (by ``key``) still gets the recorded answer; the first differing pointer goes on
  the ``OpenWOP-Replay-Diverged`` header and the entry (``divergedAt``), and the fork's first divergence appends
  ``replay.diverged``. A call past the source's last is ``404 replay_source_missing``.

Each call is logged in the run's model-call log (``MCALL#<order>#<turn>``, ``model_agent.stage_entry``) with the
compared request, the answer, its ``key`` and usage, in the transaction that appends its ``provider.usage`` (the
payload a host agent's call gets): two writes a call, the ordinal and the outcome (decision 0149). A call the provider failed is logged with its error and answered with it again in a replay,
so an agent that retried lines up with its record. ``stream: true`` is answered as buffered server-sent events.
"""

from __future__ import annotations

import math
from typing import Any

from shared.engine import spans
from shared.engine.jsondiff import differing_pointers
from shared.engine.model_agent import (
    REPLAYED_ANSWER,
    read_log,
    send_with_retries,
    stage_entry,
    store_entry,
    usage_payload,
)
from shared.errors import (
    MethodNotAllowedError,
    ProtocolError,
    RateLimitedError,
    ReplaySourceMissingError,
    RunTerminalError,
    ServiceUnavailableError,
    UpstreamUnavailableError,
    ValidationError,
)
from shared.ports import ModelProviderError, Ports
from shared.protocol import codes as c
from shared.services.gateway import REPLAY, GatewayRequest, GatewayResponse, GatewaySession, chat
from shared.services.gateway.session import MODEL_CALLS, claim
from shared.services.gateway.wire import VERSION_HEADER, json_object

DIVERGED_HEADER = "OpenWOP-Replay-Diverged"
DIVERGED_CLAIM = "gateway.replay.diverged"  # the fork's once-only marker for its first divergence
TIMEOUT_S = 60.0  # per try; MODEL_CALL_ATTEMPTS tries stay inside the function's 300 s
_RECORDED = ("provider", *REPLAYED_ANSWER, "response", "error")  # the gateway's entries keep the wire answer too


def handle_chat(ports: Ports, session: GatewaySession, request: GatewayRequest) -> GatewayResponse:
    if request.method != "POST":
        raise MethodNotAllowedError()
    body = chat.check_body(json_object(request))
    binding = dict(session.agent.model or {})
    provider = str(binding.get("provider", ""))
    if session.mode != REPLAY and provider != "openai":
        chat.to_model_request(body, binding, turn=0)  # refuse what the provider cannot carry before any write
    turn = claim(ports, session, MODEL_CALLS)
    rec = session.run if session.run is not None else ports.runs.get_run(session.run_id)  # its TTL, as authenticated
    ttl = rec.expires_at if rec is not None else 0
    tracing = ports.tracing
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": str(binding.get("model", "")),
        spans.RUN_ID: session.run_id,
        spans.TENANT: session.tenant,
        "openwop.agent.invocation_id": session.invocation_id,
        "openwop.model_call.turn": turn,
    }
    with tracing.span(f"chat {binding.get('model', '')}", attrs, kind="client") as span:
        try:
            if session.mode == REPLAY:
                entry = _replayed(ports, session, turn, body, ttl)
            else:
                entry = _live(ports, session, binding, turn, body, ttl)
        except ProtocolError as exc:
            span.fail(exc.code)
            raise
        spans.model_reply(span, entry, False)
        if "divergedAt" in entry:
            span.set(spans.DIVERGED, True)
    headers = {"Cache-Control": "no-store", **VERSION_HEADER}
    if "divergedAt" in entry:
        headers[DIVERGED_HEADER] = str(entry["divergedAt"])
    answer: dict[str, Any] = entry["response"]
    if chat.streamed(body):
        headers["Content-Type"] = "text/event-stream"
        return GatewayResponse(200, chat.sse(answer, usage=chat.include_usage(body)), headers)
    headers["Content-Type"] = "application/json"
    return GatewayResponse(200, chat.dumps(answer).encode(), headers)


def _entry(session: GatewaySession, turn: int, body: dict[str, Any], provider: str, source: str) -> dict[str, Any]:
    return {
        "invocationId": session.invocation_id,
        "turn": turn,
        "key": chat.request_key(body),
        "provider": provider,
        "request": chat.compared(body),
        "source": source,
        "gateway": "chat.completions",
    }


def _live(
    ports: Ports, session: GatewaySession, binding: dict[str, Any], turn: int, body: dict[str, Any], ttl: int
) -> dict[str, Any]:
    provider = str(binding.get("provider", ""))
    entry = _entry(session, turn, body, provider, "live")
    completion_id = f"chatcmpl-{session.run_id}-{turn}"
    try:
        credential = _credential(ports, session.tenant, binding.get("credentialRef"))
        if provider == "openai":
            upstream = {k: v for k, v in body.items() if k != "stream_options"}
            upstream.update({"model": str(binding.get("model", "")), "stream": False})
            base_url = binding.get("baseUrl") or (ports.settings.openai_base_url or None)
            got, duration = send_with_retries(
                ports,
                lambda: ports.models.complete_chat(
                    upstream, base_url=base_url, credential=credential, timeout_s=TIMEOUT_S
                ),
                provider,
            )
            answer = {**got.body, "id": completion_id}
            model, tokens_in, tokens_out, cost = got.model, got.input_tokens, got.output_tokens, got.cost_usd
        else:
            req = chat.to_model_request(body, binding, turn=turn, credential=credential)
            reply, duration = send_with_retries(ports, lambda: ports.models.complete(req), provider)
            answer = chat.completion(reply, completion_id, ports.clock.now_ms() // 1000)
            model, tokens_in, tokens_out, cost = reply.model, reply.input_tokens, reply.output_tokens, reply.cost_usd
    except ModelProviderError as exc:
        entry["error"] = {"code": exc.code, "message": exc.reason, "retryAfterS": exc.retry_after_s}
        store_entry(ports, session.run_id, session.order_key, turn, entry, ttl)
        raise _refusal(entry["error"]) from None
    entry.update(chat.summary(answer))
    entry.update({"model": model, "inputTokens": tokens_in, "outputTokens": tokens_out, "durationMs": duration})
    if cost is not None:
        entry["costUsd"] = cost
    entry["response"] = answer
    _record(ports, session, [(c.PROVIDER_USAGE, usage_payload(entry))], entry=(turn, entry, ttl))
    return entry


def _credential(ports: Ports, tenant: str, ref: Any) -> str | None:
    if not ref:
        return None
    from shared.engine.dispatch import credential_value

    try:
        return credential_value(ports, tenant, str(ref))
    except LookupError:
        raise ModelProviderError(c.CREDENTIAL_FORBIDDEN, "the model binding's credential is not available") from None


def _refusal(error: dict[str, Any]) -> ProtocolError:
    """A provider's failure as the envelope: its code where the registry has one, else ``upstream_unavailable``."""
    code, message = str(error.get("code")), f"The model call failed: {error.get('message')}"
    if code == c.RATE_LIMITED:
        return RateLimitedError(message, retry_after_s=math.ceil(float(error.get("retryAfterS") or 1)))
    if code == c.SERVICE_UNAVAILABLE:
        return ServiceUnavailableError(message)
    if code == c.VALIDATION_ERROR:
        return ValidationError(message)
    if code in (c.CREDENTIAL_FORBIDDEN, c.MOCK_PROVIDER_FORBIDDEN):
        err = UpstreamUnavailableError(message)
        err.code = code
        return err
    return UpstreamUnavailableError(message)


# --------------------------------------------------------------------------- replay


def _source_calls(ports: Ports, session: GatewaySession) -> dict[int, dict[str, Any]]:
    return {
        int(doc["turn"]): doc
        for doc in read_log(ports, str(session.source_run_id))
        if str(doc.get("invocationId")) == session.invocation_id
    }


def _replayed(ports: Ports, session: GatewaySession, turn: int, body: dict[str, Any], ttl: int) -> dict[str, Any]:
    source = _source_calls(ports, session) if session.source_run_id else {}
    recorded = source.get(turn)
    if recorded is None or not ("response" in recorded or "error" in recorded):  # none, or not a gateway call
        raise ReplaySourceMissingError(
            "The source run made no model call at this point of the conversation.", {"pointer": "/messages"}
        )
    entry = _entry(session, turn, body, str(recorded.get("provider", "")), "recorded")
    entry.update({k: recorded[k] for k in _RECORDED if k in recorded})
    if recorded.get("key") != entry["key"]:
        pointers = differing_pointers(recorded.get("request"), entry["request"])
        entry["divergedAt"] = pointers[0] if pointers else ""
    if "error" in recorded:
        store_entry(ports, session.run_id, session.order_key, turn, entry, ttl)
        raise _refusal(dict(recorded["error"]))
    evs = _record(ports, session, [(c.PROVIDER_USAGE, usage_payload(entry))], entry=(turn, entry, ttl))
    if "divergedAt" in entry and ports.runs.claim_effect(
        session.run_id, DIVERGED_CLAIM, {"seam": "gateway.model", "at": ports.clock.iso()}, ttl
    ):
        payload: dict[str, Any] = {
            "sourceRunId": session.source_run_id,
            "atSequence": int(evs[-1]["sequence"]) if evs else 0,
            "divergenceKind": "output",
            "divergencePoint": c.PROVIDER_USAGE,
        }
        original = _source_usage_event(ports, session, source, turn)
        if original is not None:
            payload["originalEventId"] = original
        _record(ports, session, [(c.REPLAY_DIVERGED, payload)])
    return entry


def _source_usage_event(
    ports: Ports, session: GatewaySession, source: dict[int, dict[str, Any]], turn: int
) -> str | None:
    """The id of the source's ``provider.usage`` for its call ``turn``: calls that failed appended none."""
    index = sum(1 for t, doc in source.items() if t < turn and "error" not in doc)
    usages = [e for e in ports.events.read_events(str(session.source_run_id)) if e.get("type") == c.PROVIDER_USAGE]
    return str(usages[index]["eventId"]) if index < len(usages) else None


def _record(
    ports: Ports,
    session: GatewaySession,
    events: list[tuple[str, dict[str, Any]]],
    *,
    entry: tuple[int, dict[str, Any], int] | None = None,
) -> list[dict[str, Any]]:
    """``events`` appended to the session's log, with the call's ``entry`` (turn, entry, TTL) in its model-call log
    in the same write (decision 0149); the appended events (the divergence names its ``provider.usage``'s
    sequence). The entry is kept if the session ended meanwhile: the call was made."""
    from shared.services.gateway.session import append

    if entry is None:
        return append(ports, session.run_id, events)
    turn, doc, ttl = entry
    staged = [stage_entry(ports, session.run_id, session.order_key, turn, doc, ttl)]
    try:
        return append(ports, session.run_id, events, rec=session.run, staged=staged)
    except RunTerminalError:
        store_entry(ports, session.run_id, session.order_key, turn, doc, ttl)
        raise
