"""The dispatcher's record scan (``_dispatch_scan.c``); ``message._scan_dispatch_records_py``
holds the reference."""

from collections.abc import Callable
from typing import TypeVar

_Record = TypeVar("_Record", bound=tuple[object, ...])

def scan_dispatch_records(
    buf: object,
    record_type: type[_Record],
    slow_record: Callable[[bytes | bytearray | memoryview, int], _Record],
    /,
) -> list[_Record] | None:
    """``message.scan_dispatch_records(buf)``: one ``record_type`` per record of ``buf``, the
    records off the C fast path read by ``slow_record(buf, pos)`` (which also raises the errors);
    None when ``buf`` is not bytes, bytearray or a plain memoryview of bytes."""
