"""LedgerMQ's strong signature at the gate and on a NameServer's port (issue 25, item 9).

RocketMQ's signature covers neither the request code nor a time: a captured admin topic-create
replayed as DELETE_TOPIC_IN_BROKER deleted the topic. With ``aclRequireStrongSignature=true``
that replay is refused, a strong-signed request is accepted once (nonce) and only while its
time is near the server's clock; without it, RocketMQ's signature keeps working.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ledgermq.client import Credentials
from ledgermq.namesrv import NameServer, NameServerConfig
from ledgermq.net import TcpNetwork
from ledgermq.security.acl import sign_request
from ledgermq.security.acl.strong import STRONG_SIGNATURE, sign_strong
from ledgermq.security.acl_files import AclFiles
from ledgermq.security.gate import AclGate
from ledgermq.wire import MQRequestCode, MQResponseCode, RemotingCommand
from ledgermq.wire.route import RegisterBrokerBody
from tests.namesrv.test_server import TOPICS, connect, register_ext
from tests.security.test_sign_in_throttle import ACL, StepClock

if TYPE_CHECKING:
    from pathlib import Path

ADMIN = "192.0.2.10:40000"
CREATE = MQRequestCode.UPDATE_AND_CREATE_TOPIC
DELETE = MQRequestCode.DELETE_TOPIC_IN_BROKER
TOPIC_FIELDS = {"topic": "Orders", "readQueueNums": "8", "writeQueueNums": "8", "perm": "6"}


def _gate(tmp_path: Path, clock: StepClock, *, require: bool) -> AclGate:
    (tmp_path / "plain_acl.yml").write_text(ACL)
    files = AclFiles([str(tmp_path / "plain_acl.yml")], clock)
    return AclGate(files, "broker", clock=clock, require_strong=require)


def _command(code: int, fields: dict[str, str]) -> RemotingCommand:
    return RemotingCommand(code=code, opaque=1, ext_fields=fields)


def _strong(clock: StepClock, code: int, nonce: str, offset_s: float = 0.0) -> dict[str, str]:
    return sign_strong(
        code, TOPIC_FIELDS, None, "ops-admin", "ops-admin-secret",
        now_s=clock.wall_time_s() + offset_s, nonce=nonce,
    )  # fmt: skip


def _refused(answer: RemotingCommand | None) -> str:
    assert answer is not None, "allowed"
    assert answer.code == MQResponseCode.NO_PERMISSION
    return answer.remark or ""


def test_a_captured_create_replayed_as_delete_is_refused_when_strong_is_required(
    tmp_path: Path,
) -> None:
    clock = StepClock()
    captured = sign_request(TOPIC_FIELDS, None, "ops-admin", "ops-admin-secret")
    weak = _gate(tmp_path, clock, require=False)
    assert weak.check(ADMIN, _command(DELETE, captured)) is None  # RocketMQ's: it passes
    gate = _gate(tmp_path, clock, require=True)
    remark = _refused(gate.check(ADMIN, _command(DELETE, captured)))
    assert "requires LedgerMQ's strong signature (aclRequireStrongSignature=true)" in remark
    strong = _strong(clock, CREATE, "a" * 32)
    # a strong create sent as a delete (before or after the create itself), with another
    # nonce, or with its strong signature stripped: each is refused
    assert "do not match" in _refused(gate.check(ADMIN, _command(DELETE, strong)))
    reshaped = strong | {"LmqSigNonce": "b" * 32}
    assert "do not match" in _refused(gate.check(ADMIN, _command(CREATE, reshaped)))
    assert gate.check(ADMIN, _command(CREATE, strong)) is None
    assert "replayed" in _refused(gate.check(ADMIN, _command(DELETE, strong)))
    stripped = {k: v for k, v in strong.items() if k != STRONG_SIGNATURE}
    assert "requires LedgerMQ's strong" in _refused(gate.check(ADMIN, _command(DELETE, stripped)))


def test_a_strong_request_is_accepted_once_and_only_while_fresh(tmp_path: Path) -> None:
    clock = StepClock()
    gate = _gate(tmp_path, clock, require=True)
    strong = _strong(clock, CREATE, "c" * 32)
    assert gate.check(ADMIN, _command(CREATE, strong)) is None
    assert "was used before: a replayed request" in _refused(
        gate.check(ADMIN, _command(CREATE, strong))
    )
    stale = _strong(clock, CREATE, "d" * 32, offset_s=-301)
    assert "behind this server's clock" in _refused(gate.check(ADMIN, _command(CREATE, stale)))
    ahead = _strong(clock, CREATE, "e" * 32, offset_s=301)
    assert "ahead of this server's clock" in _refused(gate.check(ADMIN, _command(CREATE, ahead)))
    assert gate.check(ADMIN, _command(CREATE, _strong(clock, CREATE, "f" * 32, -299))) is None


def test_our_client_signs_strongly_when_asked() -> None:
    plain = Credentials("ops-admin", "ops-admin-secret").sign(TOPIC_FIELDS, None, CREATE)
    assert STRONG_SIGNATURE not in plain
    strong = Credentials("ops-admin", "ops-admin-secret", strong_signature=True)
    first = strong.sign(TOPIC_FIELDS, None, CREATE)
    second = strong.sign(TOPIC_FIELDS, None, CREATE)
    assert STRONG_SIGNATURE in first
    assert first["LmqSigNonce"] != second["LmqSigNonce"]


def test_a_namesrv_that_requires_strong_signatures(tmp_path: Path) -> None:
    """``aclRequireStrongSignature=true`` in namesrv.conf: a RocketMQ-signed registration is
    refused, a strong one is taken once, and its replay as an unregistration is refused."""
    (tmp_path / "plain_acl.yml").write_text(ACL)
    config = NameServerConfig.from_properties(
        {
            "listenPort": "0",
            "aclEnable": "true",
            "aclFilePath": str(tmp_path / "plain_acl.yml"),
            "aclRequireStrongSignature": "true",
        }
    )

    async def main() -> None:
        server = NameServer(config, TcpNetwork())
        await server.start()
        try:
            client = await connect(TcpNetwork(), server)
            body, crc = RegisterBrokerBody(TOPICS).encode(compressed=False)
            ext = register_ext("10.0.0.1:10911", 0, crc=crc) | {"term": "1"}
            code = MQRequestCode.REGISTER_BROKER
            weak = sign_request(ext, body, "ops-admin", "ops-admin-secret")
            refused = await client.call(code, weak, body)
            assert refused.code == MQResponseCode.NO_PERMISSION
            assert "aclRequireStrongSignature" in (refused.remark or "")
            creds = Credentials("ops-admin", "ops-admin-secret", strong_signature=True)
            strong = creds.sign(ext, body, code)
            assert (await client.call(code, strong, body)).code == MQResponseCode.SUCCESS
            again = await client.call(code, strong, body)
            assert again.code == MQResponseCode.NO_PERMISSION
            assert "replayed" in (again.remark or "")
            replayed = await client.call(MQRequestCode.UNREGISTER_BROKER, strong, body)
            assert replayed.code == MQResponseCode.NO_PERMISSION
            assert (await client.route("T")).code == MQResponseCode.SUCCESS  # still registered
            client.conn.close()
        finally:
            await server.close()

    asyncio.run(main())
