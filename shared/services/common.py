"""What every use case shares: the caller, ownership checks, the RunSnapshot projection."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from shared.errors import IdTenantMismatchError, NotFoundError, ValidationError
from shared.ports import AUX_PER_TRANSACTION, Ports, RunRecord
from shared.protocol.ids import BadIdError, decode_run_id, project_id, tenant_of

PARALLEL_WORKERS = 32  # threads a request's independent AWS reads and writes share (the clients' connection pool)
EVENT_LOG_SCHEMA_VERSION = 3
ISSUER = "urn:openwop-serverless:api-key"
_T = TypeVar("_T")
_R = TypeVar("_R")
_UNREADABLE = "~"  # an opaque part no run id can have (the grammar needs 16+ chars)


@dataclass(frozen=True)
class Caller:
    tenant: str
    subject_id: str
    key_id: str = ""  # the API key's id (``keys list``), recorded on what the caller changes; never the key

    @property
    def subject(self) -> dict[str, Any]:
        return {
            "issuer": ISSUER,
            "subjectId": self.subject_id,
            "tenant": self.tenant,
            "lane": "api-key",
            "kind": "user",
        }

    @property
    def owner(self) -> dict[str, Any]:
        return {"tenant": self.tenant, "subject": self.subject}


def parallel(fn: Callable[[_T], _R], items: Iterable[_T]) -> list[_R]:
    """``fn`` over ``items`` on up to ``PARALLEL_WORKERS`` threads (boto3 clients are thread-safe), results in order;
    each call runs in a copy of the caller's context (its trace span, its log keys). One item: inline."""
    todo = list(items)
    if len(todo) <= 1:
        return [fn(x) for x in todo]
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    context = contextvars.copy_context()
    with ThreadPoolExecutor(max_workers=min(PARALLEL_WORKERS, len(todo))) as pool:
        return list(pool.map(lambda x: context.copy().run(fn, x), todo))


