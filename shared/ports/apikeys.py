"""API keys, stored only as their peppered hash: what a request looks up, what revocation finds, what a tenant's
listing shows (never a key or a hash)."""

from __future__ import annotations

from typing import Any, Protocol


class ApiKeyRepository(Protocol):
    def get_by_hash(self, key_hash: str) -> dict[str, Any] | None:
        """The lookup of a presented key's hash: ``{tenant, subjectId, keyId}``; None for an unknown key."""
        ...

    def get_key(self, key_id: str) -> dict[str, Any] | None:
        """What revocation finds by key id: ``{tenant, hash}``."""
        ...

    def list_keys(self, tenant: str) -> list[tuple[str, dict[str, Any]]]:
        """The tenant's (keyId, ``{keyId, name, createdAt, pepperId}``), in keyId order."""
        ...

    def put_key(
        self, key_id: str, key_hash: str, *, tenant: str, listing: dict[str, Any], lookup: dict[str, Any]
    ) -> None:
        """Store a key: its key-id reference, then its listing, then its lookup (so a key authenticates only once
        it can also be listed and revoked)."""
        ...

    def delete_key(self, key_id: str, key_hash: str, *, tenant: str) -> None:
        """Remove a key: its lookup first (it stops authenticating), then its listing, then its reference."""
        ...
