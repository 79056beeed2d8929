"""Sans-I/O frame codec in RocketMQ remoting layout, and the request codes it carries."""

from ledgermq.wire.codes import LedgerRequestCode
from ledgermq.wire.frame import (
    DEFAULT_MAX_FRAME_BYTES,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    FrameDecoder,
    LanguageCode,
    RemotingCommand,
    SerializeType,
    encode_frame,
)

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "FrameDecoder",
    "LanguageCode",
    "LedgerRequestCode",
    "RemotingCommand",
    "SerializeType",
    "encode_frame",
]
