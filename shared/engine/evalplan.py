"""An eval run's pinned plan: the suite, the agent, the modes, the baseline and the derived copies, written once at
create (``EVALPLAN`` under the run, or an S3 object when large) and read by every task of the run."""

from __future__ import annotations

import json
from typing import Any

from shared import keys
from shared.caches import LockedLRUCache
from shared.errors import RunGoneError
from shared.ports import Ports

PLAN_VERSION = 1
INLINE_LIMIT = 300_000  # bytes of JSON kept inside a DynamoDB item; larger goes to S3 under the run's prefix

_PLAN_CACHE_SIZE = 16
_plan_cache: LockedLRUCache[str, dict[str, Any]] = LockedLRUCache(maxsize=_PLAN_CACHE_SIZE)


def load_plan(ports: Ports, run_id: str, *, cached: bool = True) -> dict[str, Any]:
    """The eval run's pinned plan (immutable after create), suite included."""
    hit = _plan_cache.get(run_id) if cached else None
    if hit is not None:
        return hit
    doc = ports.runs.get_aux(run_id, keys.EVAL_PLAN_SK)
    if doc is None:
        raise RunGoneError(run_id)
    if "planBlob" in doc or "suiteBlob" in doc:  # a large plan, or (stored before planBlob) a large suite
        got = ports.blobs.get_json(str(doc.get("planBlob") or doc["suiteBlob"]))
        if got is None:
            raise RunGoneError(run_id)
        doc = dict(got) if "planBlob" in doc else {**doc, "suite": got}
    _plan_cache[run_id] = doc
    return doc


def store_plan(ports: Ports, run_id: str, plan: dict[str, Any], expires_at: int) -> None:
    """Write the plan as the run's ``EVALPLAN`` item; a plan over ``INLINE_LIMIT`` (a large suite or baseline) is
    an S3 object under the run, the item naming it and keeping the keys erasure needs (``derivedKeys``)."""
    if len(json.dumps(plan, separators=(",", ":"))) > INLINE_LIMIT:
        key = f"{keys.run_prefix(run_id)}eval-plan.json"
        ports.blobs.put_json(key, plan)
        plan = {"v": plan.get("v", PLAN_VERSION), "planBlob": key, "derivedKeys": plan.get("derivedKeys") or []}
    ports.runs.put_aux(run_id, keys.EVAL_PLAN_SK, plan, expires_at)
