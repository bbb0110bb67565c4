"""The BlobStore port on S3: large documents (run facts, definitions, events, tool-call records) and derived
fixture copies, written with SSE-S3."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from shared.storage.ddb import dump, error_code


class S3BlobStore:
    def __init__(self, client: Any, bucket: str) -> None:
        self._c = client
        self._b = bucket

    def put_json(self, key: str, value: Any) -> None:
        self.put_bytes(key, dump(value).encode("utf-8"), "application/json")

    def get_json(self, key: str) -> Any | None:
        try:
            resp = self._c.get_object(Bucket=self._b, Key=key)
        except ClientError as exc:
            if error_code(exc) in ("NoSuchKey", "404"):
                return None
            raise
        return json.loads(resp["Body"].read())

    def put_bytes(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        self._c.put_object(Bucket=self._b, Key=key, Body=data, ContentType=content_type, ServerSideEncryption="AES256")

    def get_range(self, key: str, start: int, end: int) -> bytes | None:
        """One ranged GetObject: bytes ``[start, end)``, fewer at the object's end, none past it."""
        if end <= start:
            return b""
        try:
            resp = self._c.get_object(Bucket=self._b, Key=key, Range=f"bytes={start}-{end - 1}")
        except ClientError as exc:
            if error_code(exc) in ("NoSuchKey", "404"):
                return None
            if error_code(exc) == "InvalidRange":
                return b""
            raise
        data: bytes = resp["Body"].read()
        return data

    def copy(self, source_key: str, key: str) -> bool:
        try:
            self._c.copy_object(
                Bucket=self._b,
                Key=key,
                CopySource={"Bucket": self._b, "Key": source_key},
                ServerSideEncryption="AES256",
            )
        except ClientError as exc:
            if error_code(exc) in ("NoSuchKey", "404"):
                return False
            raise
        return True

    def list_keys(self, prefix: str) -> list[str]:
        keys: list[str] = []
        kwargs: dict[str, Any] = {"Bucket": self._b, "Prefix": prefix}
        while True:
            resp = self._c.list_objects_v2(**kwargs)
            keys.extend(o["Key"] for o in resp.get("Contents", []))
            if not resp.get("IsTruncated"):
                return keys
            kwargs["ContinuationToken"] = resp["NextContinuationToken"]

    def delete_prefix(self, prefix: str) -> int:
        keys = self.list_keys(prefix)
        for i in range(0, len(keys), 1000):
            self._c.delete_objects(
                Bucket=self._b, Delete={"Objects": [{"Key": k} for k in keys[i : i + 1000]], "Quiet": True}
            )
        return len(keys)
