"""The Cipher port on AWS KMS: Encrypt and Decrypt of small values (at most 4 KB) under a symmetric key, with an
encryption context. The client is built on first use (``LazyClient``): only the functions that seal or open a
value pay for it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class KmsCipher:
    def __init__(self, client: Any, key_ids: Mapping[str, str]) -> None:
        self._c = client
        self._keys = dict(key_ids)

    def encrypt(self, key: str, plaintext: bytes, context: dict[str, str]) -> bytes:
        resp = self._c.encrypt(KeyId=self._keys[key], Plaintext=plaintext, EncryptionContext=context)
        return bytes(resp["CiphertextBlob"])

    def decrypt(self, key: str, ciphertext: bytes, context: dict[str, str]) -> bytes:
        # KeyId pins the key: a ciphertext of another key is refused rather than opened with whatever key made it
        resp = self._c.decrypt(KeyId=self._keys[key], CiphertextBlob=ciphertext, EncryptionContext=context)
        return bytes(resp["Plaintext"])
