"""The broker's REGISTER_BROKER and UNREGISTER_BROKER are written with the NameServer's typed
headers (``wire.namesrv_headers``, issue 26 item 2): what ``NameServerRegistrar`` sends is what
the NameServer's parse reads, field for field."""

from __future__ import annotations

import asyncio
import zlib
from types import SimpleNamespace
from typing import Any

from ledgermq.broker.registration import NameServerRegistrar
from ledgermq.wire import MQRequestCode, RemotingCommand
from ledgermq.wire.namesrv_headers import (
    RegisterBrokerRequestHeader,
    UnRegisterBrokerRequestHeader,
)
from ledgermq.wire.route import DataVersion, RegisterBrokerBody, TopicConfig

ADDR = "10.0.0.1:10911"


class _Pool:
    """A ``ConnectionPool`` that records what it is asked to send."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, RemotingCommand]] = []

    async def request(self, address: str, command: RemotingCommand, timeout_s: float) -> Any:
        self.sent.append((address, command))
        return command.response(0)


def _registrar(pool: _Pool) -> NameServerRegistrar:
    config = SimpleNamespace(
        broker_name="broker-a",
        address=ADDR,
        broker_cluster_name="c1",
        acl_access_key="",
        namesrv_addr=["ns1:9876", "ns2:9876"],
    )
    metadata = SimpleNamespace(topics={"T": TopicConfig("T", 4, 4)}, topic_version=DataVersion())
    state = SimpleNamespace(config=config, metadata=metadata, broker_id=0)
    ledger = SimpleNamespace(core=SimpleNamespace(term=7))
    return NameServerRegistrar(state, ledger, pool)  # type: ignore[arg-type]


def test_the_registration_is_the_typed_header() -> None:
    command = _registrar(_Pool())._command()
    assert command.code == MQRequestCode.REGISTER_BROKER
    header = RegisterBrokerRequestHeader.from_ext_fields(command.ext_fields)
    assert header == RegisterBrokerRequestHeader(
        "broker-a", ADDR, "c1", 0, ADDR, 120_000, False, zlib.crc32(command.body) & 0x7FFFFFFF, 7
    )
    assert command.ext_fields == header.to_ext_fields()
    body = RegisterBrokerBody.decode(
        command.body, compressed=header.compressed, expected_crc32=header.body_crc32
    )
    assert set(body.topic_configs) == {"T"}


def test_the_unregistration_is_the_typed_header() -> None:
    pool = _Pool()
    asyncio.run(_registrar(pool).unregister_all())
    assert [address for address, _ in pool.sent] == ["ns1:9876", "ns2:9876"]
    for _, command in pool.sent:
        assert command.code == MQRequestCode.UNREGISTER_BROKER
        assert UnRegisterBrokerRequestHeader.from_ext_fields(
            command.ext_fields
        ) == UnRegisterBrokerRequestHeader("broker-a", ADDR, "c1", 0)
