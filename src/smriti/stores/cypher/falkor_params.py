r"""How a FalkorDB query's parameters reach the server: the ``CYPHER name=value ...`` header
in front of the query text, written by orjson in C (:func:`params_header`).

The falkordb client writes that header value by value in Python (``stringify_param_value``,
with an ``isinstance`` chain per value): an import's 1.5M values took ~3.5 s of its client
time at 10k memories, and the NUL check walked them once more (~0.8 s), measured. orjson writes
the same literals: numbers in their shortest exact form, ``null``/``true``/``false``, strings
with ``\\``, ``\"``, ``\n``, ``\t``, ``\r``, ``\b``, ``\f`` escapes, which FalkorDB reads back
exactly (tested), non-ASCII as UTF-8. Three differences are handled. FalkorDB reads no
``\uXXXX`` escape (orjson's form of the other control characters, NUL included), so a header
holding one is not used: the client's encoding (raw characters) and the NUL refusal take over.
orjson writes a NaN or an infinity as ``null``, where the client's form makes FalkorDB refuse
the query, so a header holding a ``null`` value (a None; or the word between ``:``/``,``/``[``
and ``,``/``}``/``]`` in a text, which costs only the speed) is not used either. Cypher map
keys are identifiers, not JSON strings, so each ``"key":`` of a map becomes ```key`:`` (a ``"``
inside a JSON string is always escaped, so the pattern only matches keys).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import orjson

# A null value in orjson's output (maybe a NaN); the same letters in a text rarely look so.
_NULL = re.compile(rb"(?:^|[:,\[])null(?:$|[,}\]])")
# A map key in orjson's output: '{"key":' or ',"key":' (an unescaped quote never occurs in a string).
_MAP_KEY = re.compile(rb'([{,])"([A-Za-z_][A-Za-z0-9_]*)":')


def params_header(params: Mapping[str, Any]) -> str | None:
    """The ``CYPHER ...`` header of ``params`` (with its trailing space), or None when a value
    may not be written this way exactly (a control character, a NaN, a type orjson does not
    know): the caller then lets the client encode them."""
    parts = []
    vectors: list[bytes] = []

    def raw(value: Any) -> Any:
        # A vector is written already (Vector32); a NUL byte holds its place while the keys are
        # rewritten (orjson writes NUL in a string as \\u0000, so a raw NUL is only this mark),
        # so that the pattern does not scan the vectors' 94 % of an import's header.
        if isinstance(value, Vector32):
            vectors.append(value.data)
            return orjson.Fragment(b"\x00")
        raise TypeError(type(value).__name__)

    for key, value in params.items():
        try:
            text = orjson.dumps(value, default=raw, option=orjson.OPT_SERIALIZE_NUMPY)
        except TypeError:
            return None
        if b"\\u" in text or (b"null" in text and _NULL.search(text)):
            return None
        parts.append(b"`" + key.encode() + b"`=" + _MAP_KEY.sub(rb"\1`\2`:", text))
    header = b" ".join(parts)
    if vectors:
        pieces = header.split(b"\x00")
        header = b"".join(piece for pair in zip(pieces, [*vectors, b""], strict=True) for piece in pair)
    return "CYPHER " + header.decode() + " "


class Vector32:
    """A vector parameter as its float32 values in one JSON array (the text the client puts in
    the query's params header, through ``str``).

    The client turns a list into text float by float (3.3 ms for 1,536 floats, ~30 MB of text
    for an import batch of 1,000 memories, measured), and the NUL check walks it likewise;
    orjson writes the float32 array in C in 0.09 ms, with each value's shortest exact float32
    form (half the text). ``vecf32`` stores float32, so nothing is lost.

    Raises:
        ValueError: a NaN or infinite value (the server cannot parse them).
    """

    __slots__ = ("data",)

    def __init__(self, values: Sequence[float]) -> None:
        array = np.asarray(values, dtype=np.float32)
        if not np.isfinite(array).all():
            raise ValueError("an embedding holds NaN or infinite values")
        self.data = orjson.dumps(array, option=orjson.OPT_SERIALIZE_NUMPY)

    def __str__(self) -> str:
        return self.data.decode()


def refuse_nul(params: Mapping[str, Any]) -> None:
    for value in params.values():
        if isinstance(value, str) and "\x00" in value:
            raise ValueError("FalkorDB cannot store text containing NUL characters")
        if isinstance(value, Mapping):
            refuse_nul(value)
        elif isinstance(value, list):
            refuse_nul({str(i): item for i, item in enumerate(value)})
