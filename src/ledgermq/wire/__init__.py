"""Sans-I/O frame codec in RocketMQ remoting layout, and the request codes it carries."""

from ledgermq.wire.codes import LedgerRequestCode, MQRequestCode, MQResponseCode
from ledgermq.wire.ext_fields import ext_bool, ext_int, ext_str, optional_int, optional_str
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
    "MQRequestCode",
    "MQResponseCode",
    "RemotingCommand",
    "SerializeType",
    "encode_frame",
    "ext_bool",
    "ext_int",
    "ext_str",
    "optional_int",
    "optional_str",
]
