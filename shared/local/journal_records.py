"""What the local state's journal holds: which requests change kept data (``classify``), and the framing of a
record in a segment (``frame``, ``read_segment``: length- and CRC-framed pickles, a torn tail dropped, any other
damage refused). ``shared.local.persistence`` is the journal that writes and replays them."""

from __future__ import annotations

import logging
import os
import pickle
import re
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.local.datadir import DataDirError

log = logging.getLogger("shared.local.persistence")

HEADER = struct.Struct("<II")  # payload length, CRC-32 of the payload
_KEPT_SERVICES = ("dynamodb", "s3", "secretsmanager", "sqs")
_CREDENTIAL_SERVICE = re.compile(r"Credential=[^/,\s]+/\d{8}/[^/,\s]+/([^/,\s]+)/aws4_request")
_READ_PREFIXES = ("Get", "BatchGet", "Describe", "List", "Query", "Scan", "TransactGet", "Validate")
_SQS_WRITES = frozenset(
    {
        "SendMessage",
        "SendMessageBatch",
        "DeleteMessage",
        "DeleteMessageBatch",
        "CreateQueue",
        "DeleteQueue",
        "PurgeQueue",
        "SetQueueAttributes",
        "TagQueue",
        "UntagQueue",
        "AddPermission",
        "RemovePermission",
    }
)


@dataclass(frozen=True)
class Mutation:
    service: str
    operation: str


def classify(environ: dict[str, Any]) -> Mutation | None:
    """The kept service and operation of a request that may change kept data; ``None`` for anything else (reads,
    other services, unsigned requests such as moto's own API)."""
    found = _CREDENTIAL_SERVICE.search(environ.get("HTTP_AUTHORIZATION", ""))
    if found is None or found.group(1) not in _KEPT_SERVICES:
        return None
    service = found.group(1)
    method = environ.get("REQUEST_METHOD", "GET")
    if service == "s3":
        return Mutation(service, method) if method in ("PUT", "POST", "DELETE") else None
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    operation = target.rpartition(".")[2] if target else ""
    if service == "sqs":
        if not operation:  # the query protocol: journaled whole, without the id bookkeeping of the JSON protocol
            return Mutation(service, "query") if method == "POST" else None
        return Mutation(service, operation) if operation in _SQS_WRITES else None
    if service == "dynamodb" and not target.startswith("DynamoDB_"):
        return None  # DynamoDB Streams reads
    if not operation or operation.startswith(_READ_PREFIXES):
        return None
    return Mutation(service, operation)


def frame(payload: bytes) -> bytes:
    return HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def read_segment(path: Path, *, last: bool) -> Iterator[tuple[Any, ...]]:
    """The records of one segment. A torn record at the end of the last segment (the process died inside the
    write, so its request got no answer) ends it, and is cut off the file (so the segment, no longer the last
    once this process writes, reads whole next time); anything else damaged is a ``DataDirError``."""
    data = path.read_bytes()
    offset = 0
    while offset < len(data):
        torn = len(data) - offset < HEADER.size
        if not torn:
            length, crc = HEADER.unpack_from(data, offset)
            payload = data[offset + HEADER.size : offset + HEADER.size + length]
            torn = len(payload) < length or zlib.crc32(payload) != crc
        if torn:
            if last and _only_tail(data, offset):
                log.warning(
                    "journal %s: a torn last record at byte %d was dropped (it was never answered)", path.name, offset
                )
                os.truncate(path, offset)
                return
            raise DataDirError(
                f"journal {path} is damaged at byte {offset} of {len(data)}; the folder was left as it is"
            )
        yield pickle.loads(payload)
        offset += HEADER.size + length


def _only_tail(data: bytes, offset: int) -> bool:
    """A torn write leaves at most one partial record: nothing decodable may follow it."""
    if len(data) - offset < HEADER.size:
        return True
    length, _ = HEADER.unpack_from(data, offset)
    return offset + HEADER.size + length >= len(data)
