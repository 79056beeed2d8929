"""A NameServer with aclEnable: what changes routes needs an admin signature; lookups stay open."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

from ledgermq.namesrv import NameServer, NameServerConfig
from ledgermq.net import TcpNetwork
from ledgermq.security.acl import sign_request
from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.route import RegisterBrokerBody
from tests.namesrv.test_server import TOPICS, arun, connect, register_ext

if TYPE_CHECKING:
    from pathlib import Path

ACL = """
accounts:
  - accessKey: broker-admin
    secretKey: admin-secret
    admin: true
  - accessKey: app-user1
    secretKey: user-secret
    defaultTopicPerm: PUB
"""
A = "10.0.0.1:10911"


def _server(tmp_path: Path, acl: str = ACL) -> NameServer:
    (tmp_path / "plain_acl.yml").write_text(acl)
    config = NameServerConfig.from_properties(
        {
            "listenPort": "0",
            "aclEnable": "true",
            "aclFilePath": str(tmp_path / "plain_acl.yml"),
            "auditLogFile": str(tmp_path / "audit.log"),
        }
    )
    return NameServer(config, TcpNetwork())


def test_registrations_need_an_admin_signature_and_lookups_stay_open(tmp_path: Path) -> None:
    async def main() -> None:
        server = _server(tmp_path)
        await server.start()
        try:
            client = await connect(TcpNetwork(), server)
            body, crc = RegisterBrokerBody(TOPICS).encode(compressed=False)
            ext = register_ext(A, 0, crc=crc) | {"term": "1"}
            code = MQRequestCode.REGISTER_BROKER

            anonymous = await client.call(code, ext, body)
            assert anonymous.code == MQResponseCode.NO_PERMISSION
            assert "not signed" in (anonymous.remark or "")

            user = await client.call(
                code, sign_request(ext, body, "app-user1", "user-secret"), body
            )
            assert user.code == MQResponseCode.NO_PERMISSION
            assert "needs an admin account" in (user.remark or "")

            forged = sign_request(ext, body, "broker-admin", "wrong-secret")
            wrong = await client.call(code, forged, body)
            assert wrong.code == MQResponseCode.NO_PERMISSION
            assert "do not match" in (wrong.remark or "")
            assert (
                await client.route("T")
            ).code == MQResponseCode.TOPIC_NOT_EXIST  # nothing stored

            signed = sign_request(ext, body, "broker-admin", "admin-secret")
            assert (await client.call(code, signed, body)).code == MQResponseCode.SUCCESS
            assert (await client.route("T")).code == MQResponseCode.SUCCESS  # anonymous lookup
            client.conn.close()
        finally:
            await server.close()

    arun(main())
    lines = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
    assert [(line["who"], line["result"]) for line in lines] == [
        (None, "refused"),
        ("app-user1", "refused"),
        ("broker-admin", "refused"),
        ("broker-admin", "allowed"),
    ]
    assert all(line["request"] == "REGISTER_BROKER" for line in lines)
    text = (tmp_path / "audit.log").read_text()
    assert "admin-secret" not in text
    assert '"Signature"' not in text  # no extField of credentials is logged
    assert '"AccessKey"' not in text


def test_global_white_addresses_need_no_signature(tmp_path: Path) -> None:
    async def main() -> None:
        server = _server(tmp_path, ACL + "globalWhiteRemoteAddresses: [127.0.0.*]\n")
        await server.start()
        try:
            client = await connect(TcpNetwork(), server)
            body, crc = RegisterBrokerBody(TOPICS).encode(compressed=False)
            ext = register_ext(A, 0, crc=crc) | {"term": "1"}
            reply = await client.call(MQRequestCode.REGISTER_BROKER, ext, body)
            assert reply.code == MQResponseCode.SUCCESS
            client.conn.close()
        finally:
            await server.close()

    asyncio.run(main())


def test_every_request_code_sent_anonymously(tmp_path: Path) -> None:
    """The scan: what changes routes is refused without an admin signature; what RocketMQ's
    NameServer leaves open (lookups) is answered as usual, never NO_PERMISSION."""
    from ledgermq.namesrv.server import _CHECKED_CODES

    async def main() -> None:
        server = _server(tmp_path)
        await server.start()
        try:
            client = await connect(TcpNetwork(), server)
            for code in MQRequestCode:
                answer = await client.call(int(code), {"topic": "T", "brokerName": "b"})
                if code in _CHECKED_CODES:
                    assert answer.code == MQResponseCode.NO_PERMISSION, code
                else:
                    assert answer.code != MQResponseCode.NO_PERMISSION, code
            client.conn.close()
        finally:
            await server.close()

    arun(main())
