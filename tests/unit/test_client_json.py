"""The SDK reads response documents with pydantic-core's JSON parser where it can and the
standard library's otherwise: the values are the standard library's in every case."""

from __future__ import annotations

import json
import math
import random
import struct
from typing import Any

import pytest

from itbench.client import ITBenchAPIError, _decode_body, _loads


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return math.copysign(1.0, a) == math.copysign(1.0, b) and a == b
    return bool(a == b)


DOCUMENTS = [
    b'{"kind":"Pod","items":[{"metadata":{"name":"cart-1","labels":{"app":"cart"}}}]}',
    b"[1, 1.0, -0.0, 1e400, -1e400, 1E5, 0.1e-310, 12345678901234567890123456789]",
    b'{"a": 1, "a": 2}',
    b'"\\u00e9\\u65e5\\ud83d\\ude00"',
    b'"\\ud800"',  # a lone surrogate: the standard library's reading
    b"[NaN, Infinity, -Infinity]",
    '{"text": "caf\u00e9"}'.encode("utf-16"),  # another encoding, with its BOM
    b"  {}  ",
    b'\xef\xbb\xbf{"a": 1}',  # a UTF-8 BOM
    b"null",
]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_a_document_reads_as_the_standard_library_reads_it(document: bytes) -> None:
    assert _same(_loads(document), json.loads(document))


def test_floats_read_exactly_as_the_standard_library_reads_them() -> None:
    rng = random.Random(7)
    values = []
    while len(values) < 3000:
        value = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
        if math.isfinite(value):
            values.append(value)
    texts = [f"{v!r}" for v in values] + [f"{v:.6g}" for v in values] + [f"{v:.3e}" for v in values]
    document = ("[" + ",".join(texts) + "]").encode()
    assert _same(_loads(document), json.loads(document))


@pytest.mark.parametrize("document", [b"{", b"[1,]", b"", b"{'a': 1}"])
def test_a_broken_document_fails_as_the_standard_library_fails(document: bytes) -> None:
    with pytest.raises(ValueError) as ours:
        _loads(document)
    with pytest.raises(ValueError) as theirs:
        json.loads(document)
    assert str(ours.value) == str(theirs.value)


def test_a_problem_that_is_no_json_is_still_a_problem() -> None:
    with pytest.raises(ITBenchAPIError) as raised:
        _decode_body(502, b"<html>bad gateway</html>")
    assert raised.value.status == 502
    assert "bad gateway" in raised.value.detail
