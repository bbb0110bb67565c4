"""Model-backed agents: AWS requests per model turn (the model-call log, the claim, the events), the host's time per
turn on the mock provider, and a replay's cost (zero model calls: every answer served from the log).

Run: ``make bench`` (or ``.venv/bin/python -m bench.bench_agents``). Prints figures; asserts nothing.
"""

from __future__ import annotations

import json
import time

from bench import costs
from bench.bench_host import _create
from bench.common import TENANT, Usage, api_event, call, line, start_stack, wait_status

TURNS = 40


def main() -> None:
    from shared.services.workflows import register_workflow
    from shared.wiring import get_ports
    from tests.workflows import definition, node, static

    aws, meter = start_stack()
    ports = get_ports()
    try:

        def register(agent_id: str, turns: int) -> None:
            script = [
                {"toolCalls": [{"name": "conformance.eval:echo", "arguments": {"i": i}}]} for i in range(turns)
            ] + [{"text": "done"}]
            out = call(
                "manage_agents",
                api_event(
                    "POST",
                    "/host/openwop-serverless/agents",
                    "/host/openwop-serverless/agents",
                    {
                        "version": "1.0.0",
                        "maxTurns": turns + 1,
                        "manifest": {
                            "agentId": agent_id,
                            "persona": "Bench",
                            "modelClass": "general",
                            "systemPrompt": "bench",
                            "toolAllowlist": ["conformance.eval:echo"],
                        },
                        "model": {"provider": "mock", "model": "bench", "mockProvider": {"script": script}},
                    },
                ),
            )
            assert out["statusCode"] in (200, 201), out
            n = node("agent", "core.agent", inputs={"input": static("go")})
            n["agent"] = {"agentId": agent_id}
            register_workflow(ports, TENANT, definition(f"bench-{agent_id.replace('.', '-')}", [n]))

        register("bench.one", 0)
        register("bench.many", TURNS)

        def run(workflow: str) -> tuple[str, Usage, float]:
            meter.reset()
            started = time.perf_counter()
            with meter.origin("create"):
                run_id = _create(workflow)
            wait_status(ports, run_id, meter)
            rec = ports.runs.get_run(run_id)
            meter.add_run_transitions(run_id, rec)
            return run_id, meter.usage("create", run_id), time.perf_counter() - started

        run("bench-bench-one")  # warm caches
        _, one, one_wall = run("bench-bench-one")
        source, many, many_wall = run("bench-bench-many")
        one_req, many_req = one.total(), many.total()
        per_turn = (many_req - one_req) / TURNS
        print(f"Model-backed agents ({TURNS} model turns, each with one echo tool call, mock provider, local moto)")
        line(
            "AWS requests per model turn + its tool call",
            f"{per_turn:.2f}",
            f"({many_req} for the run, {one_req} for a one-turn run)",
        )
        line("host time per turn (engine + moto)", f"{(many_wall - one_wall) * 1000 / TURNS:.1f}", "ms")
        line(
            "AWS cost per 1,000 model turns + their tool calls (model price aside)",
            costs.breakdown(many.minus(one), 1000 / TURNS),
        )
        meter.reset()
        started = time.perf_counter()
        with meter.origin("fork"):
            out = call(
                "run_actions",
                api_event(
                    "POST",
                    f"/runs/{source.replace('/', '~2F')}:fork",
                    "/runs/{runId}",
                    {"mode": "replay", "fromSeq": 0},
                ),
            )
        child = str(json.loads(out["body"])["runId"])
        wait_status(ports, child, meter)
        served = [d["source"] for _, d in ports.runs.query_aux(child, "MCALL#")]
        line(
            "replay from 0: AWS requests",
            meter.usage("fork", child).total(),
            f"({time.perf_counter() - started:.2f} s)",
        )
        line(
            "replay from 0: model calls sent",
            sum(1 for s in served if s != "recorded"),
            f"of {len(served)} served from the log",
        )
    finally:
        meter.close()
        aws.stop()


if __name__ == "__main__":
    main()
