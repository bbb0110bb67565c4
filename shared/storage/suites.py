"""The suite repository on the host table (beside ``SUITE#<tenant>`` / ``<suiteId>@<version>``, the versions, which
``services.suites`` still stores itself):

- ``SUITE#*`` / ``<fixtureId>``: the conformance fixtures;
- ``SUITEIDX#<tenant>`` / ``<suiteId>@<version>``: one index row per version;
- ``SUITELIST#<tenant>`` / ``<suiteId>``: the suite's listing row (compare-and-set, stored compressed when large);
- ``SUITEREF#<tenant>`` / ``<suiteId>@<version>#<runId>``: an eval run that pinned the version (with its TTL).
"""

from __future__ import annotations

from typing import Any

from shared.ports import HostStore
from shared.storage.schema import SUITE_PK_PREFIX

INDEX_PREFIX = "SUITEIDX#"
LIST_PREFIX = "SUITELIST#"
REF_PREFIX = "SUITEREF#"
GLOBAL = "*"


class DynamoSuiteRepository:
    def __init__(self, host: HostStore) -> None:
        self._host = host

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
