"""The API key repository on the host table:

- ``APIKEY`` / <hmac>            -> tenant, subjectId, keyId          (what a request looks up)
- ``APIKEYID`` / <keyId>         -> tenant, hash                       (what revocation finds)
- ``APIKEYS#<tenant>`` / <keyId> -> keyId, name, createdAt, pepperId  (what a listing shows; never the key)
"""

from __future__ import annotations

from typing import Any

from shared.ports import HostStore
from shared.storage.schema import APIKEY_PK

KEYID_PK = "APIKEYID"
TENANT_KEYS_PREFIX = "APIKEYS#"


class DynamoApiKeyRepository:
    def __init__(self, host: HostStore) -> None:
        self._host = host

    def get_by_hash(self, key_hash: str) -> dict[str, Any] | None:
        return self._host.get_item(APIKEY_PK, key_hash)

    def get_key(self, key_id: str) -> dict[str, Any] | None:
        return self._host.get_item(KEYID_PK, key_id)

    def list_keys(self, tenant: str) -> list[tuple[str, dict[str, Any]]]:
        return self._host.query(f"{TENANT_KEYS_PREFIX}{tenant}")

    def put_key(
        self, key_id: str, key_hash: str, *, tenant: str, listing: dict[str, Any], lookup: dict[str, Any]
    ) -> None:
        self._host.put_item(KEYID_PK, key_id, {"tenant": tenant, "hash": key_hash})
        self._host.put_item(f"{TENANT_KEYS_PREFIX}{tenant}", key_id, listing)
        self._host.put_item(APIKEY_PK, key_hash, lookup)

    def delete_key(self, key_id: str, key_hash: str, *, tenant: str) -> None:
        self._host.delete_item(APIKEY_PK, key_hash)
        self._host.delete_item(f"{TENANT_KEYS_PREFIX}{tenant}", key_id)
        self._host.delete_item(KEYID_PK, key_id)
