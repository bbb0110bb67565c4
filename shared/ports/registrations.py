"""What a tenant registers, by aggregate: HTTP tools, MCP servers and credential references.

Each repository speaks in the tenant and the aggregate's id; the key layout is the storage's (``shared.storage``).
Documents are the JSON objects the services validated; a ``get`` never writes.
"""

from __future__ import annotations

from typing import Any, Protocol


class ToolRepository(Protocol):
    """A tenant's registered HTTP tools (their ``ToolRegistration`` documents) by ``toolId``."""

    def get_tool(self, tenant: str, tool_id: str) -> dict[str, Any] | None: ...
    def list_tools(self, tenant: str) -> list[dict[str, Any]]:
        """Every tool of the tenant, in ``toolId`` order."""
        ...

    def put_tool(
        self,
        tenant: str,
        tool_id: str,
        doc: dict[str, Any],
        *,
        if_absent: bool = False,
        if_equals: dict[str, Any] | None = None,
    ) -> bool:
        """Store ``doc``; with ``if_absent`` only when no tool has the id, with ``if_equals`` only while the stored
        document still equals that one. False when the condition failed (nothing written)."""
        ...

    def delete_tool(self, tenant: str, tool_id: str) -> bool:
        """True when the tool existed."""
        ...


class McpServerRepository(Protocol):
    """A tenant's registered MCP servers (with the tools each listed when it was registered) by ``serverId``."""

    def get_server(self, tenant: str, server_id: str) -> dict[str, Any] | None: ...
    def list_servers(self, tenant: str) -> list[dict[str, Any]]:
        """Every server of the tenant, in ``serverId`` order."""
        ...

    def put_server(self, tenant: str, server_id: str, doc: dict[str, Any]) -> None: ...
    def delete_server(self, tenant: str, server_id: str) -> bool:
        """True when the server existed."""
        ...


class CredentialRepository(Protocol):
    """A tenant's credential references: their metadata (type, times, description) by ``credentialRef``; the
    secret material itself is in the ``SecretStore`` under ``secret_name``."""

    def get_credential(self, tenant: str, ref: str) -> dict[str, Any] | None: ...
    def list_credentials(self, tenant: str) -> list[tuple[str, dict[str, Any]]]:
        """Every (credentialRef, metadata) of the tenant, in ``credentialRef`` order."""
        ...

    def put_credential(self, tenant: str, ref: str, meta: dict[str, Any]) -> None: ...
    def delete_credential(self, tenant: str, ref: str) -> bool:
        """True when the credential existed."""
        ...

    def secret_name(self, tenant: str, ref: str) -> str:
        """The ``SecretStore`` name of the credential's material (every tenant under its own path)."""
        ...


class WorkflowRepository(Protocol):
    """Registered workflow definitions: every (workflowId, version) a tenant registered (immutable), the current
    definition of each workflowId (the version registered last), the tenant's listing rows, and the host's
    conformance fixtures (runnable by every tenant, never registered over)."""

    def get_fixture(self, workflow_id: str) -> dict[str, Any] | None: ...
    def put_fixture(self, workflow_id: str, doc: dict[str, Any]) -> None: ...
    def get_version(self, tenant: str, workflow_id: str, version: str) -> dict[str, Any] | None: ...
    def put_version(self, tenant: str, workflow_id: str, version: str, doc: dict[str, Any]) -> bool:
        """Store a version once: False (nothing written) when the version is already stored."""
        ...

    def get_definition(self, tenant: str, workflow_id: str) -> dict[str, Any] | None:
        """The tenant's current definition of ``workflow_id``; None when it has none (or deleted it)."""
        ...

    def put_definition(self, tenant: str, workflow_id: str, doc: dict[str, Any]) -> None: ...
    def get_listing(self, tenant: str, workflow_id: str) -> dict[str, Any] | None:
        """The listing row ``{workflowId, name, version, registeredAt}``; None when the workflow is not listed."""
        ...

    def put_listing(self, tenant: str, workflow_id: str, row: dict[str, Any]) -> None: ...
    def list_listings(self, tenant: str, *, after: str | None = None) -> list[dict[str, Any]]:
        """The tenant's listing rows in workflowId order, those after the workflowId ``after`` only."""
        ...

    def delete_workflow(self, tenant: str, workflow_id: str, *, at: str) -> None:
        """Remove the registration: the current definition (a deletion marker written ``at``, read as absent),
        then every version, then the listing row."""
        ...
