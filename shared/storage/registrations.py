"""The registration repositories on the host table: a tenant's HTTP tools, MCP servers and credential references,
one partition per tenant and aggregate (pk = the aggregate's prefix + tenant, sk = the id), stored as
``DynamoHostStore`` stores any host item (uncompressed, no TTL)."""

from __future__ import annotations

from typing import Any

from shared.ports import HostStore
from shared.storage.schema import CREDENTIAL_PREFIX, MCP_SERVER_PREFIX, TOOL_PREFIX


class DynamoToolRepository:
    def __init__(self, host: HostStore) -> None:
        self._host = host

    def get_tool(self, tenant: str, tool_id: str) -> dict[str, Any] | None:
        return self._host.get_item(f"{TOOL_PREFIX}{tenant}", tool_id)

    def list_tools(self, tenant: str) -> list[dict[str, Any]]:
        return [doc for _, doc in self._host.query(f"{TOOL_PREFIX}{tenant}")]

    def put_tool(
        self,
        tenant: str,
        tool_id: str,
        doc: dict[str, Any],
        *,
        if_absent: bool = False,
        if_equals: dict[str, Any] | None = None,
    ) -> bool:
        return self._host.put_item(f"{TOOL_PREFIX}{tenant}", tool_id, doc, if_absent=if_absent, if_equals=if_equals)

    def delete_tool(self, tenant: str, tool_id: str) -> bool:
        return self._host.delete_item(f"{TOOL_PREFIX}{tenant}", tool_id)


class DynamoMcpServerRepository:
    def __init__(self, host: HostStore) -> None:
        self._host = host

    def get_server(self, tenant: str, server_id: str) -> dict[str, Any] | None:
        return self._host.get_item(f"{MCP_SERVER_PREFIX}{tenant}", server_id)

    def list_servers(self, tenant: str) -> list[dict[str, Any]]:
        return [doc for _, doc in self._host.query(f"{MCP_SERVER_PREFIX}{tenant}")]

    def put_server(self, tenant: str, server_id: str, doc: dict[str, Any]) -> None:
        self._host.put_item(f"{MCP_SERVER_PREFIX}{tenant}", server_id, doc)

    def delete_server(self, tenant: str, server_id: str) -> bool:
        return self._host.delete_item(f"{MCP_SERVER_PREFIX}{tenant}", server_id)


class DynamoCredentialRepository:
    """Metadata on the host table; ``secret_name`` puts each tenant's material under ``<prefix>/<tenant>/`` (an IAM
    policy can scope a tenant to its path)."""

    def __init__(self, host: HostStore, secrets_prefix: str) -> None:
        self._host = host
        self._prefix = secrets_prefix

    def get_credential(self, tenant: str, ref: str) -> dict[str, Any] | None:
        return self._host.get_item(f"{CREDENTIAL_PREFIX}{tenant}", ref)

    def list_credentials(self, tenant: str) -> list[tuple[str, dict[str, Any]]]:
        return self._host.query(f"{CREDENTIAL_PREFIX}{tenant}")

    def put_credential(self, tenant: str, ref: str, meta: dict[str, Any]) -> None:
        self._host.put_item(f"{CREDENTIAL_PREFIX}{tenant}", ref, meta)

    def delete_credential(self, tenant: str, ref: str) -> bool:
        return self._host.delete_item(f"{CREDENTIAL_PREFIX}{tenant}", ref)

    def secret_name(self, tenant: str, ref: str) -> str:
        return f"{self._prefix.rstrip('/')}/{tenant}/{ref}"
