"""Agents a tenant registers: model-backed agent versions (immutable), scripted agents, and the deployment records
and channel histories of each version (RFC 0082)."""

from __future__ import annotations

from typing import Any, Protocol


class AgentRepository(Protocol):
    def get_version(self, tenant: str, agent_id: str, version: str) -> dict[str, Any] | None: ...
    def put_version(self, tenant: str, agent_id: str, version: str, doc: dict[str, Any]) -> bool:
        """Store a version once: False (nothing written) when the version is already stored."""
        ...

    def list_versions(self, tenant: str, agent_id: str) -> list[tuple[str, dict[str, Any]]]:
        """The agent's (version, document), in storage order (not semver order)."""
        ...

    def list_all_versions(self, tenant: str) -> list[tuple[str, str, dict[str, Any]]]:
        """Every (agentId, version, document) of the tenant."""
        ...

    def get_scripted(self, tenant: str, agent_id: str) -> dict[str, Any] | None: ...
    def put_scripted(self, tenant: str, agent_id: str, doc: dict[str, Any]) -> None: ...


class DeploymentRepository(Protocol):
    def list_records(self, tenant: str, agent_id: str) -> dict[str, dict[str, Any]]:
        """The deployment records written for the agent (versions never deployed have none), by version."""
        ...

    def put_record(self, tenant: str, agent_id: str, version: str, doc: dict[str, Any]) -> None: ...
    def list_history(self, tenant: str, agent_id: str, channel: str) -> list[dict[str, Any]]:
        """The channel's changes of what it serves, in order."""
        ...

    def put_history(self, tenant: str, agent_id: str, channel: str, position: int, entry: dict[str, Any]) -> bool:
        """Claim the channel's ``position``-th change: False (nothing written) when it is already taken."""
        ...
