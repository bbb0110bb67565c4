"""The live runtime of a model-backed agent: its turn loop, one resumable step at a time.

One step of an invocation is exactly one of: a model call (``provider.usage``), one tool call of the last model
answer (``agent.tool-called`` / ``agent.tool-returned``), the decision (``agent.decided``), or the end
(``agent.invocation-completed``). What the loop needs to continue is the folded progress of the invocation
(``turns``, ``calls``, the tool outcomes in ``history``) and the run's **model-call log**:

- every model call is logged under the run (``MCALL#<order>#<turn>``) with its answer and its content-addressed
  key (RFC 0041: SHA-256 over the JCS form of provider, model, system prompt, messages, tool surface, temperature
  and max tokens), before its ``provider.usage`` event is appended. A retried step finds the logged answer at
  (invocation, turn) and never calls the model again;
- a ``replay`` fork serves each model call from its source run's log at the same (invocation, turn) when the
  content key matches, and never calls a provider: a request the source never made fails the invocation closed
  (``replay_source_missing``), and the divergence check reports where the child's log departs;
- a ``branch`` fork and a live run call the provider, after claiming the call on the run item (the run must be
  writable at that instant, so a cancelled or erased run never sends one).

Tool calls go through the same ``ToolRuntime`` as every agent (allowlist, budget, fixtures, replay, record).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from shared import keys
from shared.engine import spans
from shared.engine.canonical import canonical_bytes
from shared.engine.registry import AgentSpec
from shared.ports import (
    ModelMessage,
    ModelProviderError,
    ModelReply,
    ModelRequest,
    ModelToolCall,
    ModelToolSpec,
    Ports,
    StagedWrite,
)
from shared.protocol import codes as c
from shared.providers.prices import Rate

T = TypeVar("T")

INLINE_LIMIT = 300_000
MAX_RETRY_SLEEP_S = 10.0


# What a replay serves again of a recorded model call: its answer and its cost, never its request.
REPLAYED_ANSWER = ("model", "text", "toolCalls", "stopReason", "inputTokens", "outputTokens", "costUsd", "durationMs")


class ModelCallFailed(Exception):
    """The invocation cannot continue: ``code`` is the run-document error code, ``message`` safe to show."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def binding(agent: AgentSpec, overrides: dict[str, Any] | None) -> dict[str, Any]:
    """The agent's model binding with the run's ``configurable.ai`` overrides applied (a mock config means mock)."""
    b = dict(agent.model or {})
    ai = overrides or {}
    for k in ("provider", "model", "temperature", "maxTokens", "credentialRef"):
        if k in ai:
            b[k] = ai[k]
    if "mockProvider" in ai:
        b["provider"] = "mock"
        b["mockProvider"] = ai["mockProvider"]
    bound = agent.model or {}
    if (b.get("provider"), b.get("model")) != (bound.get("provider"), bound.get("model")):
        b.pop("price", None)  # a registered price is the bound model's: an overriding model is priced by the table
    return b


def content_key(req: ModelRequest) -> str:
    """The RFC 0041 content-addressed key of a model call (no credential, no endpoint, no mock script)."""
    recipe = {
        "provider": req.provider,
        "model": req.model,
        "system": req.system,
        "messages": [
            {
                "role": m.role,
                "text": m.text,
                "toolCallId": m.tool_call_id,
                "isError": m.is_error,
                "toolCalls": [{"id": t.call_id, "name": t.name, "arguments": t.arguments} for t in m.tool_calls],
            }
            for m in req.messages
        ],
        "tools": [{"name": t.name, "description": t.description, "inputSchema": t.input_schema} for t in req.tools],
        "temperature": req.temperature,
        "maxTokens": req.max_tokens,
    }
    return "sha256:" + hashlib.sha256(canonical_bytes(recipe)).hexdigest()


