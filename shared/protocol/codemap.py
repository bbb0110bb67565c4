"""The era-2 reader: a run log a v1 host wrote, read as v2 through the official codemap (persistence.md).

``spec/v2/event-codemap.json`` is the only v1 -> v2 type mapping (vendored rows in
``schemas/openwop-v2/event-codemap.json``). A row of an era-2 log is read with its ``type`` mapped, ``sequence``,
``eventId``, ``timestamp``, ``causationId`` and every other member passed through, and its payload unchanged except
one projection: ``run.started`` of a run that had no Subject carries the legacy Subject (identity.md §1.2), stamped
from the run's stored owner the same way on every read, so it is never rewritten. A type the codemap does not name is
refused (``event_type_unmapped``), as is a row that is not an event; a vendor-prefixed type would pass under its own
name, but this host registers no vendor org, so every unnamed type is refused. Pure: the storage boundary
(``shared.storage.events``) calls it for every era-2 row it reads.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from shared.errors import EventTypeUnmappedError

LEGACY_ISSUER = "urn:openwop:legacy"
ERA_V1 = 2  # eventLogSchemaVersion of a log in v1 vocabulary
ERA_V2 = 3  # what this host stamps on every run it creates


@lru_cache(maxsize=1)
def v1_to_v2() -> dict[str, str]:
    from shared.protocol.schemas import load_schema

    rows = load_schema("openwop-v2/event-codemap.json")["rows"]
    mapping = {str(r["v1"]): str(r["v2"]) for r in rows}
    if len(set(mapping.values())) != len(rows):  # the codemap is a bijection; a fold would make reads ambiguous
        raise RuntimeError("the vendored codemap is not one-to-one")
    return mapping


def legacy_owner(tenant: str, principal: str, kind: str = "user", lane: str = "api-key") -> dict[str, Any]:
    """The owner of a run created before the host emitted subjects: its tenant and the legacy Subject of its stored
    principal (never linkable; the lane the host can attest, else api-key; the recorded kind, else user)."""
    return {
        "tenant": tenant,
        "subject": {"issuer": LEGACY_ISSUER, "subjectId": principal, "tenant": tenant, "lane": lane, "kind": kind},
    }


def translate(row: Any, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    """One era-2 row as v2. ``owner`` is the run's stored owner (legacy-stamped) for its ``run.started``."""
    if not isinstance(row, dict) or not isinstance(row.get("type"), str) or not isinstance(row.get("payload"), dict):
        raise EventTypeUnmappedError()
    seq = row.get("sequence")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise EventTypeUnmappedError()
    v2 = v1_to_v2().get(row["type"])
    if v2 is None:
        raise EventTypeUnmappedError(details={"sequence": seq})
    out = {**row, "type": v2}
    payload = row["payload"]
    if v2 == "run.started" and owner is not None:
        stored = payload.get("owner")
        if not (isinstance(stored, dict) and isinstance(stored.get("subject"), dict)):
            out["payload"] = {**payload, "owner": owner}
    return out
