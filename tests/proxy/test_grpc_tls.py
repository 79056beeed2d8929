"""TLS on the gRPC door (issue 17): the broker's ``tls.*`` settings on ``grpcServerPort``.

An in-process 3-replica group (``test_servicer.Group``) whose remoting, ledger and gRPC ports all
use the session's throw-away certificates (``tls_certificates``), reached with grpcio's secure
channel and our v2 stubs: ``enforcing`` serves TLS clients that trust our CA and refuses plaintext
ones and ones that trust another CA; mutual TLS refuses a client without a certificate; the ACL's
``authorization`` header is still checked over TLS; ``permissive`` serves plaintext and TLS on the
one port (``proxy.unify``) and the servicer sees each client's own address. The settings' errors
(``proxy.tls``) are checked without a broker.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio
import pytest

from ledgermq.errors import ConfigError
from ledgermq.namesrv import NameServer, NameServerConfig
from ledgermq.net.tls import ClientAuth, TlsMode, TlsServerConfig, tls_server_from_properties
from ledgermq.proxy.protocol import definition_pb2, service_pb2, service_pb2_grpc
from ledgermq.proxy.route_answers import address_scheme
from ledgermq.proxy.tls import door_tls
from ledgermq.proxy.unify import PortUnifier
from tests.proxy.test_grpc_acl import ACL, _metadata
from tests.proxy.test_servicer import Group, _message, _topic_with_route

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from ledgermq.testing.tls_certs import CertificateSet

pytestmark = pytest.mark.timeout(120)

Code = definition_pb2.Code
_REFUSED_WITHIN_S = 5.0
"""How long a refused channel may take to fail its call (it fails at the handshake)."""


def _tls_settings(certs: CertificateSet, mode: str = "enforcing", **more: str) -> dict[str, str]:
    return {
        "tls.server.mode": mode,
        "tls.server.certPath": str(certs.server_cert),
        "tls.server.keyPath": str(certs.server_key),
        "tls.server.trustCertPath": str(certs.ca),
        "tls.client.trustCertPath": str(certs.ca),
        **more,
    }


def _run(tmp: Path, test: Callable[[Group], Awaitable[None]], **settings: Any) -> None:
    """``test_servicer._run`` with the NameServer on the brokers' TLS settings too (a replica
    whose ports enforce TLS dials its NameServers with TLS)."""

    async def main() -> None:
        group = Group(tmp, **settings)
        host, _, port = group.namesrv_addr.rpartition(":")
        tls = tls_server_from_properties(settings.get("tls", {}))
        group.namesrv = NameServer(
            NameServerConfig(listen_host=host, listen_port=int(port), tls=tls)
        )
        try:
            await group.start()
            await test(group)
        finally:
            await group.close()

    asyncio.run(asyncio.wait_for(main(), 80))


def _secure_stub(
    address: str | None,
    ca: Path,
    client: tuple[Path, Path] | None = None,
) -> tuple[grpc.aio.Channel, service_pb2_grpc.MessagingServiceAsyncStub]:
    """A TLS channel that trusts ``ca`` (and shows ``client``'s certificate and key)."""
    assert address is not None
    credentials = grpc.ssl_channel_credentials(
        root_certificates=ca.read_bytes(),
        private_key=None if client is None else client[1].read_bytes(),
        certificate_chain=None if client is None else client[0].read_bytes(),
    )
    channel = grpc.aio.secure_channel(address, credentials)
    return channel, service_pb2_grpc.MessagingServiceStub(channel)


def _plain_stub(
    address: str | None,
) -> tuple[grpc.aio.Channel, service_pb2_grpc.MessagingServiceAsyncStub]:
    assert address is not None
    channel = grpc.aio.insecure_channel(address)
    return channel, service_pb2_grpc.MessagingServiceStub(channel)


def _route(topic: str) -> service_pb2.QueryRouteRequest:
    request = service_pb2.QueryRouteRequest()
    request.topic.name = topic
    return request


async def _refused(stub: service_pb2_grpc.MessagingServiceAsyncStub, topic: str) -> grpc.StatusCode:
    """The gRPC status of a QueryRoute that must not get through (it must not answer)."""
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await stub.QueryRoute(_route(topic), timeout=_REFUSED_WITHIN_S)
    return failed.value.code()


async def _stored(group: Group, topic: str) -> int:
    master = await group.master()
    assert master.services is not None
    return sum(row.max_offset for row in master.services.admin.topic_stats(topic))


def test_enforcing_serves_tls_clients_only(
    tmp_path: Path, tls_certificates: CertificateSet
) -> None:
    certs = tls_certificates

    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "Secure")
        channel, stub = _secure_stub(master.grpc_address, certs.ca)
        plain_channel, plain = _plain_stub(master.grpc_address)
        wrong_channel, wrong_ca = _secure_stub(master.grpc_address, certs.other_ca)
        try:
            route = await stub.QueryRoute(_route("Secure"))
            assert route.status.code == Code.OK, route.status
            # The route names the replicas' gRPC endpoints (the master's first) by the address
            # their certificates name.
            endpoints = {
                (a.host, a.port, q.broker.endpoints.scheme)
                for q in route.message_queues
                for a in q.broker.endpoints.addresses
            }
            doors = {("127.0.0.1", b.config.grpc_server_port, definition_pb2.IPv4)
                     for b in group.brokers.values()}  # fmt: skip
            assert endpoints <= doors
            (first,) = route.message_queues[0].broker.endpoints.addresses
            assert (first.host, first.port) == ("127.0.0.1", master.config.grpc_server_port)
            sent = await stub.SendMessage(
                service_pb2.SendMessageRequest(messages=[_message("Secure", "ID-TLS", b"sealed")])
            )
            assert sent.status.code == Code.OK, sent.status
            assert await _refused(plain, "Secure") == grpc.StatusCode.UNAVAILABLE
            assert await _refused(wrong_ca, "Secure") == grpc.StatusCode.UNAVAILABLE
        finally:
            for c in (channel, plain_channel, wrong_channel):
                await c.close()
        assert await _stored(group, "Secure") == 1

    _run(tmp_path, test, tls=_tls_settings(certs))


