"""The agent gateway (issue 35, item 8; priced as issue 38 asks): one production session of an external agent making
``BENCH_GATEWAY_TOOL_CALLS`` tool calls (default 50) and ``BENCH_GATEWAY_MODEL_CALLS`` model calls (default 10), five
tool calls to a model call, each sent to the ``agent_gateway`` function in process as API Gateway would
(``POST G/mcp`` a JSON-RPC ``tools/call``, ``POST G/v1/chat/completions`` a chat body), on the embedded stack.

The tool is a registered HTTP tool on the loopback ``DemoToolServer``; the model binding is ``openai`` with a tenant
credential, pointed at a loopback chat-completions server (``tests.chat_server``). A session created and driven
once beforehand warms the process (imports, the catalog, the credential), as a warm container would be.

Per call it prints:

- **added latency** (p50 / p99, local): the call's wall time in the handler minus the tool's or the model's own
  time, which is the upstream request as the gateway's transport saw it (``GuardedHttpTransport.send`` for the tool,
  ``complete_chat`` for the model: the loopback round trip included, as it would be for any caller). Target p50
  <= 20 ms (issue 35).
- **AWS requests** by operation, exact (``bench.common.AwsMeter``), and the writes among them.
- **capacity units** two ways: the exact meter's (request and response items at their true sizes) and an
  independent one here from **true item sizes** (DynamoDB's size rules, ``bench.trueunits``): a write
  is billed on the larger of the item before and after it (read through a client the meter does not watch, around
  each request), 1 WRU per KB, 2 in a transaction (a ``ConditionCheck`` on its item's size); a read per 4 KB of
  what it returned (a Query rounded up once), half when eventually consistent, double in a transaction, at least one
  unit.

Against the **physical bound** per call: what the call must make durable, its intent (before the tool or model
runs, so a crash cannot lose it or run it twice) and its outcome, each written once with a plain write: 2 writes,
1 WRU for the intent (an item under 1 KB) plus the outcome's true size per KB (the call's stored record: the
tool-call item, or the model call's log entry); and one eventually consistent read of the session's run item (its
token's nonce), 0.5 RRU: 3 requests. Run: ``.venv/bin/python -m bench.bench_gateway`` (part of ``make bench``).
Prints; asserts nothing (``tests/integration/test_gateway_writes.py`` asserts the writes per call).

Measured against it (decision 0149), writes are **at the bound** for both kinds: a live tool call is two
TransactWriteItems (its ordinal with its effect's intent, before the tool runs; its tool-call record with its
``agent.tool-called`` / ``agent.tool-returned`` page and the log's head, after), a model call an UpdateItem (its
ordinal, before the provider is called) and a TransactWriteItems (its ``MCALL#`` entry with its ``provider.usage``
page and the head). A tool call reads its tool's registration once a minute per session and warm process (decision
0194: the first call of the session measured here). Above the bound, and why: the session's read is one strongly
consistent Query of the run's items (1 RRU against 0.5: it is the read an append's state fold and the ordinal's
expected value come from); and the units of a write are more than its record's, since a transaction bills each
item twice and the outcome also rewrites the run item (its head) and the state item (its fold), and the intent is
the run item plus the ledger's effect row.
"""

from __future__ import annotations

import json
import math
import os
import time
import uuid
from collections import Counter
from typing import Any

from bench.common import API_KEY, AwsMeter, Usage, line, start_stack
from bench.trueunits import WRITES, TrueUnits, item_size

BASE = "/host/openwop-serverless"
TOOL = "bench.crm:lookup"


# --------------------------------------------------------------------------- the upstreams' own time


