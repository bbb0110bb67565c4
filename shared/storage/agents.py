"""The agent repositories on the host table:

- ``AGENTV#<tenant>`` / ``<agentId>#<version>``: one immutable item per registered model-backed version;
- ``AGENT#<tenant>`` / ``<agentId>``: a scripted agent;
- ``AGENTDEP#<tenant>`` / ``<agentId>#<version>``: the version's deployment record;
- ``AGENTCHAN#<tenant>`` / ``<agentId>#<channel>#<n:08d>``: the n-th change of what a channel serves.
An agent's rows are those whose sort key before its last ``#`` is the agentId (``a`` never reads ``a#b``'s).
"""

from __future__ import annotations

from typing import Any

from shared.ports import HostStore
from shared.storage.schema import AGENT_CHANNEL_PREFIX, AGENT_DEPLOYMENT_PREFIX, AGENT_VERSION_PREFIX

SCRIPTED_AGENT_PREFIX = "AGENT#"


def _own(host: HostStore, pk: str, agent_id: str) -> list[tuple[str, dict[str, Any]]]:
    """(the part after the agentId, document) of the partition's rows of exactly ``agent_id``."""
    return [
        (sk.rsplit("#", 1)[1], doc) for sk, doc in host.query(pk, f"{agent_id}#") if sk.rsplit("#", 1)[0] == agent_id
    ]


class DynamoAgentRepository:
    def __init__(self, host: HostStore) -> None:
        self._host = host

    def get_version(self, tenant: str, agent_id: str, version: str) -> dict[str, Any] | None:
        return self._host.get_item(f"{AGENT_VERSION_PREFIX}{tenant}", f"{agent_id}#{version}")

    def put_version(self, tenant: str, agent_id: str, version: str, doc: dict[str, Any]) -> bool:
        return self._host.put_item(f"{AGENT_VERSION_PREFIX}{tenant}", f"{agent_id}#{version}", doc, if_absent=True)

    def list_versions(self, tenant: str, agent_id: str) -> list[tuple[str, dict[str, Any]]]:
        return _own(self._host, f"{AGENT_VERSION_PREFIX}{tenant}", agent_id)

    def list_all_versions(self, tenant: str) -> list[tuple[str, str, dict[str, Any]]]:
        out = []
        for sk, doc in self._host.query(f"{AGENT_VERSION_PREFIX}{tenant}"):
            agent_id, version = sk.rsplit("#", 1)
            out.append((agent_id, version, doc))
        return out

    def get_scripted(self, tenant: str, agent_id: str) -> dict[str, Any] | None:
        return self._host.get_item(f"{SCRIPTED_AGENT_PREFIX}{tenant}", agent_id)

    def put_scripted(self, tenant: str, agent_id: str, doc: dict[str, Any]) -> None:
        self._host.put_item(f"{SCRIPTED_AGENT_PREFIX}{tenant}", agent_id, doc)


class DynamoDeploymentRepository:
    def __init__(self, host: HostStore) -> None:
        self._host = host

    def list_records(self, tenant: str, agent_id: str) -> dict[str, dict[str, Any]]:
        return dict(_own(self._host, f"{AGENT_DEPLOYMENT_PREFIX}{tenant}", agent_id))

    def put_record(self, tenant: str, agent_id: str, version: str, doc: dict[str, Any]) -> None:
        self._host.put_item(f"{AGENT_DEPLOYMENT_PREFIX}{tenant}", f"{agent_id}#{version}", doc)

    def list_history(self, tenant: str, agent_id: str, channel: str) -> list[dict[str, Any]]:
        return [doc for _, doc in self._host.query(f"{AGENT_CHANNEL_PREFIX}{tenant}", f"{agent_id}#{channel}#")]

    def put_history(self, tenant: str, agent_id: str, channel: str, position: int, entry: dict[str, Any]) -> bool:
        sk = f"{agent_id}#{channel}#{position:08d}"
        return self._host.put_item(f"{AGENT_CHANNEL_PREFIX}{tenant}", sk, entry, if_absent=True)