def test_mutual_tls_refuses_a_client_without_a_certificate(
    tmp_path: Path, tls_certificates: CertificateSet
) -> None:
    certs = tls_certificates

    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "Mutual")
        anonymous_channel, anonymous = _secure_stub(master.grpc_address, certs.ca)
        channel, stub = _secure_stub(
            master.grpc_address, certs.ca, (certs.client_cert, certs.client_key)
        )
        try:
            assert await _refused(anonymous, "Mutual") == grpc.StatusCode.UNAVAILABLE
            route = await stub.QueryRoute(_route("Mutual"))
            assert route.status.code == Code.OK, route.status
        finally:
            await anonymous_channel.close()
            await channel.close()

    _run(tmp_path, test, tls=_tls_settings(certs, **{"tls.server.need.client.auth": "require"}))


def test_the_acl_is_still_checked_over_tls(
    tmp_path: Path, tls_certificates: CertificateSet
) -> None:
    certs = tls_certificates
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)

    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "GrpcAcl")
        channel, stub = _secure_stub(master.grpc_address, certs.ca)
        try:
            anonymous = await stub.QueryRoute(_route("GrpcAcl"))
            assert anonymous.status.code == Code.UNAUTHORIZED
            forged = await stub.QueryRoute(
                _route("GrpcAcl"), metadata=_metadata("grpc-writer", "nope")
            )
            assert forged.status.code == Code.UNAUTHORIZED
            unsigned = await stub.SendMessage(
                service_pb2.SendMessageRequest(messages=[_message("GrpcAcl", "ID-0", b"x")])
            )
            assert unsigned.status.code == Code.UNAUTHORIZED
            signed = await stub.SendMessage(
                service_pb2.SendMessageRequest(messages=[_message("GrpcAcl", "ID-1", b"y")]),
                metadata=_metadata("grpc-writer", "writer-secret"),
            )
            assert signed.status.code == Code.OK, signed.status
        finally:
            await channel.close()
        assert await _stored(group, "GrpcAcl") == 1

    _run(tmp_path, test, tls=_tls_settings(certs), acl_enable=True, acl_file_path=str(acl))