def _input_text(agent_input: Any) -> str:
    if isinstance(agent_input, str):
        return agent_input
    return json.dumps(agent_input, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _result_text(h: dict[str, Any]) -> tuple[str, bool]:
    if h.get("status") == "ok":
        return json.dumps(h.get("outcome"), sort_keys=True, separators=(",", ":"), ensure_ascii=False), False
    err = h.get("error") or {}
    return json.dumps(
        {"error": {"code": err.get("code"), "message": err.get("message")}}, sort_keys=True, separators=(",", ":")
    ), True


def messages(agent_input: Any, entries: list[dict[str, Any]], history: list[dict[str, Any]]) -> list[ModelMessage]:
    """The conversation so far: the task, then per turn the model's answer and the outcomes of its tool calls."""
    out = [ModelMessage("user", _input_text(agent_input))]
    for e in entries:
        calls = tuple(ModelToolCall(t["id"], t["name"], t["arguments"]) for t in e.get("toolCalls") or [])
        out.append(ModelMessage("assistant", e.get("text"), calls))
        base = int(e.get("callsBefore", 0))
        for j, call in enumerate(calls):
            if base + j >= len(history):
                break
            text, is_error = _result_text(history[base + j])
            out.append(ModelMessage("tool", text, tool_call_id=call.call_id, is_error=is_error))
    return out


@dataclass
class ModelSession:
    """The model side of one task's steps for one run: its log (read once), the source's log in replay."""

    ports: Ports
    run_id: str
    tenant: str
    mode: str  # live | replay | branch
    expires_at: int
    overrides: dict[str, Any] | None = None  # configurable.ai
    source_run_id: str | None = None
    fixed_turns: dict[str, int] = field(default_factory=dict)  # a branch: model calls of the copied prefix
    tally: Any = None  # the task's ToolTally (model calls sent), when its handler counts them
    _log: dict[str, dict[int, dict[str, Any]]] | None = None
    _source: dict[tuple[str, int], dict[str, Any]] | None = None
    _tools: dict[str, Any] = field(default_factory=dict)

    def _read(self, run_id: str) -> list[dict[str, Any]]:
        return read_log(self.ports, run_id)

    def log(self, invocation_id: str) -> dict[int, dict[str, Any]]:
        if self._log is None:
            self._log = {}
            for doc in self._read(self.run_id):
                self._log.setdefault(str(doc["invocationId"]), {})[int(doc["turn"])] = doc
        return self._log.setdefault(invocation_id, {})

    def _source_entry(self, invocation_id: str, turn: int) -> dict[str, Any] | None:
        if self._source is None:
            self._source = {}
            if self.source_run_id is not None:
                for doc in self._read(self.source_run_id):
                    self._source[(str(doc["invocationId"]), int(doc["turn"]))] = doc
        return self._source.get((invocation_id, turn))

    def surface(self, agent: AgentSpec) -> tuple[ModelToolSpec, ...]:
        """The allowlisted tools the model sees, by catalog id, with the catalog's description and input schema
        (the provider adapter maps ids to its wire names and back)."""
        key = f"{agent.agent_id}@{agent.version}"
        if key not in self._tools:
            from shared.engine.catalog import Catalog

            catalog = Catalog(self.ports, self.tenant)
            specs = []
            for tool in agent.tool_allowlist or ():
                resolved = catalog.resolve(tool)
                schema = (resolved.input_schema if resolved is not None else None) or {"type": "object"}
                desc = (resolved.description if resolved is not None else None) or tool
                specs.append(ModelToolSpec(tool, desc[:1024], schema))
            self._tools[key] = tuple(specs)
        out: tuple[ModelToolSpec, ...] = self._tools[key]
        return out

    def _credential(self, ref: str | None) -> str | None:
        if not ref:
            return None
        from shared.engine.dispatch import credential_value

        return credential_value(self.ports, self.tenant, ref)

    def complete(
        self,
        agent: AgentSpec,
        invocation_id: str,
        order: str,
        turn: int,
        agent_input: Any,
        history: list[dict[str, Any]],
    ) -> dict[str, Any]:
        """The log entry of model call ``turn`` of this invocation: logged already, served (replay), or made."""
        log = self.log(invocation_id)
        if turn in log:
            return log[turn]
        b = binding(agent, self.overrides)
        tools = self.surface(agent)
        entries = [log[t] for t in range(turn)]
        req = ModelRequest(
            provider=str(b.get("provider", "")),
            model=str(b.get("model", "")),
            system=agent.system_prompt,
            messages=tuple(messages(agent_input, entries, history)),
            tools=tools,
            temperature=b.get("temperature"),
            max_tokens=b.get("maxTokens"),
            base_url=b.get("baseUrl") or (self.ports.settings.openai_base_url or None),
            mock=b.get("mockProvider"),
            turn=turn,
        )
        return self.serve(
            invocation_id, order, turn, req, b.get("credentialRef"), calls_before=len(history), price=b.get("price")
        )

    def serve(
        self,
        invocation_id: str,
        order: str,
        turn: int,
        req: ModelRequest,
        cred_ref: str | None,
        *,
        calls_before: int = 0,
        price: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Model call ``turn`` of ``invocation_id``: the logged entry, else served from the source's log (replay, or
        a branch's copied prefix), else sent to the provider; logged before it is used."""
        log = self.log(invocation_id)
        if turn in log:
            return log[turn]
        tracing = self.ports.tracing
        attrs = spans.model_request(req, self.run_id, self.tenant, invocation_id, turn, tracing.capture_content)
        with tracing.span(f"chat {req.model}", attrs, kind="client") as span:
            try:
                entry = self._serve(invocation_id, order, turn, req, cred_ref, calls_before, price)
            except ModelCallFailed as exc:
                span.fail(exc.code)
                raise
            spans.model_reply(span, entry, tracing.capture_content)
        return entry

    def _serve(
        self,
        invocation_id: str,
        order: str,
        turn: int,
        req: ModelRequest,
        cred_ref: str | None,
        calls_before: int,
        price: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        log = self.log(invocation_id)
        key = content_key(req)
        entry: dict[str, Any] = {
            "invocationId": invocation_id,
            "turn": turn,
            "key": key,
            "callsBefore": calls_before,
            "provider": req.provider,
        }
        src = (
            self._source_entry(invocation_id, turn)
            if (self.mode == "replay" or turn < self.fixed_turns.get(invocation_id, 0))
            else None
        )
        if self.mode == "replay" or (src is not None and src.get("key") == key):
            if src is None or src.get("key") != key:
                raise ModelCallFailed(
                    c.REPLAY_SOURCE_MISSING, "the source run's model-call log has no answer for this request"
                )
            entry.update({k: src[k] for k in REPLAYED_ANSWER if k in src})
            entry["source"] = "recorded"
        else:
            reply, duration = self._call(req, order, turn, cred_ref)
            entry.update(
                {
                    "model": reply.model or req.model,
                    "text": reply.text,
                    "toolCalls": [
                        {"id": t.call_id, "name": t.name, "arguments": t.arguments} for t in reply.tool_calls
                    ],
                    "stopReason": reply.stop_reason,
                    "inputTokens": reply.input_tokens,
                    "outputTokens": reply.output_tokens,
                    "durationMs": duration,
                    "source": "live",
                }
            )
            cost = (
                reply.cost_usd
                if price is None
                else Rate.registered(price).cost_usd(reply.input_tokens, reply.output_tokens)
            )
            if cost is not None:
                entry["costUsd"] = cost
        self._store(order, turn, entry)
        log[turn] = entry
        return entry

    def _call(self, req: ModelRequest, order: str, turn: int, cred_ref: str | None) -> tuple[ModelReply, int]:
        # The call goes out only if the run is writable at this instant (ConflictError otherwise).
        self.ports.runs.claim_effect(
            self.run_id,
            f"model#{order}#{turn:04d}",
            {"seam": f"model.{req.provider}", "at": self.ports.clock.iso()},
            self.expires_at,
        )
        try:
            credential = self._credential(cred_ref)
        except LookupError as exc:
            raise ModelCallFailed(c.CREDENTIAL_FORBIDDEN, "the model binding's credential is not available") from exc
        request = req if credential is None else _with_credential(req, credential)
        try:
            return send_with_retries(self.ports, lambda: self.ports.models.complete(request), req.provider, self._count)
        except ModelProviderError as exc:
            raise ModelCallFailed(exc.code, f"the model call failed: {exc.reason}") from exc

    def _count(self, provider: str, status: str) -> None:
        if self.tally is not None:
            self.tally.add_model_call(provider, status)

    def _store(self, order: str, turn: int, entry: dict[str, Any]) -> None:
        store_entry(self.ports, self.run_id, order, turn, entry, self.expires_at)


def send_with_retries(
    ports: Ports, send: Callable[[], T], provider: str, count: Callable[[str, str], None] | None = None
) -> tuple[T, int]:
    """``send()`` (one provider call) with the host's retry rule: up to ``model_call_attempts`` tries while the
    provider's error is retryable, backing off by its hint (else 0.5 s doubling, at most ``MAX_RETRY_SLEEP_S``).
    Returns the answer and the duration of the try that answered; the last ``ModelProviderError`` otherwise."""
    attempts = max(1, int(ports.settings.model_call_attempts))
    for attempt in range(attempts):
        started = ports.clock.now_ms()
        try:
            out = send()
        except ModelProviderError as exc:
            if count is not None:
                count(provider, exc.code)
            if exc.retryable and attempt + 1 < attempts:
                ports.clock.sleep(min(exc.retry_after_s or 0.5 * 2**attempt, MAX_RETRY_SLEEP_S))
                continue
            raise
        if count is not None:
            count(provider, "ok")
        return out, max(0, ports.clock.now_ms() - started)
    raise ModelProviderError(c.EXTERNAL_CALL_FAILED, "the model call failed")


def read_log(ports: Ports, run_id: str) -> list[dict[str, Any]]:
    """Every entry of a run's model-call log (an entry kept in S3 read from there; one whose blob is gone is left
    out)."""
    out = []
    for _sk, doc in ports.runs.query_aux(run_id, keys.MODEL_CALL_PREFIX):
        if "blob" in doc:
            got = ports.blobs.get_json(str(doc["blob"]))
            if got is None:
                continue
            doc = dict(got)
        out.append(doc)
    return out


def store_entry(ports: Ports, run_id: str, order: str, turn: int, entry: dict[str, Any], expires_at: int) -> None:
    """Log model call ``turn`` of the invocation that ``order`` names: ``MCALL#<order>#<turn>``, in S3 (a pointer
    left in the item) when its JSON is over ``INLINE_LIMIT``."""
    ports.runs.put_aux(run_id, *_entry_item(ports, run_id, order, turn, entry), expires_at)


def stage_entry(
    ports: Ports, run_id: str, order: str, turn: int, entry: dict[str, Any], expires_at: int
) -> StagedWrite:
    """``store_entry``'s write, for the append that records the call (written once, with its events)."""
    return ports.runs.stage_aux(run_id, *_entry_item(ports, run_id, order, turn, entry), expires_at)


def _entry_item(ports: Ports, run_id: str, order: str, turn: int, entry: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    sk = f"{keys.MODEL_CALL_PREFIX}{order}#{turn:04d}"
    doc = entry
    if len(json.dumps(entry, separators=(",", ":"))) > INLINE_LIMIT:
        blob = f"{keys.run_prefix(run_id)}model-calls/{order}-{turn:04d}.json"
        ports.blobs.put_json(blob, entry)
        doc = {"blob": blob, "invocationId": entry["invocationId"], "turn": turn}
    return sk, doc


def _with_credential(req: ModelRequest, credential: str) -> ModelRequest:
    from dataclasses import replace

    return replace(req, credential=credential)


def usage_payload(entry: dict[str, Any]) -> dict[str, Any]:
    """``provider.usage`` (RFC 0026): token counts as the provider reported them, no content, no credential."""
    p: dict[str, Any] = {
        "provider": entry["provider"],
        "model": entry["model"],
        "inputTokens": int(entry.get("inputTokens", 0)),
        "outputTokens": int(entry.get("outputTokens", 0)),
    }
    p["totalTokens"] = p["inputTokens"] + p["outputTokens"]
    if entry.get("costUsd") is not None:
        p["costEstimateUsd"] = entry["costUsd"]
    return p
