"""The frame decoder tells a gRPC client's HTTP/2 preface from a too-long frame (wire/http2.py)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledgermq.errors import Http2PrefaceError, ProtocolError
from ledgermq.wire import FrameDecoder, RemotingCommand, encode_frame
from ledgermq.wire.http2 import (
    HTTP2_CLIENT_PREFACE,
    PREFACE_FRAME_LENGTH,
    is_http2_preface_start,
)

# what a gRPC client writes first: the preface, then its (here empty) SETTINGS frame
GRPC_OPENING = HTTP2_CLIENT_PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def test_the_preface_read_as_a_length_is_the_number_users_saw() -> None:
    assert PREFACE_FRAME_LENGTH == 1347569952


def test_a_whole_grpc_opening_is_an_http2_preface_error() -> None:
    with pytest.raises(Http2PrefaceError, match="HTTP/2 client preface"):
        FrameDecoder().feed(GRPC_OPENING)


def test_byte_at_a_time_it_is_recognised_at_the_fourth_byte() -> None:
    decoder = FrameDecoder()
    for byte in HTTP2_CLIENT_PREFACE[:3]:
        assert decoder.feed(bytes([byte])) == []
    with pytest.raises(Http2PrefaceError):
        decoder.feed(HTTP2_CLIENT_PREFACE[3:4])
    # the stream stays failed, as after any protocol error
    with pytest.raises(ProtocolError, match="unusable"):
        decoder.feed(b"")


def test_after_valid_frames_in_the_same_read() -> None:
    frame = encode_frame(RemotingCommand(code=11, opaque=1, body=b"x"))
    decoder = FrameDecoder()
    with pytest.raises(Http2PrefaceError):
        decoder.feed(frame + GRPC_OPENING)


def test_pri_then_other_bytes_is_a_plain_oversized_frame() -> None:
    """Only the preface is named so: ``PRI `` followed by something else is not HTTP/2."""
    with pytest.raises(ProtocolError, match="frame of 1347569952 bytes exceeds") as caught:
        FrameDecoder().feed(b"PRI * HTTP/1.1\r\n")
    assert not isinstance(caught.value, Http2PrefaceError)


def test_other_oversized_frames_keep_their_message() -> None:
    with pytest.raises(ProtocolError, match="frame of 2000 bytes exceeds the limit of 1024") as c:
        FrameDecoder(1024).feed(struct.pack(">i", 2000) + b"\x00" * 8)
    assert not isinstance(c.value, Http2PrefaceError)


def test_a_limit_that_would_let_the_preface_through_is_refused() -> None:
    FrameDecoder(PREFACE_FRAME_LENGTH - 1)
    with pytest.raises(ValueError, match="below 1347569952"):
        FrameDecoder(PREFACE_FRAME_LENGTH)


@given(st.binary(max_size=40))
def test_is_http2_preface_start_is_a_prefix_match_of_four_bytes_or_more(data: bytes) -> None:
    expected = len(data) >= 4 and (
        HTTP2_CLIENT_PREFACE.startswith(data) or data.startswith(HTTP2_CLIENT_PREFACE)
    )
    assert is_http2_preface_start(data) is expected
