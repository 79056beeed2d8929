"""White remote addresses (RocketMQ's ``RemoteAddressStrategyFactory``).

A pattern is one of:

- empty: matches nothing (an account without ``whiteRemoteAddress``);
- ``*`` or ``*.*.*.*``: matches every address;
- an IPv4 address whose segments are each a number, ``*``, a range ``a-b`` or, in the last one,
  a set ``{a,b,c}``: ``192.168.1.*``, ``192.168.1.10-20``, ``192.168.0.{1,2}``;
- several IPv4 addresses separated by commas: ``192.168.1.1,192.168.1.2``;
- one IPv6 address, matched exactly (after normalisation).

A malformed pattern is an error when the file is read, not a pattern that silently matches
nothing.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass

__all__ = ["AddressPattern", "parse_address_pattern"]

_Segment = tuple[int, int] | frozenset[int]
"""An inclusive range of values, or a set of values."""


@dataclass(frozen=True, slots=True)
class AddressPattern:
    """A parsed white-address pattern; ``matches`` takes a client's IP address (no port)."""

    text: str
    everything: bool = False
    ipv4: tuple[tuple[_Segment, ...], ...] = ()
    """Each alternative is four segments."""
    ipv6: frozenset[ipaddress.IPv6Address] = frozenset()

    def matches(self, address: str) -> bool:
        if self.everything:
            return True
        if not self.ipv4 and not self.ipv6:
            return False  # the empty pattern: nothing to parse the address for
        parsed = _parse(address)
        if parsed is None:
            return False
        if isinstance(parsed, ipaddress.IPv6Address):
            return parsed in self.ipv6
        return any(
            all(_segment_has(segment, value) for segment, value in zip(alt, parsed, strict=True))
            for alt in self.ipv4
        )


@functools.lru_cache(maxsize=4096)
def _parse(address: str) -> tuple[int, ...] | ipaddress.IPv6Address | None:
    """An IPv4 address's four numbers (IPv4-mapped IPv6 too), an IPv6 address, or None.

    Cached: every request of a connection asks about the same few client addresses."""
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        mapped = ip.ipv4_mapped
        if mapped is None:
            return ip
        ip = mapped
    return tuple(int(p) for p in str(ip).split("."))


def _segment_has(segment: _Segment, value: int) -> bool:
    if isinstance(segment, frozenset):
        return value in segment
    low, high = segment
    return low <= value <= high


def _number(text: str, pattern: str) -> int:
    if not text.isdigit() or int(text) > 255:
        raise ValueError(f"white address {pattern!r}: {text!r} is not a number from 0 to 255")
    return int(text)


def _segment(text: str, last: bool, pattern: str) -> _Segment:
    if text == "*":
        return (0, 255)
    if text.startswith("{") and text.endswith("}"):
        if not last:
            raise ValueError(
                f"white address {pattern!r}: a {{set}} is allowed in the last part only"
            )
        values = [_number(v.strip(), pattern) for v in text[1:-1].split(",")]
        return frozenset(values)
    if "-" in text:
        low_text, _, high_text = text.partition("-")
        low, high = _number(low_text, pattern), _number(high_text, pattern)
        if low > high:
            raise ValueError(f"white address {pattern!r}: the range {text!r} is empty")
        return (low, high)
    value = _number(text, pattern)
    return (value, value)


def _ipv4(text: str, pattern: str) -> tuple[_Segment, ...]:
    parts = text.split(".")
    if len(parts) != 4:
        raise ValueError(f"white address {pattern!r}: {text!r} does not have four parts")
    return tuple(_segment(p.strip(), i == 3, pattern) for i, p in enumerate(parts))


def parse_address_pattern(text: str | None) -> AddressPattern:
    """Parse one ``whiteRemoteAddress`` (or one entry of ``globalWhiteRemoteAddresses``).

    Raises:
        ValueError: the pattern is malformed (the message quotes it).
    """
    pattern = (text or "").strip()
    if not pattern:
        return AddressPattern(pattern)
    if pattern in {"*", "*.*.*.*", "*:*:*:*:*:*:*:*"}:
        return AddressPattern(pattern, everything=True)
    if ":" in pattern:
        try:
            ip = ipaddress.IPv6Address(pattern.strip("[]"))
        except ValueError:
            raise ValueError(f"white address {pattern!r} is not an IPv6 address") from None
        return AddressPattern(pattern, ipv6=frozenset({ip}))
    if "{" in pattern:
        return AddressPattern(pattern, ipv4=(_ipv4(pattern, pattern),))
    return AddressPattern(
        pattern, ipv4=tuple(_ipv4(part.strip(), pattern) for part in pattern.split(","))
    )