class Stopwatch:
    """Wall seconds and CPU seconds of the calling thread spent inside a wrapped callable since the last ``take``."""

    def __init__(self) -> None:
        self.seconds = self.cpu = 0.0

    def wrap(self, fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started
                self.cpu += time.thread_time() - cpu

        return timed

    def take(self) -> tuple[float, float]:
        out = (self.seconds, self.cpu)
        self.seconds = self.cpu = 0.0
        return out


# --------------------------------------------------------------------------- the gateway, in process


def _event(gateway_id: str, rest: str, token: str, body: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
    path = f"{BASE}/gateway/{gateway_id}/{rest}"
    return {
        "version": "2.0",
        "routeKey": f"POST {BASE}/gateway/{{gatewayId}}/{{rest+}}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"authorization": f"Bearer {token}", "content-type": "application/json", **(headers or {})},
        "pathParameters": {"gatewayId": gateway_id, "rest": rest},
        "requestContext": {
            "http": {
                "method": "POST",
                "path": path,
                "sourceIp": "127.0.0.1",
                "userAgent": "bench",
                "protocol": "HTTP/1.1",
            },
            "requestId": "bench",
            "stage": "$default",
        },
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }


MCP_HEADERS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}


class Session:
    def __init__(self, created: dict[str, Any]) -> None:
        self.run_id = str(created["runId"])
        self.token = str(created["token"])
        self.gateway_id = str(created["mcpUrl"]).split("/gateway/", 1)[1].split("/", 1)[0]
        self.rpc = 0

    def tool(self, args: dict[str, Any]) -> dict[str, Any]:
        from bench.common import call

        self.rpc += 1
        message = {
            "jsonrpc": "2.0",
            "id": self.rpc,
            "method": "tools/call",
            "params": {"name": TOOL, "arguments": args},
        }
        out = call("agent_gateway", _event(self.gateway_id, "mcp", self.token, message, MCP_HEADERS))
        assert out["statusCode"] == 200, out
        result = json.loads(out["body"])["result"]
        assert result.get("isError") is not True, result
        return dict(result)

    def model(self, turn: int) -> dict[str, Any]:
        from bench.common import call

        body = {"model": "agent-model", "messages": [{"role": "user", "content": f"step {turn}"}]}
        out = call("agent_gateway", _event(self.gateway_id, "v1/chat/completions", self.token, body))
        assert out["statusCode"] == 200, out
        return dict(json.loads(out["body"]))

    def complete(self) -> None:
        from bench.common import call

        out = call("agent_gateway", _event(self.gateway_id, "complete", self.token, {"output": {"ok": True}}))
        assert out["statusCode"] == 200, out


def _setup(base_url: str, tool_url: str, chat_url: str) -> str:
    """Register the HTTP tool, a tenant credential and an external agent bound to the loopback model; its id."""
    from tests.wire import raw

    r = raw(
        base_url,
        "POST",
        f"{BASE}/tools",
        {
            "toolId": TOOL,
            "description": "lookup",
            "source": {"kind": "http", "url": tool_url + "/crm/lookup"},
            "inputSchema": {"type": "object", "required": ["customerId"]},
        },
        key=API_KEY,
    )
    assert r.status in (200, 201), r.text
    r = raw(
        base_url,
        "PUT",
        f"{BASE}/credentials/bench-llm",
        {"credential": {"type": "bearer", "token": "sk-bench"}},
        key=API_KEY,
    )
    assert r.status in (200, 201), r.text
    agent_id = f"bench{uuid.uuid4().hex[:6]}.ext"
    body = {
        "version": "1.0.0",
        "runtime": {"kind": "external"},
        "model": {"provider": "openai", "model": "gpt-bound", "baseUrl": chat_url, "credentialRef": "bench-llm"},
        "manifest": {
            "agentId": agent_id,
            "persona": "External",
            "modelClass": "general",
            "systemPrompt": "unused by an external agent",
            "toolAllowlist": [TOOL],
        },
    }
    r = raw(base_url, "POST", f"{BASE}/agents", body, key=API_KEY)
    assert r.status == 201, r.text
    return agent_id


def _session(base_url: str, agent_id: str) -> Session:
    from tests.wire import raw

    r = raw(base_url, "POST", f"{BASE}/agents/{agent_id}/sessions", {"input": {"q": "bench"}}, key=API_KEY)
    assert r.status == 201, r.text
    return Session(r.json)


# --------------------------------------------------------------------------- figures


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _writes(used: Usage) -> int:
    return sum(n for op, n in used.calls.items() if op in WRITES)


LAYOUT = {  # what each of a call's writes is (decision 0149)
    "tool": "intent = ordinal + effect claim, outcome = record + events + head",
    "model": "intent = ordinal, outcome = MCALL entry + provider.usage + head",
}


def _row(
    kind: str, n: int, added: dict[str, list[float]], own: list[float], used: Usage, true: Counter[str], outcome: int
) -> None:
    """One kind of call's figures per call, against the physical bound (``outcome``: the mean true size in bytes of
    the record each call must store)."""
    wru_bound = 1 + math.ceil(outcome / 1024)
    requests, writes = used.total() / n, _writes(used) / n
    wru, rru = true["wru"] / n, true["rru"] / n
    wall, cpu = added[kind], added[f"{kind} cpu"]
    line(
        f"{kind} call: added latency p50 / p99 (local, {n} calls)",
        f"{_pct(wall, 0.5):.1f} / {_pct(wall, 0.99):.1f} ms",
        f"(less the upstream's own time, p50 {_pct(own, 0.5):.1f} ms; in it the embedded AWS answering in process, "
        f"p50 {_pct(added['aws'], 0.5):.1f} ms, where deployed each request is a round trip; target p50 <= 20 ms; "
        f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)",
    )
    line(
        f"{kind} call: the gateway's own CPU p50 / p99",
        f"{_pct(cpu, 0.5):.1f} / {_pct(cpu, 0.99):.1f} ms",
        "(its threads' CPU less the upstream call's and the embedded AWS's, which answers on the calling thread; "
        "steadier than wall under load)",
    )
    line(
        f"{kind} call: AWS requests per call",
        f"{requests:.2f}",
        f"bound 3 (ratio {requests / 3:.2f}); writes {writes:.2f} against the bound 2 ({writes / 2:.2f}x: "
        f"{LAYOUT[kind]}); "
        f"{dict(Counter({k: v / n for k, v in used.calls.items()}).most_common())}",
    )
    line(
        f"{kind} call: WRU / RRU per call (true item sizes)",
        f"{wru:.2f} / {rru:.2f}",
        f"bound {wru_bound} / 0.5 (ratio {wru / wru_bound:.2f}x / {rru / 0.5:.2f}x; outcome record "
        f"{outcome} B); the exact meter (request and response items): {used.units['wru'] / n:.2f} / "
        f"{used.units['rru'] / n:.2f}; "
        f"{ {k: round(v / n, 2) for k, v in used.units_by_operation().items()} }",
    )


