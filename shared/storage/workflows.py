"""The workflow repository on the host table (docs/decisions/README.md, "Workflows a tenant registers").

- ``WORKFLOW#<tenant>`` / ``<workflowId>``: the current definition (the version registered last), which runs of
  ``workflowId`` use; after a delete, a ``{"$deleted": <time>}`` marker (read as absent: no definition can carry
  that key, the schema is closed);
- ``WORKFLOWV#<tenant>`` / ``<workflowId>#<version>``: every registered version, immutable;
- ``WORKFLOWIDX#<tenant>`` / ``w#<workflowId>#``: the listing row ``{workflowId, name, version, registeredAt}``;
- ``WORKFLOW#*`` / ``<workflowId>``: the conformance fixtures.
The schema's workflowId grammar has no ``#``, so ``<workflowId>#`` is a prefix of exactly one workflow's keys.
Definitions and versions are stored compressed when large (``compress``); fixtures, markers and rows never are.
"""

from __future__ import annotations

from typing import Any

from shared.ports import HostStore

WORKFLOW_PREFIX = "WORKFLOW#"
WORKFLOW_VERSION_PREFIX = "WORKFLOWV#"
WORKFLOW_INDEX_PREFIX = "WORKFLOWIDX#"
GLOBAL = "*"
DELETED = "$deleted"


def _index_sk(workflow_id: str) -> str:
    return f"w#{workflow_id}#"


class DynamoWorkflowRepository:
    def __init__(self, host: HostStore) -> None:
        self._host = host

    def get_fixture(self, workflow_id: str) -> dict[str, Any] | None:
        return self._host.get_item(f"{WORKFLOW_PREFIX}{GLOBAL}", workflow_id)

    def put_fixture(self, workflow_id: str, doc: dict[str, Any]) -> None:
        self._host.put_item(f"{WORKFLOW_PREFIX}{GLOBAL}", workflow_id, doc)

    def get_version(self, tenant: str, workflow_id: str, version: str) -> dict[str, Any] | None:
        return self._host.get_item(f"{WORKFLOW_VERSION_PREFIX}{tenant}", f"{workflow_id}#{version}")

    def put_version(self, tenant: str, workflow_id: str, version: str, doc: dict[str, Any]) -> bool:
        pk = f"{WORKFLOW_VERSION_PREFIX}{tenant}"
        return self._host.put_item(pk, f"{workflow_id}#{version}", doc, if_absent=True, compress=True)

    def get_definition(self, tenant: str, workflow_id: str) -> dict[str, Any] | None:
        doc = self._host.get_item(f"{WORKFLOW_PREFIX}{tenant}", workflow_id)
        return None if doc is None or DELETED in doc else doc

    def put_definition(self, tenant: str, workflow_id: str, doc: dict[str, Any]) -> None:
        self._host.put_item(f"{WORKFLOW_PREFIX}{tenant}", workflow_id, doc, compress=True)

    def get_listing(self, tenant: str, workflow_id: str) -> dict[str, Any] | None:
        return self._host.get_item(f"{WORKFLOW_INDEX_PREFIX}{tenant}", _index_sk(workflow_id))

    def put_listing(self, tenant: str, workflow_id: str, row: dict[str, Any]) -> None:
        self._host.put_item(f"{WORKFLOW_INDEX_PREFIX}{tenant}", _index_sk(workflow_id), row)

    def list_listings(self, tenant: str, *, after: str | None = None) -> list[dict[str, Any]]:
        rows = self._host.query(f"{WORKFLOW_INDEX_PREFIX}{tenant}", "w#")
        return [doc for sk, doc in rows if after is None or sk > _index_sk(after)]

    def delete_workflow(self, tenant: str, workflow_id: str, *, at: str) -> None:
        self._host.put_item(f"{WORKFLOW_PREFIX}{tenant}", workflow_id, {DELETED: at})
        self._host.delete_prefix(f"{WORKFLOW_VERSION_PREFIX}{tenant}", f"{workflow_id}#")
        self._host.delete_prefix(f"{WORKFLOW_INDEX_PREFIX}{tenant}", _index_sk(workflow_id))
