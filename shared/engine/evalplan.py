"""An eval run's pinned plan: the suite, the agent, the modes, the baseline and the derived copies, written once at
create (``EVALPLAN`` under the run, or an S3 object when large) and read by every task of the run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from shared import keys
from shared.caches import LockedLRUCache
from shared.errors import RunGoneError
from shared.ports import Ports

PLAN_VERSION = 1
INLINE_LIMIT = 300_000  # bytes of JSON kept inside a DynamoDB item; larger goes to S3 under the run's prefix

# A large fork plan's item: the keys of the derived copies its plan reads (its source's: it owns none, so its
# ``derivedKeys`` is empty, and the plan's ``derived`` map is inside the object).
DERIVED_READ = "derivedRead"

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
        key = _object_key(run_id)
        ports.blobs.put_json(key, plan)
        plan = _object_item(plan, key, owned=plan.get("derivedKeys") or [])
    ports.runs.put_aux(run_id, keys.EVAL_PLAN_SK, plan, expires_at)


def _object_key(run_id: str) -> str:
    """Where the run's plan lives when it is too large for its item: under the run's prefix (its erasure)."""
    return f"{keys.run_prefix(run_id)}eval-plan.json"


def _object_item(plan: dict[str, Any], key: str, *, owned: list[str], read: list[str] | None = None) -> dict[str, Any]:
    """The ``EVALPLAN`` item of a plan stored as the object ``key``: the keys of the derived copies the run owns
    (erasure deletes them) and, for a fork that owns none, those its plan reads (``DERIVED_READ``)."""
    item: dict[str, Any] = {"v": plan.get("v", PLAN_VERSION), "planBlob": key, "derivedKeys": owned}
    if read is not None:
        item[DERIVED_READ] = read
    return item


# --------------------------------------------------------------------------- a fork's plan


@dataclass(frozen=True)
class ChildPlan:
    """An eval fork's plan: its source's, less the copies the source owns (``derivedKeys``: erasing the fork never
    deletes them). ``item``: the source's ``EVALPLAN`` item as stored (the plan itself, or the S3 object naming it)."""

    source_run_id: str
    item: dict[str, Any]


def child_plan(ports: Ports, source_run_id: str) -> ChildPlan:
    """What a fork of the eval run needs to store its plan: one read of the source's plan item (not the object a
    large plan is: ``store_child_plan`` copies that within the store). ``RunGoneError`` without a plan."""
    item = ports.runs.get_aux(source_run_id, keys.EVAL_PLAN_SK)
    if item is None:
        raise RunGoneError(source_run_id)
    return ChildPlan(source_run_id, item)


def store_child_plan(ports: Ports, plan: ChildPlan, run_id: str, expires_at: int) -> None:
    """Store the fork's plan (decision 0188): a large plan's object copied within the store, its bytes never read
    by the request (its item names the copy and owns no derived copies); a small one, the item less its
    ``derivedKeys``. ``RunGoneError`` when the source's object is gone."""
    if "planBlob" in plan.item:
        key = _object_key(run_id)
        if not ports.blobs.copy(str(plan.item["planBlob"]), key):
            raise RunGoneError(plan.source_run_id)
        doc = _object_item(plan.item, key, owned=[], read=derived_read(plan.item))
        ports.runs.put_aux(run_id, keys.EVAL_PLAN_SK, doc, expires_at)
        return
    source = plan.item if "suiteBlob" not in plan.item else load_plan(ports, plan.source_run_id, cached=False)
    store_plan(ports, run_id, {k: v for k, v in source.items() if k != "derivedKeys"}, expires_at)


def derived_read(item: dict[str, Any]) -> list[str]:
    """The keys of the derived copies the plan stored as ``item`` (an ``EVALPLAN`` item, either layout) reads: those
    a fork's item lists, else those it owns (``derivedKeys``), else its ``derived`` map's."""
    names = item.get(DERIVED_READ) or item.get("derivedKeys") or list((item.get("derived") or {}).values())
    return [str(n) for n in names]
