"""Secrets at rest in the data folder: what the journal and the snapshot hold of Secrets Manager is sealed.

Every mutating Secrets Manager request is journaled with its body sealed (a ``sealed`` record: AES-256-GCM under
the folder's key), and a snapshot holds moto's secrets store as one sealed blob (the store pickled, then sealed, in
the host before the snapshot child forks: the child does no cryptography). A start opens both. So no file of the
folder holds a secret's value, name or description in clear, base64 or compressed (decision 0152).

The key: 32 random bytes in ``secrets.key`` (mode 0600), made once per folder, written before the first sealed write. It is
not the manifest's KMS key: that key's material is itself kept in a Secrets Manager secret (``shared.local.kms_keys``),
which is sealed with this one. A folder with sealed data and no key is refused, never read as empty.

A deleted secret leaves nothing: the journal answers a ``DeleteSecret`` only after a snapshot without it has
replaced the segments that held its sealed value (``shared.local.persistence``).
"""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from shared.local.datadir import DataDir, DataDirError, fsync_dir

KEY_FILE = "secrets.key"
MAGIC = b"OWS1"
_AAD = b"openwop-serverless local secrets"
_NONCE = 12
SEALED_SERVICE = "secretsmanager"
"""The kept service whose requests and store are sealed."""


class Sealer:
    """Seals and opens with one folder's key."""

    def __init__(self, key: bytes, *, unkept: Path | None = None) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead = AESGCM(key)
        self._key = key
        self._unkept = unkept
        """Where a new key goes once the folder's journal has been read without meeting a sealed value."""

    @classmethod
    def for_folder(cls, data_dir: DataDir) -> Sealer:
        """The folder's key; a new one when it has none (written by ``keep``, once recovery met no sealed value),
        refused when a snapshot of this format (its secrets are sealed) is there without it."""
        path = data_dir.path / KEY_FILE
        if path.exists():
            key = path.read_bytes()
            if len(key) != 32:
                raise DataDirError(f"{path} is not a key this host wrote; the folder was left as it is")
            return cls(key)
        if data_dir.written_format >= 2 and data_dir.snapshot.exists():
            raise _missing(data_dir.path)
        return cls(os.urandom(32), unkept=path)

    def keep(self) -> None:
        """Write a new key (fsynced, mode 0600) before anything is sealed with it."""
        path, self._unkept = self._unkept, None
        if path is None:
            return
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, "wb") as f:
            f.write(self._key)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)

    def seal(self, plain: bytes) -> bytes:
        if self._unkept is not None:
            self.keep()
        nonce = os.urandom(_NONCE)
        return MAGIC + nonce + self._aead.encrypt(nonce, plain, _AAD)

    def open(self, sealed: bytes) -> bytes:
        from cryptography.exceptions import InvalidTag

        if not sealed.startswith(MAGIC):
            raise DataDirError("a sealed value of the data folder is damaged; the folder was left as it is")
        nonce = sealed[len(MAGIC) : len(MAGIC) + _NONCE]
        try:
            return bytes(self._aead.decrypt(nonce, sealed[len(MAGIC) + _NONCE :], _AAD))
        except InvalidTag as exc:
            if self._unkept is not None:
                raise _missing(self._unkept.parent) from exc
            raise DataDirError(
                f"a sealed value of the data folder does not open with its {KEY_FILE}; the folder was left as it is"
            ) from exc


def _missing(folder: Path) -> DataDirError:
    return DataDirError(
        f"data folder {folder} holds sealed secrets but its key {KEY_FILE} is missing; put the key back, or start "
        "with another --data-dir or --ephemeral (the folder was left as it is)"
    )


def seal_state(state: dict[str, Any], sealer: Sealer, dispatch: dict[Any, Callable[[Any], Any]]) -> dict[str, Any]:
    """The kept containers with the secrets store pickled and sealed (called in the host, under the journal's
    lock: the snapshot child only writes bytes)."""
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=5)
    pickler.dispatch_table = dispatch  # type: ignore[assignment]
    pickler.dump(state[SEALED_SERVICE])
    return {**state, SEALED_SERVICE: sealer.seal(out.getvalue())}


def open_state(state: dict[str, Any], sealer: Sealer) -> dict[str, Any]:
    """A loaded snapshot's containers with the secrets store opened (a format-1 snapshot's is already clear)."""
    held = state[SEALED_SERVICE]
    if isinstance(held, bytes):
        return {**state, SEALED_SERVICE: pickle.loads(sealer.open(held))}
    return state


def opened(folder: Path) -> Iterator[tuple[str, bytes]]:
    """Every sealed value of a data folder, opened with its key: (file name, plaintext). For tests and an
    operator's audit (what a deleted secret left: nothing)."""
    import zlib

    from shared.local.journal_records import HEADER
    from shared.local.snapshots import read_snapshot

    sealer = Sealer((folder / KEY_FILE).read_bytes())
    for path in sorted(folder.glob("journal-*.log")):
        data, offset = path.read_bytes(), 0
        while offset + HEADER.size <= len(data):  # a record being written (the host is live) ends the segment
            length, crc = HEADER.unpack_from(data, offset)
            payload = data[offset + HEADER.size : offset + HEADER.size + length]
            if len(payload) < length or zlib.crc32(payload) != crc:
                break
            record = pickle.loads(payload)
            if record[0] == "sealed":
                yield path.name, sealer.open(record[2])
            offset += HEADER.size + length
    loaded = read_snapshot(folder / "snapshot.pickle")
    if loaded is not None and isinstance(loaded[1][SEALED_SERVICE], bytes):
        yield "snapshot.pickle", sealer.open(loaded[1][SEALED_SERVICE])
