"""The key index's C loop (``_key_index.c``) against its Python reference.

Two indexes of the same geometry are fed the same calls, one through ``_add_c`` and one through
``_add_py``; after every call their files must be byte for byte the same, and so must what the
calls returned or raised. Small geometries make rolls, growth and slot pages happen often;
offsets go back now and then (re-dispatches, including at exactly the last offset) and keys
repeat, are empty, or cannot be encoded.
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgermq.broker.storage import key_index as key_index_module
from ledgermq.broker.storage.key_index import KeyIndex

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.skipif(
    not key_index_module.HAVE_KEY_INDEX_C, reason="the C extension _key_index was not built"
)

_Message = tuple[str, list[str], int, int]

topics = st.sampled_from(["T", "topic-β", ""])
keys = st.lists(
    st.one_of(st.sampled_from(["", "a", "b", "uniq-1", "k" * 300]), st.text(max_size=12)),
    max_size=5,
)


@st.composite
def batches(draw: st.DrawFn) -> list[list[_Message]]:
    """Calls of ``add_many``: offsets mostly grow, sometimes repeat the last or go back."""
    phy = 0
    calls: list[list[_Message]] = []
    for _ in range(draw(st.integers(1, 6))):
        call: list[_Message] = []
        for _ in range(draw(st.integers(0, 12))):
            step = draw(st.sampled_from([0, 1, 1, 1, 37, -5, -1000]))
            phy = max(phy + step, 0)
            phy_given = -1 if draw(st.integers(0, 60)) == 0 else phy  # -1: refused by both
            timestamp = draw(st.integers(-(2**40), 2**40))
            message_keys = draw(keys)
            if draw(st.integers(0, 60)) == 0:
                message_keys.append("\ud800")  # a lone surrogate: not UTF-8 encodable
            call.append((draw(topics), message_keys, phy_given, timestamp))
        calls.append(call)
    return calls


def _files(directory: Path) -> dict[str, bytes]:
    index_dir = directory / "index"
    return {name: (index_dir / name).read_bytes() for name in sorted(os.listdir(index_dir))}


def _outcome(index: KeyIndex, call: list[_Message], use_c: bool) -> object:
    try:
        return index._add_c(list(call)) if use_c else index._add_py(list(call))
    except (ValueError, UnicodeError) as exc:
        return type(exc).__name__


@settings(max_examples=150, deadline=None)
@given(
    calls=batches(),
    records_per_file=st.sampled_from([1, 3, 8, 200]),
    slots=st.sampled_from([1, 5, 3000]),
)
def test_the_c_loop_writes_what_the_reference_writes(
    tmp_path_factory: pytest.TempPathFactory,
    calls: list[list[_Message]],
    records_per_file: int,
    slots: int,
) -> None:
    root = tmp_path_factory.mktemp("keys")
    c_dir, py_dir = root / "c", root / "py"
    with_c = KeyIndex(str(c_dir), records_per_file, slots)
    reference = KeyIndex(str(py_dir), records_per_file, slots)
    try:
        for call in calls:
            assert _outcome(with_c, call, True) == _outcome(reference, call, False)
            assert with_c.record_count == reference.record_count
            assert with_c.last_phy_offset == reference.last_phy_offset
            assert _files(c_dir) == _files(py_dir)
        for key in ("a", "b", "uniq-1"):
            for topic in ("T", "topic-β", ""):
                assert with_c.query(topic, key, 50) == reference.query(topic, key, 50)
    finally:
        with_c.close()
        reference.close()


@given(topic=st.text(max_size=40), key=st.text(max_size=300))
def test_key_hash_is_blake2b(topic: str, key: str) -> None:
    from ledgermq.broker.storage import _key_index

    try:
        data = f"{topic}#{key}".encode()
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            _key_index.key_hash(topic, key)
        return
    expected = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big", signed=True)
    assert _key_index.key_hash(topic, key) == expected


@pytest.mark.parametrize("length", [0, 1, 126, 127, 128, 129, 255, 256, 257, 1000])
def test_key_hash_at_block_boundaries(length: int) -> None:
    """ "T#" plus the key: the total crosses BLAKE2b's 128-byte blocks exactly here and there."""
    from ledgermq.broker.storage import _key_index

    key = "x" * length
    digest = hashlib.blake2b(f"T#{key}".encode(), digest_size=8).digest()
    assert _key_index.key_hash("T", key) == int.from_bytes(digest, "big", signed=True)


def test_index_run_refuses_a_short_slot_table() -> None:
    from ledgermq.broker.storage import _key_index

    with pytest.raises(ValueError, match="out of range"):
        _key_index.index_run(
            [("T", ["a"], 0, 0)], 0, 0, False, bytearray(8), bytearray(1), 3, 0, 10, -1, 0, 0,
            bytearray(),
        )  # fmt: skip