def test_permissive_serves_plaintext_and_tls_on_one_port(
    tmp_path: Path, tls_certificates: CertificateSet
) -> None:
    certs = tls_certificates
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    audit = tmp_path / "audit.log"

    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "Both")
        tls_channel, tls = _secure_stub(master.grpc_address, certs.ca)
        plain_channel, plain = _plain_stub(master.grpc_address)
        try:
            for stub, message_id in ((tls, "ID-TLS"), (plain, "ID-PLAIN")):
                sent = await stub.SendMessage(
                    service_pb2.SendMessageRequest(
                        messages=[_message("Both", message_id, b"either way")]
                    ),
                    metadata=_metadata("grpc-writer", "writer-secret"),
                )
                assert sent.status.code == Code.FORBIDDEN  # ACL: no PUB on Both
            hops = _unifier_hops(master)  # both connections are still open
        finally:
            await tls_channel.close()
            await plain_channel.close()
        # Refusals are audited with each client's own address, not the door's loopback hop to
        # grpcio (which is what grpcio itself reports as the peer).
        remotes = {json.loads(line)["from"] for line in audit.read_text().splitlines()}
        assert len(hops) == 2, hops
        assert remotes == set(hops.values()), (remotes, hops)
        assert not remotes & set(hops), (remotes, hops)

    _run(
        tmp_path,
        test,
        tls=_tls_settings(certs, "permissive"),
        acl_enable=True,
        acl_file_path=str(acl),
        audit_log_file=str(audit),
    )


def _unifier_hops(master: Any) -> dict[str, str]:
    """The permissive door's open connections: loopback hop to grpcio -> the client."""
    unifier = master.grpc_door._unifier
    assert isinstance(unifier, PortUnifier)
    return dict(unifier._peers)


def test_the_unifier_routes_by_first_byte_and_knows_the_real_peer() -> None:
    """Two fake listeners stand for grpcio's; the unifier must hand a connection that opens
    with a TLS handshake byte to the first and anything else to the second, and map each
    loopback hop back to the client that made it."""

    async def main() -> None:
        seen: dict[str, tuple[bytes, str]] = {}

        def listener(name: str) -> Any:
            async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                first = await reader.readexactly(3)
                host, port = writer.get_extra_info("peername")[:2]
                seen[name] = (first, f"{host}:{port}")
                writer.write(name.encode())
                await writer.drain()
                writer.close()

            return serve

        tls_server = await asyncio.start_server(listener("tls"), "127.0.0.1", 0)
        plain_server = await asyncio.start_server(listener("plain"), "127.0.0.1", 0)
        unifier = PortUnifier(
            tls_server.sockets[0].getsockname()[1], plain_server.sockets[0].getsockname()[1]
        )
        await unifier.bind("127.0.0.1", 0)
        await unifier.start()
        try:
            for opening, expected in ((b"\x16\x03\x01", "tls"), (b"PRI", "plain")):
                reader, writer = await asyncio.open_connection("127.0.0.1", unifier.port)
                client = writer.get_extra_info("sockname")
                writer.write(opening)
                assert await reader.read() == expected.encode()
                first, hop = seen[expected]
                assert first == opening
                writer.close()
                await writer.wait_closed()
                # Mapped while the connection lived; forgotten once it is gone.
                assert hop != f"{client[0]}:{client[1]}"
            assert unifier.real_peer("127.0.0.1:1") == "127.0.0.1:1"
        finally:
            await unifier.close()
            tls_server.close()
            plain_server.close()
            await tls_server.wait_closed()
            await plain_server.wait_closed()

    asyncio.run(asyncio.wait_for(main(), 20))


