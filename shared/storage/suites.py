"""The suite repository on the host table:

- ``SUITE#<owner>`` / ``<suiteId>@<version>``: a version (owner: the tenant, or ``*`` for a host-wide one), one
  compressed item; a version too large for one (a few thousand tasks) keeps its tasks in pages,
  ``SUITEPAGE#<owner>`` / ``<suiteId>@<version>#<hash>#<n>``, its item (the head) naming them under ``$pages``
  (docs/decisions/0121-from-runs-at-ten-thousand.md);
- ``SUITE#*`` / ``<fixtureId>``: the conformance fixtures;
- ``SUITEIDX#<tenant>`` / ``<suiteId>@<version>``: one index row per version;
- ``SUITELIST#<tenant>`` / ``<suiteId>``: the suite's listing row (compare-and-set, stored compressed when large);
- ``SUITEREF#<tenant>`` / ``<suiteId>@<version>#<runId>``: an eval run that pinned the version (with its TTL).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from shared.engine.canonical import canonical_bytes
from shared.errors import ItemTooLargeError
from shared.ports import HostStore
from shared.storage.schema import SUITE_PK_PREFIX

INDEX_PREFIX = "SUITEIDX#"
LIST_PREFIX = "SUITELIST#"
REF_PREFIX = "SUITEREF#"
GLOBAL = "*"
PAGE_PREFIX = "SUITEPAGE#"
PAGES = "$pages"  # on a version stored in pages: {id, count, tasks}
PAGE_RAW_BYTES = 1_000_000  # a page's tasks as JSON before compression (a page that still does not fit is halved)
CAS_TRIES = 5
_T = TypeVar("_T")


def _packed(items: Iterable[_T], weight: Callable[[_T], int], cap: int) -> list[list[_T]]:
    """``items`` in order, cut into groups of at most ``cap`` weight (an item heavier than ``cap`` alone)."""
    out: list[list[_T]] = []
    load = cap
    for item in items:
        w = weight(item)
        if load + w > cap:
            out.append([])
            load = 0
        out[-1].append(item)
        load += w
    return out


class DynamoSuiteRepository:
    def __init__(self, host: HostStore) -> None:
        self._host = host

    # ----------------------------------------------------------------------- the versions' stored form

    def get_version(self, owner: str, ref: str) -> dict[str, Any] | None:
        return self._whole(owner, ref, self._host.get_item(SUITE_PK_PREFIX + owner, ref))

    def _pages(self, owner: str, ref: str, head: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return self._host.query(PAGE_PREFIX + owner, f"{ref}#{head[PAGES]['id']}#", consistent=True)

    def _whole(self, owner: str, ref: str, head: dict[str, Any] | None) -> dict[str, Any] | None:
        if head is None or PAGES not in head:
            return head
        tasks = [t for _, page in self._pages(owner, ref, head) for t in page["tasks"]]
        if len(tasks) != head[PAGES]["tasks"]:
            return None  # being deleted (the head goes first): gone
        return {**{k: v for k, v in head.items() if k != PAGES}, "tasks": tasks}

    def put_version(self, owner: str, ref: str, suite: dict[str, Any]) -> bool:
        pk = SUITE_PK_PREFIX + owner
        try:
            return self._host.put_item(pk, ref, suite, if_absent=True, compress=True)
        except ItemTooLargeError:
            pass
        pid = hashlib.sha256(canonical_bytes(suite)).hexdigest()[:16]
        todo = _packed(suite["tasks"], lambda t: len(json.dumps(t, separators=(",", ":"))), PAGE_RAW_BYTES)
        count = 0
        while todo:
            tasks = todo.pop(0)
            try:
                self._host.put_item(PAGE_PREFIX + owner, f"{ref}#{pid}#{count:04d}", {"tasks": tasks}, compress=True)
            except ItemTooLargeError:
                if len(tasks) == 1:
                    raise
                todo[:0] = [tasks[: len(tasks) // 2], tasks[len(tasks) // 2 :]]
                continue
            count += 1
        head = {
            **{k: v for k, v in suite.items() if k != "tasks"},
            PAGES: {"id": pid, "count": count, "tasks": len(suite["tasks"])},
        }
        if self._host.put_item(pk, ref, head, if_absent=True, compress=True):
            return True
        existing = self._host.get_item(pk, ref) or {}
        if (existing.get(PAGES) or {}).get("id") != pid:  # another document holds the version: ours go
            self._host.delete_prefix(PAGE_PREFIX + owner, f"{ref}#{pid}#")
        return False

    def delete_version(self, owner: str, ref: str) -> None:
        self._host.delete_item(SUITE_PK_PREFIX + owner, ref)
        self._host.delete_prefix(PAGE_PREFIX + owner, f"{ref}#")

    def get_latest_version(
        self, owners: Sequence[str], suite_id: str, choose: Callable[[Iterable[str]], str | None]
    ) -> tuple[str, dict[str, Any]] | None:
        candidates: dict[str, tuple[dict[str, Any], str]] = {}
        for owner in owners:
            for sk, doc in self._host.query(SUITE_PK_PREFIX + owner, f"{suite_id}@"):
                candidates[sk.partition("@")[2]] = (doc, owner)
        best = choose(list(candidates)) if candidates else None
        if best is None:
            return None
        doc, owner = candidates[best]
        whole = self._whole(owner, f"{suite_id}@{best}", doc)
        return (owner, whole) if whole is not None else None

    def rewrite_tasks(
        self, owner: str, ref: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> int | None:
        head = self._host.get_item(SUITE_PK_PREFIX + owner, ref)
        if head is None:
            return 0
        if PAGES not in head:
            return self._rewrite_item(SUITE_PK_PREFIX + owner, ref, change, head)
        done = 0
        for sk, page in self._pages(owner, ref, head):
            if any(change(t) is not None for t in page["tasks"]):
                n = self._rewrite_item(PAGE_PREFIX + owner, sk, change, page)
                if n is None:
                    return None
                done += n
        return done

    def _rewrite_item(
        self, pk: str, sk: str, change: Callable[[dict[str, Any]], dict[str, Any] | None], read: dict[str, Any]
    ) -> int | None:
        """Compare-and-set of the item ``read`` (as just read): a rewrite meanwhile is read again and retried."""
        doc: dict[str, Any] | None = read
        for _ in range(CAS_TRIES):
            if doc is None:
                return 0
            new_tasks = [change(t) for t in doc["tasks"]]
            hit = sum(t is not None for t in new_tasks)
            if not hit:
                return 0
            tasks = [n if n is not None else t for t, n in zip(doc["tasks"], new_tasks, strict=True)]
            if self._host.put_item(pk, sk, {**doc, "tasks": tasks}, if_equals=doc, compress=True):
                return hit
            doc = self._host.get_item(pk, sk)
        return None

    # ----------------------------------------------------------------------- beside the versions

    def get_fixture(self, fixture_id: str) -> dict[str, Any] | None:
        return self._host.get_item(f"{SUITE_PK_PREFIX}{GLOBAL}", fixture_id)

    def put_fixture(self, fixture_id: str, doc: dict[str, Any]) -> None:
        self._host.put_item(f"{SUITE_PK_PREFIX}{GLOBAL}", fixture_id, doc)

    def get_index_row(self, tenant: str, ref: str) -> dict[str, Any] | None:
        return self._host.get_item(INDEX_PREFIX + tenant, ref)

    def list_index_rows(self, tenant: str, suite_id: str, *, consistent: bool = False) -> list[dict[str, Any]]:
        return [row for _, row in self._host.query(INDEX_PREFIX + tenant, f"{suite_id}@", consistent=consistent)]

    def put_index_row(self, tenant: str, ref: str, row: dict[str, Any], *, if_absent: bool = False) -> None:
        self._host.put_item(INDEX_PREFIX + tenant, ref, row, if_absent=if_absent)

    def delete_index_row(self, tenant: str, ref: str) -> None:
        self._host.delete_item(INDEX_PREFIX + tenant, ref)

    def get_listing(self, tenant: str, suite_id: str) -> dict[str, Any] | None:
        return self._host.get_item(LIST_PREFIX + tenant, suite_id)

    def put_listing(
        self, tenant: str, suite_id: str, doc: dict[str, Any], *, if_absent: bool, if_equals: dict[str, Any] | None
    ) -> bool:
        pk = LIST_PREFIX + tenant
        return self._host.put_item(pk, suite_id, doc, if_absent=if_absent, if_equals=if_equals, compress=True)

    def delete_listing(self, tenant: str, suite_id: str, *, if_equals: dict[str, Any] | None) -> bool:
        return self._host.delete_item(LIST_PREFIX + tenant, suite_id, if_equals=if_equals, compress=True)

    def list_listings(
        self, tenant: str, limit: int, *, after: str = ""
    ) -> tuple[list[tuple[str, dict[str, Any]]], bool]:
        return self._host.query_page(LIST_PREFIX + tenant, limit, after=after)

    def put_reference(self, tenant: str, ref: str, run_id: str, *, expires_at: int) -> tuple[str, str]:
        pk, sk = REF_PREFIX + tenant, f"{ref}#{run_id}"
        self._host.put_item(pk, sk, {"runId": run_id}, expires_at=expires_at)
        return pk, sk

    def list_references(self, tenant: str, ref: str) -> list[str]:
        return [str(row["runId"]) for _, row in self._host.query(REF_PREFIX + tenant, f"{ref}#")]

    def delete_reference(self, tenant: str, ref: str, run_id: str) -> None:
        self._host.delete_item(REF_PREFIX + tenant, f"{ref}#{run_id}")
