"""RocketMQ binary-header frames (``_frame_codec.c``); ``wire.frame`` holds the references
(``_parse_binary_header`` in ``FrameDecoder``'s loop, ``_encode_binary_head_py``)."""

from collections.abc import Mapping

from ledgermq.wire.frame import RemotingCommand

ABI: int
"""4 since ``decode_frames`` takes the header limits and ``max_commands`` and the body functions
exist; ``wire.frame`` uses no other build."""

def decode_frames(
    data: bytes | bytearray | memoryview,
    pos: int,
    max_frame_bytes: int,
    max_header_bytes: int,
    max_ext_fields: int,
    max_commands: int,
    commands: list[RemotingCommand],
    command_type: type[RemotingCommand],
    language_names: tuple[str, ...],
    /,
) -> int:
    """Append the whole binary-header frames of ``data`` from ``pos`` to ``commands`` until it
    holds ``max_commands``; where it stopped (the end, that count, or the first frame it leaves
    to the Python loop)."""

def encode_head(
    code: int,
    language: int,
    version: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext_fields: Mapping[str, str],
    body_length: int,
    /,
) -> bytes | None:
    """The length prefix, header word and binary header; None: the reference decides."""

def new_body(size: int, /) -> bytes:
    """A ``bytes`` of ``size`` bytes whose contents are not set yet, for ``fill_body``."""

def fill_body(body: bytes, offset: int, data: bytes | bytearray | memoryview, /) -> None:
    """Copy ``data`` into ``body`` (from ``new_body``, seen by nobody else) at ``offset``."""
