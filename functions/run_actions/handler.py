"""POST /runs/{runId} verbs: ":fork" (replay | branch), ":pause", ":resume". API Gateway routes the whole segment
here. POST /host/openwop-serverless/runs/{runId}/session: a running session's token and gateway URLs again."""

from __future__ import annotations

from collections.abc import Callable

from functions._common import api
from functions._common.idempotency import idempotent
from functions._common.observability import count
from functions._common.resolver import Response
from shared.protocol.models import ForkRunRequest, PauseRunRequest, ResumeRunRequest, dump
from shared.services import lifecycle

app = api.build_resolver()


@app.post("/host/openwop-serverless/runs/<run_id>/session")
def run_session(run_id: str) -> Response[str]:
    from shared.services import agent_sessions

    caller = api.caller(app)
    return api.reply(200, agent_sessions.session_of_run(api.ports(), caller, run_id, api.origin(app)))


@app.post("/runs/<run_id>:fork")
def fork_run(run_id: str) -> Response[str]:
    caller = api.caller(app)
    key = api.idempotency_key(app)
    req = api.parse_run_body(app, ForkRunRequest)
    ports = api.ports()

    def once() -> tuple[int, dict]:
        from shared.services import forks  # only the fork verb loads the fork service (and the engine it reads)

        created = forks.fork_run(ports, caller, run_id, req)
        return created.status, created.body

    status, body, replayed = idempotent(
        caller, f"forkRun#{run_id}", key, dump(req), app.lambda_context, ports.ids.ulid(), once
    )
    if not replayed and status < 300:
        count("Forks")
    return api.reply(status, body, {"OpenWOP-Idempotent-Replay": "true"} if replayed else None)


def _once(run_id: str, verb: str, body: dict, fn: Callable[[], dict]) -> Response[str]:
    """A lifecycle verb (202), at most once per Idempotency-Key."""
    caller, key, ports = api.caller(app), api.idempotency_key(app), api.ports()
    status, out, replayed = idempotent(
        caller, f"{verb}#{run_id}", key, body, app.lambda_context, ports.ids.ulid(), lambda: (202, fn())
    )
    return api.reply(status, out, {"OpenWOP-Idempotent-Replay": "true"} if replayed else None)


@app.post("/runs/<run_id>:pause")
def pause_run(run_id: str) -> Response[str]:
    req = api.parse_run_body(app, PauseRunRequest)
    return _once(
        run_id,
        "pauseRun",
        dump(req),
        lambda: lifecycle.pause_run(api.ports(), api.caller(app), run_id, req.reason, req.drainPolicy),
    )


@app.post("/runs/<run_id>:resume")
def resume_run(run_id: str) -> Response[str]:
    req = api.parse_run_body(app, ResumeRunRequest)
    return _once(
        run_id, "resumeRun", dump(req), lambda: lifecycle.resume_run(api.ports(), api.caller(app), run_id, req.reason)
    )


lambda_handler = api.make_handler(app)