def chunks(items: Sequence[_T], size: int) -> list[list[_T]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def link_under(ports: Ports, entries: Sequence[tuple[str, str, dict[str, Any], int]]) -> set[str]:
    """Write aux items (runId, sk, value, expiresAt) under many runs, ``AUX_PER_TRANSACTION`` to a transaction, in
    parallel; the runs whose tombstone refused theirs (nothing of theirs is written)."""
    return set().union(*parallel(ports.runs.put_aux_many, chunks(list(entries), AUX_PER_TRANSACTION)))


def decode_path_run_id(wire: str) -> str:
    try:
        return decode_run_id(wire)
    except BadIdError as exc:
        raise ValidationError("The run id is malformed.") from exc


def load_own_run(ports: Ports, caller: Caller, wire_run_id: str) -> RunRecord:
    """The path rule: another tenant's id is 403 id_tenant_mismatch (without a read); unknown is 404."""
    return own_run(ports, caller, decode_path_run_id(wire_run_id))


def own_run(ports: Ports, caller: Caller, run_id: str) -> RunRecord:
    """A bound run id of the caller's tenant, read; another tenant's is refused without a read."""
    if tenant_of(run_id) != caller.tenant:
        raise IdTenantMismatchError()
    rec = ports.runs.get_run(run_id)
    if rec is None:
        raise NotFoundError("No such run.")
    return rec


def reference(ports: Ports, caller: Caller, value: str) -> RunRecord | None:
    """A run a body names (an eval baseline, a fixture source, a promotion's evidence), read the same way
    whatever the value: exactly one read, of the run when it is the caller's tenant's, else of a key that cannot
    exist. Undecodable, unknown and foreign ids all come back None after the same work."""
    run_id: str | None
    try:
        run_id = decode_run_id(value)
    except BadIdError:
        run_id = None
    own = run_id is not None and tenant_of(run_id) == caller.tenant
    rec = ports.runs.get_run(run_id if own and run_id is not None else f"{caller.tenant}/{_UNREADABLE}")
    if not own or rec is None or rec.run_id != run_id:
        return None
    return rec


def links(run_id: str) -> dict[str, str]:
    wire = project_id(run_id)
    return {"eventsUrl": f"/runs/{wire}/events", "statusUrl": f"/runs/{wire}"}


def snapshot(rec: RunRecord, state: dict[str, Any] | None = None) -> dict[str, Any]:
    d = rec.data
    snap: dict[str, Any] = {
        "runId": rec.run_id,
        "workflowId": d.get("workflowId"),
        "status": rec.status,
        "owner": d["owner"],
        # every run this host creates is era 3; a log seeded as a v1 host wrote it is era 2 (persistence.md)
        "eventLogSchemaVersion": int(d.get("eventLogSchemaVersion") or EVENT_LOG_SCHEMA_VERSION),
        "engineVersion": 1,
    }
    if rec.started_at:
        snap["startedAt"] = rec.started_at
    if rec.completed_at:
        snap["completedAt"] = rec.completed_at
    st = state if state is not None else (rec.state if rec.state and "$ref" not in rec.state else None)
    if st is not None:
        snap["variables"] = (d.get("inputs") or {}) if st.get("variablesFromInputs") else st.get("variables", {})
        snap["channels"] = {}
        nodes = st.get("nodes") or {}
        if nodes:
            snap["nodeStates"] = {k: {"status": v["status"]} for k, v in sorted(nodes.items())}
        active = st.get("active")
        if active and rec.status not in ("completed", "failed", "cancelled"):
            snap["currentNodeId"] = active["nodeId"]
    if rec.status == "failed":
        snap["error"] = rec.error or {"code": "node_execution_failed", "message": "The run failed."}
    for key in ("configurable", "tags", "metadata", "inputs"):
        if d.get(key) is not None:
            snap[key] = d[key]
    if d.get("parentRunId"):
        snap["parentRunId"] = d["parentRunId"]
    return snap


def etag(rec: RunRecord) -> str:
    return f'"{rec.last_seq}-{rec.status}"'


def run_list_filters(params: dict[str, str]) -> None:
    """``GET /runs`` query values the document constrains: a ``workflowId`` in the id grammar, a ``status`` a run can
    have, a non-empty ``cursor``. Anything else is ``400`` (never silently read as "no filter")."""
    from shared.protocol.codes import RUN_STATUSES
    from shared.protocol.ids import NAME_ID_RE

    if "workflowId" in params and not NAME_ID_RE.fullmatch(params["workflowId"]):
        raise ValidationError("workflowId is not a workflow id.")
    if "status" in params and params["status"] not in RUN_STATUSES:
        raise ValidationError("status is not a run status.")
    if "cursor" in params and not params["cursor"]:
        raise ValidationError("The cursor is not valid.")


def page_limit(params: dict[str, str], default: int, maximum: int) -> int:
    """The ``limit`` query parameter of a listing: an integer >= 1, capped at ``maximum`` (400 otherwise)."""
    if "limit" not in params:
        return default
    try:
        limit = int(params["limit"])
    except ValueError as exc:
        raise ValidationError("limit must be an integer.") from exc
    if limit < 1:
        raise ValidationError("limit must be at least 1.")
    return min(limit, maximum)


def decode_json(text: str) -> Any:
    """A request body's JSON under the wire's rules (``shared.protocol.body``), or ``400`` at ``""``: every route's
    body and the agent gateway's alike."""
    from shared.errors import ValidationError, fault
    from shared.protocol import body as wire_body

    try:
        return wire_body.loads(text)
    except wire_body.BodyError as exc:  # its messages are fixed texts, never the caller's input
        raise ValidationError(str(exc), {**(exc.details or {}), "errors": [fault("", "json", str(exc))]}) from exc


def json_object_of(data: Any) -> dict[str, Any]:
    """``data`` when it is a JSON object, else ``400`` at ``""``."""
    from shared.errors import fault, invalid

    if not isinstance(data, dict):
        raise invalid("The request body must be a JSON object.", [fault("", "type")])
    return data
