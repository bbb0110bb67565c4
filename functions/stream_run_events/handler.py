"""GET /runs/{runId}/events: SSE. Each invocation returns a finite body of what exists after
Last-Event-ID; the local front re-invokes it to stream, and on AWS the client resumes (RFC 0247)."""

from __future__ import annotations

from functions._common import api
from functions._common.resolver import Response
from shared.services import runs

app = api.build_resolver()
WAIT_S = 10.0


@app.get("/runs/<run_id>/events")
def stream_run_events(run_id: str) -> Response[str]:
    caller = api.caller(app)
    body, ended = runs.sse_frames(api.ports(), caller, run_id, api.query(app), api.header(app, "last-event-id"), WAIT_S)
    return Response(
        status_code=200,
        body=body,
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "OpenWOP-Version": api.VERSION,
            "x-openwop-stream": "end" if ended else "more",
        },
    )


lambda_handler = api.make_handler(app)
