"""Typed NameServer request headers (RocketMQ's ``header/namesrv/*RequestHeader``), parsed once.

The requests a NameServer serves that carry a header: the broker's registration, the clients'
route lookups and mqadmin's changes to the route table. The broker (``broker.registration``) and
the clients (``client._remoting``, ``client.admin``) write them with ``to_ext_fields``, the
NameServer (``namesrv.server``) reads them with ``from_ext_fields``, so each field name is
written once, as for the broker's own requests (``wire.headers``, whose field rules these
share). A missing, malformed or blank field is a ``BadRequestError`` naming it, which the
NameServer answers as it answered before these were typed (code 1 with the rule as the remark).

The broker names, cluster names and addresses are checked not blank; a topic is not checked
with the naming rules here: a route lookup or a delete of a malformed topic finds none, as in
RocketMQ, whose NameServer checks no name. GET_BROKER_CLUSTER_INFO (106),
GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206) and our GET_ROUTE_VERSION (1010) carry no header.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final, Self

from ledgermq.errors import BadRequestError
from ledgermq.wire.codes import MQRequestCode
from ledgermq.wire.headers import _Fields, _optional_text, _required_text

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "NAMESRV_HEADER_TYPES",
    "AddWritePermOfBrokerRequestHeader",
    "DeleteTopicFromNamesrvRequestHeader",
    "GetRouteInfoRequestHeader",
    "RegisterBrokerRequestHeader",
    "UnRegisterBrokerRequestHeader",
    "WipeWritePermOfBrokerRequestHeader",
]


class _NameServerHeader(_Fields):
    """A NameServer header: its names and addresses (``_NOT_BLANK``, extFields keys) must not
    be blank, since the route table is keyed by them; checked in the parse, with the message
    the NameServer answered before these headers were typed."""

    __slots__ = ()
    CODE: ClassVar[int]
    _NOT_BLANK: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """The header ``fields`` hold; ``BadRequestError`` names a field that is missing, not
        what its type needs, or blank when it names something."""
        header = super().from_ext_fields(fields)
        for key in cls._NOT_BLANK:  # present: the parse above requires them
            if not fields[key].strip():
                raise BadRequestError(f"header field {key!r} must not be empty")
        header.check()
        return header

    def check(self) -> None:
        """The header's own rules across fields (none by default)."""


@dataclass(frozen=True, slots=True)
class RegisterBrokerRequestHeader(_NameServerHeader):
    """REGISTER_BROKER (103): a broker replica announces itself and its topics (the body).
    RocketMQ's ``enableActingMaster`` is not read: a group's master is elected by its ledger."""

    CODE: ClassVar[int] = MQRequestCode.REGISTER_BROKER
    _NOT_BLANK: ClassVar[tuple[str, ...]] = ("clusterName", "brokerName", "brokerAddr")

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int
    """0 for the group's master."""
    ha_server_addr: str | None = None
    heartbeat_timeout_millis: int | None = None
    """None (absent or empty): the NameServer's default (``brokerTimeoutMillis``)."""
    compressed: bool = False
    """Whether the body is deflated."""
    body_crc32: int | None = None
    """None: the body is taken unchecked (RocketMQ's older brokers send none)."""
    term: int | None = None
    """Ours: the ledger term of a master's claim (``namesrv.routes`` refuses a stale one)."""

    def check(self) -> None:
        timeout_ms = self.heartbeat_timeout_millis
        if timeout_ms is not None and timeout_ms <= 0:
            raise BadRequestError(f"heartbeatTimeoutMillis must be positive, not {timeout_ms}")


@dataclass(frozen=True, slots=True)
class UnRegisterBrokerRequestHeader(_NameServerHeader):
    """UNREGISTER_BROKER (104): a broker replica leaves the route table."""

    CODE: ClassVar[int] = MQRequestCode.UNREGISTER_BROKER
    _NOT_BLANK: ClassVar[tuple[str, ...]] = ("clusterName", "brokerName", "brokerAddr")

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclass(frozen=True, slots=True)
class GetRouteInfoRequestHeader(_NameServerHeader):
    """GET_ROUTEINFO_BY_TOPIC (105): where a topic lives. RocketMQ 5's
    ``acceptStandardJsonOnly`` is not read: the route is always standard JSON here."""

    CODE: ClassVar[int] = MQRequestCode.GET_ROUTEINFO_BY_TOPIC

    topic: str = _required_text("topic", rule="any")
    """Looked up only: a malformed topic has no route (TOPIC_NOT_EXIST)."""


@dataclass(frozen=True, slots=True)
class DeleteTopicFromNamesrvRequestHeader(_NameServerHeader):
    """DELETE_TOPIC_IN_NAMESRV (216): forget a topic's routes, in one cluster or all."""

    CODE: ClassVar[int] = MQRequestCode.DELETE_TOPIC_IN_NAMESRV

    topic: str = _required_text("topic", rule="any")
    """Deleted only: a malformed topic is not there to delete."""
    cluster_name: str | None = _optional_text(empty_is_none=True)
    """None (absent or empty): every cluster."""


@dataclass(frozen=True, slots=True)
class WipeWritePermOfBrokerRequestHeader(_NameServerHeader):
    """WIPE_WRITE_PERM_OF_BROKER (205): route a broker group read-only (drain it)."""

    CODE: ClassVar[int] = MQRequestCode.WIPE_WRITE_PERM_OF_BROKER
    _NOT_BLANK: ClassVar[tuple[str, ...]] = ("brokerName",)

    broker_name: str


@dataclass(frozen=True, slots=True)
class AddWritePermOfBrokerRequestHeader(_NameServerHeader):
    """ADD_WRITE_PERM_OF_BROKER (327): undo WIPE_WRITE_PERM_OF_BROKER."""

    CODE: ClassVar[int] = MQRequestCode.ADD_WRITE_PERM_OF_BROKER
    _NOT_BLANK: ClassVar[tuple[str, ...]] = ("brokerName",)

    broker_name: str


NAMESRV_HEADER_TYPES: Final[Mapping[int, type[_NameServerHeader]]] = {
    header.CODE: header
    for header in (
        RegisterBrokerRequestHeader,
        UnRegisterBrokerRequestHeader,
        GetRouteInfoRequestHeader,
        DeleteTopicFromNamesrvRequestHeader,
        WipeWritePermOfBrokerRequestHeader,
        AddWritePermOfBrokerRequestHeader,
    )
}
"""Request code -> its typed header, for the codes a NameServer serves with one (the
round-trip tests read every one)."""