def _outcome_sizes(aws: Any, run_id: str) -> tuple[int, int]:
    """The mean true size of a stored tool-call record and of a model-call log entry of the session."""
    from shared.settings import get_settings

    settings, ddb = get_settings(), aws.client("dynamodb")

    def items(table: str, key: str, prefix: str | None) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "TableName": table,
            "KeyConditionExpression": f"{key} = :r" + (" AND begins_with(sk, :p)" if prefix else ""),
            "ExpressionAttributeValues": {":r": {"S": run_id}, **({":p": {"S": prefix}} if prefix else {})},
        }
        out: list[dict[str, Any]] = []
        while True:
            page = ddb.query(**kwargs)
            out += page["Items"]
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    calls = items(settings.tool_calls_table, "runId", None)
    entries = items(settings.runs_table, "pk", "MCALL#")
    mean = lambda xs: round(sum(item_size(i) for i in xs) / max(1, len(xs)))  # noqa: E731
    return mean(calls), mean(entries)


def _drive(s: Session, meter: AwsMeter, watches: dict[str, Stopwatch], tool_calls: int, model_calls: int) -> Any:
    """The session's calls, five tool calls (by default) to a model call, each under its kind's origin: per kind the
    added and the upstream's own milliseconds per call. The gateway's CPU is its threads' (the handler's, and the
    worker the MCP server runs a call in: ``watches["worker"]``), less the upstream call's and the embedded AWS's,
    which answers a request of this process on the calling thread (``shared.local.direct``: ``watches["aws"]``,
    where AWS would take a network round trip); the loopback servers are not in it."""
    added: dict[str, list[float]] = {"tool": [], "model": [], "tool cpu": [], "model cpu": [], "aws": []}
    own: dict[str, list[float]] = {"tool": [], "model": []}
    per_model = max(1, tool_calls // max(1, model_calls))
    t = m = 0
    while t < tool_calls or m < model_calls:
        kind = "tool" if t < tool_calls and (t < per_model * (m + 1) or m >= model_calls) else "model"
        watches[kind].take()
        watches["worker"].take()
        watches["aws"].take()
        began, cpu = time.perf_counter(), time.thread_time()
        with meter.origin(kind):
            if kind == "tool":
                s.tool({"customerId": "c-1" if t % 2 == 0 else "c-2"})
                t += 1
            else:
                s.model(m)
                m += 1
        wall, used = time.perf_counter() - began, time.thread_time() - cpu + watches["worker"].take()[1]
        upstream, upstream_cpu = watches[kind].take()
        in_aws, aws_cpu = watches["aws"].take()
        added[kind].append((wall - upstream) * 1000)
        added[f"{kind} cpu"].append((used - upstream_cpu - aws_cpu) * 1000)
        added["aws"].append(in_aws * 1000)
        own[kind].append(upstream * 1000)
    with meter.origin("complete"):
        s.complete()
    return added, own


class _Worker:
    """``shared.services.gateway.tools`` as the MCP server's handlers see it, its ``call_tool`` timed on the worker
    thread it runs on."""

    def __init__(self, watch: Stopwatch) -> None:
        from shared.services.gateway import tools

        self.list_tools, self.call_tool = tools.list_tools, watch.wrap(tools.call_tool)


def main() -> None:
    from botocore.httpsession import URLLib3Session

    from functions.agent_gateway import mcp
    from shared.local.demo_tools import DemoToolServer
    from shared.local.front import LocalFront
    from shared.wiring import get_ports
    from tests.chat_server import ScriptedChatServer, completion

    tool_calls = int(os.environ.get("BENCH_GATEWAY_TOOL_CALLS", "50"))
    model_calls = int(os.environ.get("BENCH_GATEWAY_MODEL_CALLS", "10"))
    aws, meter = start_stack()
    ports = get_ports()
    true = TrueUnits(aws.client("dynamodb"), meter)
    true.watch(ports.runs._c)  # type: ignore[attr-defined]
    tools, chat, front = DemoToolServer(), ScriptedChatServer(), LocalFront()
    chat.answers = [(200, completion(f"answer {i}", usage=(40, 8)), {}) for i in range(3 * model_calls + 10)]
    watches = {"tool": Stopwatch(), "model": Stopwatch(), "worker": Stopwatch(), "aws": Stopwatch()}
    mcp.gateway_tools = _Worker(watches["worker"])  # type: ignore[assignment]
    URLLib3Session.send = watches["aws"].wrap(URLLib3Session.send)  # type: ignore[method-assign]
    ports.http.send = watches["tool"].wrap(ports.http.send)  # type: ignore[method-assign]
    ports.models.complete_chat = watches["model"].wrap(ports.models.complete_chat)  # type: ignore[method-assign]
    try:
        agent_id = _setup(front.start("127.0.0.1", 0), tools.start(), chat.start())
        _drive(_session(front.base_url, agent_id), meter, watches, 5, 2)  # warm the process, as a warm container
        # timed: nothing but the exact meter's bookkeeping around the requests
        timed = _session(front.base_url, agent_id)
        started = time.perf_counter()
        added, own = _drive(timed, meter, watches, tool_calls, model_calls)
        session_s = time.perf_counter() - started
        # metered: the same calls again in a new session, with the true-size reads around each write
        metered = _session(front.base_url, agent_id)
        meter.reset()
        true.enabled = True
        _drive(metered, meter, watches, tool_calls, model_calls)
        true.enabled = False
        tool_size, model_size = _outcome_sizes(aws, metered.run_id)
        print(
            f"Agent gateway: one session of {tool_calls} tool calls and {model_calls} model calls through the "
            f"agent_gateway function in process (local moto; {session_s:.1f} s timed)"
        )
        _row("tool", tool_calls, added, own["tool"], meter.usage("tool"), true.of("tool"), tool_size)
        _row("model", model_calls, added, own["model"], meter.usage("model"), true.of("model"), model_size)
        done = meter.usage("complete")
        line("complete: AWS requests", done.total(), f"WRU {true.of('complete')['wru']} ({done.top()})")
        line(
            "tool server hits / model server requests",
            f"{len(tools.hits)} / {len(chat.requests)}",
            "(warm-up included)",
        )
    finally:
        meter.close()
        front.stop()
        tools.stop()
        chat.stop()
        aws.stop()


if __name__ == "__main__":
    main()
