"""The erasure scans (``tests.faults.scan_for``) find a needle however it is stored: raw, compressed, base64."""

from __future__ import annotations

import base64
import gzip
import json
import zlib

from tests.faults import holds

NEEDLE = "canary-7f3a9b2c"
DOC = json.dumps({"note": f"pre {NEEDLE} post"}).encode()


def _deflate(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def test_a_needle_is_found_raw_compressed_and_in_base64() -> None:
    # Given the same document stored in each form a value may take (an event page is zlib, a token base64url)
    forms = {
        "raw": DOC,
        "zlib": zlib.compress(DOC),
        "gzip": gzip.compress(DOC),
        "deflate": _deflate(DOC),
        "base64 after a word": json.dumps({"v": "whsec_" + base64.b64encode(b"xy" + DOC).decode()}),
        "base64url mid-token": "ow2.hs256.k." + base64.urlsafe_b64encode(DOC).decode().rstrip("=") + ".mac",
        "base64 of gzip": base64.b64encode(gzip.compress(DOC)).decode(),
        "zlib of base64": zlib.compress(base64.b64encode(DOC)),
    }
    # Then every form holds the needle
    assert {name: holds(data, [NEEDLE]) for name, data in forms.items()} == {name: [NEEDLE] for name in forms}


def test_other_content_holds_no_needle() -> None:
    # Given content without it, in the same forms, Then nothing is found
    other = json.dumps({"note": "nothing to see"}).encode()
    for data in (other, zlib.compress(other), base64.b64encode(gzip.compress(other)), b"\x00\xff" * 64):
        assert holds(data, [NEEDLE, "canary"]) == []