def test_real_peer_while_connected() -> None:
    """While a client is connected through the unifier, grpcio's peer (the hop) maps to it."""

    async def main() -> None:
        hops: asyncio.Queue[str] = asyncio.Queue()
        release = asyncio.Event()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            host, port = writer.get_extra_info("peername")[:2]
            await reader.readexactly(1)
            await hops.put(f"{host}:{port}")
            await release.wait()
            writer.close()

        target = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = target.sockets[0].getsockname()[1]
        unifier = PortUnifier(port, port)
        await unifier.bind("127.0.0.1", 0)
        await unifier.start()
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", unifier.port)
            client = writer.get_extra_info("sockname")
            writer.write(b"x")
            hop = await hops.get()
            assert unifier.real_peer(hop) == f"{client[0]}:{client[1]}"
            release.set()
            writer.close()
            await writer.wait_closed()
        finally:
            await unifier.close()
            target.close()
            await target.wait_closed()

    asyncio.run(asyncio.wait_for(main(), 20))


# ---------------------------------------------------------------------- settings, no broker


def test_modes_map_onto_grpcio(tls_certificates: CertificateSet) -> None:
    certs = tls_certificates
    base: dict[str, Any] = {
        "cert_path": str(certs.server_cert),
        "key_path": str(certs.server_key),
        "trust_cert_path": str(certs.ca),
    }
    assert door_tls(TlsServerConfig()).credentials is None
    enforcing = door_tls(TlsServerConfig(mode=TlsMode.ENFORCING, **base))
    assert enforcing.credentials is not None
    assert (enforcing.plaintext_too, enforcing.mutual, enforcing.kind) == (False, False, "TLS")
    permissive = door_tls(TlsServerConfig(mode=TlsMode.PERMISSIVE, **base))
    assert (permissive.plaintext_too, permissive.kind) == (True, "plaintext and TLS")
    mutual = door_tls(
        TlsServerConfig(mode=TlsMode.ENFORCING, need_client_auth=ClientAuth.REQUIRE, **base)
    )
    assert (mutual.mutual, mutual.kind) == (True, "mutual TLS")
    # grpcio cannot ask for a certificate without requiring it: optional is not asked.
    optional = door_tls(
        TlsServerConfig(mode=TlsMode.ENFORCING, need_client_auth=ClientAuth.OPTIONAL, **base)
    )
    assert not optional.mutual
    encrypted = door_tls(
        TlsServerConfig(
            mode=TlsMode.ENFORCING,
            cert_path=str(certs.server_cert),
            key_path=str(certs.encrypted_server_key),
            key_password=certs.key_password,
        )
    )
    assert encrypted.credentials is not None


def test_a_bad_certificate_is_one_clear_error(
    tmp_path: Path, tls_certificates: CertificateSet
) -> None:
    certs = tls_certificates
    missing = tmp_path / "nowhere.pem"
    with pytest.raises(ConfigError, match=r"tls\.server\.certPath: cannot read .*nowhere\.pem"):
        door_tls(
            TlsServerConfig(
                mode=TlsMode.ENFORCING, cert_path=str(missing), key_path=str(certs.server_key)
            )
        )
    with pytest.raises(ConfigError, match=r"not a PEM certificate and its private key"):
        door_tls(  # the client's key does not match the server's certificate
            TlsServerConfig(
                mode=TlsMode.ENFORCING,
                cert_path=str(certs.server_cert),
                key_path=str(certs.client_key),
            )
        )
    with pytest.raises(ConfigError, match=r"keyPassword"):
        door_tls(
            TlsServerConfig(
                mode=TlsMode.ENFORCING,
                cert_path=str(certs.server_cert),
                key_path=str(certs.encrypted_server_key),
                key_password="wrong",
            )
        )


@pytest.mark.parametrize(
    ("host", "scheme"),
    [
        ("127.0.0.1", definition_pb2.IPv4),
        ("::1", definition_pb2.IPv6),
        ("[::1]", definition_pb2.IPv6),
        ("broker-a.example.com", definition_pb2.DOMAIN_NAME),
        ("localhost", definition_pb2.DOMAIN_NAME),
    ],
)
def test_route_endpoints_say_whether_they_name_an_address_or_a_host(
    host: str, scheme: definition_pb2.AddressScheme.ValueType
) -> None:
    """A TLS client checks the certificate against the host it dials, which is the route's
    endpoint: a host name labelled IPv4 would not even be dialled."""
    assert address_scheme(host) == scheme
