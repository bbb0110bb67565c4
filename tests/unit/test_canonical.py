"""Canonical JSON is JCS (RFC 8785): argsHash and fixture matching agree with any other JCS host."""

from __future__ import annotations

import hashlib
import json
import struct

import pytest

from shared.engine.canonical import args_hash, canonical, same_json


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_canonical_writes_whole_doubles_as_integers_so_1_0_and_1_match():
    # Given the same argument sent as 1.0 by the source and as 1 by a changed agent
    # Then both canonicalize to 1, hash alike, and match
    assert canonical(1.0) == canonical(1) == "1"
    assert canonical({"n": 1.0}) == '{"n":1}'
    assert args_hash({"n": 1.0}) == args_hash({"n": 1}) == _sha('{"n":1}')
    assert same_json({"n": 1.0}, {"n": 1})
    # but a different number, a string or a boolean does not
    assert not same_json({"n": 1.5}, {"n": 1})
    assert not same_json({"n": "1"}, {"n": 1})
    assert not same_json({"n": True}, {"n": 1})


def test_canonical_writes_negative_zero_as_0():
    assert canonical(-0.0) == "0"
    assert canonical([-0.0, 0.0, 0]) == "[0,0,0]"
    assert same_json(-0.0, 0)


def test_canonical_orders_keys_by_utf16_code_units_rfc8785_3_2_3():
    # Given RFC 8785 §3.2.3's sorting example, parsed from JSON text (the emoji arrives as a surrogate pair)
    doc = json.loads(
        '{"\\u20ac": "Euro Sign", "\\r": "Carriage Return", "\\ufb33": "Hebrew Letter Dalet With Dagesh",'
        ' "1": "One", "\\ud83d\\ude00": "Emoji: Grinning Face", "\\u0080": "Control",'
        ' "\\u00f6": "Latin Small Letter O With Diaeresis"}'
    )
    # Then the keys come in UTF-16 order: U+1F600 (D83D DE00) sorts before U+FB33, unlike code-point order
    keys = list(json.loads(canonical(doc)))
    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]
    assert sorted(doc) != keys  # what the home-made canonical form (sort_keys) produced
    # and the values are written as UTF-8, unescaped
    assert canonical({"\U0001f600": "\u20ac"}).encode("utf-8") == b'{"\xf0\x9f\x98\x80":"\xe2\x82\xac"}'


def test_canonical_matches_the_rfc8785_3_2_4_example():
    # Given the example input of RFC 8785 §3.2.4 (numbers, literals, escapes)
    text = (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}'
    )
    # Then the output is the RFC's, byte for byte
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonical(json.loads(text)) == expected


@pytest.mark.parametrize(
    ("ieee_hex", "expected"),
    [  # RFC 8785 Appendix B
        ("0000000000000000", "0"),
        ("8000000000000000", "0"),
        ("0000000000000001", "5e-324"),
        ("8000000000000001", "-5e-324"),
        ("7fefffffffffffff", "1.7976931348623157e+308"),
        ("4340000000000000", "9007199254740992"),
        ("c340000000000000", "-9007199254740992"),
        ("4430000000000000", "295147905179352830000"),
        ("44b52d02c7e14af5", "9.999999999999997e+22"),
        ("44b52d02c7e14af6", "1e+23"),
        ("444b1ae4d6e2ef4f", "999999999999999900000"),
        ("444b1ae4d6e2ef50", "1e+21"),
        ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
        ("3eb0c6f7a0b5ed8d", "0.000001"),
        ("41b3de4355555553", "333333333.3333332"),
    ],
)
def test_canonical_numbers_follow_rfc8785_appendix_b(ieee_hex: str, expected: str):
    value = struct.unpack(">d", bytes.fromhex(ieee_hex))[0]
    assert canonical(value) == expected


def test_large_integers_are_exact_and_never_conflated():
    # Given integers at and beyond JCS's integer domain (I-JSON: ±(2**53 - 1))
    assert canonical(2**53 - 1) == "9007199254740991"
    assert canonical(-(2**53 - 1)) == "-9007199254740991"
    # Then beyond it they are written as exact digits, also inside containers with JCS key order
    assert canonical(2**64) == "18446744073709551616"
    assert canonical({"\ufb33": 1, "\U0001f600": [2**53 + 1, -(2**70)], "a": 1.0}) == (
        '{"a":1,"\U0001f600":[9007199254740993,-1180591620717411303424],"\ufb33":1}'
    )
    # and two different large integers never match (a double would round both to 2**53)
    assert not same_json({"id": 2**53 + 1}, {"id": 2**53})
    assert args_hash({"id": 2**53 + 1}) != args_hash({"id": 2**53})
    assert args_hash({"id": 2**64}) == _sha('{"id":18446744073709551616}')


def test_args_hash_of_plain_ascii_args_is_unchanged():
    # Given the shape of every conformance fixture's tool args (ASCII keys, strings and small integers)
    args = {"op": "inc", "key": "k-1", "n": 3, "nested": {"b": [1, 2], "a": None}}
    # Then the canonical text is the sorted, whitespace-free form the recorded histories were hashed with
    assert canonical(args) == '{"key":"k-1","n":3,"nested":{"a":null,"b":[1,2]},"op":"inc"}'
    assert args_hash(args) == _sha('{"key":"k-1","n":3,"nested":{"a":null,"b":[1,2]},"op":"inc"}')


def test_values_jcs_cannot_represent_are_refused():
    with pytest.raises(ValueError):
        canonical(float("nan"))
    with pytest.raises(ValueError):
        canonical({"x": float("inf")})
