"""Blobs, secrets, the cipher that seals small values, and a deployed stack's outputs."""

from __future__ import annotations

from typing import Any, Protocol


class BlobStore(Protocol):
    def put_json(self, key: str, value: Any) -> None: ...
    def get_json(self, key: str) -> Any | None: ...
    def put_bytes(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None: ...
    def get_range(self, key: str, start: int, end: int) -> bytes | None:
        """Bytes ``[start, end)`` of an object (fewer at its end); None when the object is gone."""
        ...

    def copy(self, source_key: str, key: str) -> bool:
        """Copy an object within the store, its bytes never leaving it; False when ``source_key`` is gone."""
        ...

    def delete_prefix(self, prefix: str) -> int: ...
    def list_keys(self, prefix: str) -> list[str]: ...


class SecretNotFoundError(Exception):
    """No such secret (or it cannot be read); the message never carries a value."""


class SecretStore(Protocol):
    """Secret values by id (name or ARN), cached by the implementation for ``max_age_s`` (default: a day)."""

    def get_secret(self, secret_id: str, *, max_age_s: int | None = None) -> str: ...
    def put_secret(self, name: str, value: str, *, description: str = "") -> bool: ...
    def update_secret(self, secret_id: str, value: str) -> None: ...
    def delete_secret(self, name: str) -> bool: ...


class Cipher(Protocol):
    """Encryption of small values (at most 4 KB) under a named key of the manifest (``manifest.KEYS``), bound to
    a context: a ciphertext only decrypts with the context it was sealed with (so it cannot be moved to another
    item). Who may encrypt or decrypt is the platform's grant, not the caller's choice."""

    def encrypt(self, key: str, plaintext: bytes, context: dict[str, str]) -> bytes: ...
    def decrypt(self, key: str, ciphertext: bytes, context: dict[str, str]) -> bytes: ...


class StackLookupError(Exception):
    """A deployed stack's outputs cannot be read; ``reason`` is one line for the operator (no secret, no trace)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class StackOutputs(Protocol):
    """A deployed stack's CloudFormation outputs (OutputKey -> OutputValue). Used by the operator CLI only."""

    def read_outputs(self, stack_name: str) -> dict[str, str]: ...
