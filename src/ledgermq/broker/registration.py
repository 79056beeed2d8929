"""Registering with the NameServers: at once on every role change, and every 30 s.

RocketMQ registers a role change with a one-way request whose failure is ignored, and leaves
slaves without a master address until the next periodic registration (spec-broker.md 5.4).
Here every registration is a request to every NameServer in parallel, retried soon (1 s) if any
failed, and carries the ledger ``term``: a NameServer keeps the master claim of the highest
term, so a deposed master that has not noticed yet cannot take id 0 back.

Registrations follow the group's membership (issue 27): a committed membership change kicks a
registration at once (a new member appears in the routes within a second, not at the next
period), and a replica whose removal from the group is committed unregisters, once, and no
longer registers: it leaves the routes, ``cluster-list`` and the console while it still runs.
"Removed" is: not a member of the committed membership *and* following no leader (the master
stops sending to a member once its removal commits, so it stops following within a heartbeat
timeout). A replica being added replays the group's older configurations, which do not list
it, while it catches up; it follows the master meanwhile, so it is never taken for removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from typing import TYPE_CHECKING, Final

from ledgermq.clock import SystemClock
from ledgermq.errors import LedgerMQError
from ledgermq.raft import Role
from ledgermq.security.acl import sign_request
from ledgermq.security.acl.strong import sign_strong
from ledgermq.wire import MQRequestCode, MQResponseCode, RemotingCommand
from ledgermq.wire.namesrv_headers import (
    RegisterBrokerRequestHeader,
    UnRegisterBrokerRequestHeader,
)
from ledgermq.wire.route import RegisterBrokerBody

if TYPE_CHECKING:
    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.ledger.server import LedgerServer
    from ledgermq.net import ConnectionPool
    from ledgermq.raft import RoleChange

__all__ = ["NameServerRegistrar"]

_log = logging.getLogger(__name__)

_TIMEOUT_S: Final = 3.0
_RETRY_S: Final = 1.0


class NameServerRegistrar:
    def __init__(self, state: BrokerState, ledger: LedgerServer, pool: ConnectionPool) -> None:
        self._state = state
        self._ledger = ledger
        self._pool = pool
        self._task: asyncio.Task[None] | None = None
        self._kick = asyncio.Event()
        self._membership_index = -1
        """Index of the committed membership the last kick was for."""
        self._left = False
        """It unregistered because its removal from the group is committed."""

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._ledger.add_commit_listener(self._on_commit)
        self._ledger.add_role_listener(self._on_role)

    def _on_commit(self, _committed_index: int) -> None:
        """A commit listener: a newly committed membership changes what the routes show."""
        index = self._ledger.core.membership_state.committed.index
        if index != self._membership_index:
            self._membership_index = index
            self._kick.set()

    def _on_role(self, _change: RoleChange) -> None:
        """A role listener: a replica out of the committed membership that stops following
        its master has been removed (``_removed``): tell the NameServers now."""
        if self._removed() != self._left:
            self._kick.set()

    def _removed(self) -> bool:
        """Its removal from the group is committed and it follows no master (module docstring)."""
        core = self._ledger.core
        committed = core.membership_state.committed.membership
        return core.role is not Role.FOLLOWER and not committed.is_member(
            self._state.config.dleger_self_id
        )

    def register_soon(self) -> None:
        """Register with every NameServer now (role or topics changed)."""
        self._kick.set()

    async def _run(self) -> None:
        while True:
            # Read every round: UPDATE_BROKER_CONFIG may change registerNameServerPeriod.
            period_s = max(self._state.config.register_name_server_period, 1000) / 1000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), period_s)
            self._kick.clear()
            if self._state.broker_id < 0:
                continue  # no role yet (DLedger mode skips the initial registration)
            ok = await self.register_all()
            if not ok:
                await asyncio.sleep(_RETRY_S)
                self._kick.set()

    async def register_all(self) -> bool:
        """One registration with every NameServer; True if all of them took it."""
        addresses = self._state.config.namesrv_addr
        if not addresses:
            return True
        if self._removed():
            if not self._left:
                _log.warning(
                    "replica %s is not a member of broker group %s (its removal is committed) "
                    "and follows no master: it unregisters from the NameServers and registers "
                    "again only if it follows a master as a member; stop it if it was removed",
                    self._state.config.dleger_self_id, self._state.config.broker_name,
                )  # fmt: skip
                await self.unregister_all()
                self._left = True
            return True
        self._left = False
        command = self._command()
        results = await asyncio.gather(*(self._register(address, command) for address in addresses))
        return all(results)

    def _command(self) -> RemotingCommand:
        state = self._state
        config = state.config
        body, crc = RegisterBrokerBody(
            topic_configs=dict(state.metadata.topics),
            data_version=state.metadata.topic_version,
        ).encode(compressed=False)
        fields = RegisterBrokerRequestHeader(
            config.broker_name,
            config.address,
            config.broker_cluster_name,
            state.broker_id,
            ha_server_addr=config.address,
            heartbeat_timeout_millis=120_000,
            compressed=False,
            body_crc32=crc,
            term=self._ledger.core.term,
        ).to_ext_fields()
        return RemotingCommand(
            code=MQRequestCode.REGISTER_BROKER,
            opaque=0,
            ext_fields=self._signed(MQRequestCode.REGISTER_BROKER, fields, body),
            body=body,
        )

    def _signed(self, code: int, fields: dict[str, str], body: bytes | None) -> dict[str, str]:
        """``fields`` signed with the broker's own account (``aclAccessKey``), if it has one:
        NameServers with ``aclEnable`` take registrations only from admin accounts. A broker
        with ``aclRequireStrongSignature=true`` signs strongly (``ledgermq.security.acl.strong``),
        for NameServers that require it too."""
        config = self._state.config
        if not config.acl_access_key:
            return fields
        if config.acl_require_strong_signature:
            return sign_strong(
                code,
                fields,
                body,
                config.acl_access_key,
                config.acl_secret_key,
                now_s=SystemClock().wall_time_s(),
                nonce=secrets.token_hex(16),
            )
        return sign_request(fields, body, config.acl_access_key, config.acl_secret_key)

    async def _register(self, address: str, command: RemotingCommand) -> bool:
        try:
            response = await self._pool.request(address, command, _TIMEOUT_S)
        except LedgerMQError as exc:
            _log.warning("registration with NameServer %s failed: %s", address, exc)
            return False
        if response.code != MQResponseCode.SUCCESS:
            _log.warning("NameServer %s refused the registration: %s (code %d)", address,
                         response.remark, response.code)  # fmt: skip
            return False
        return True

    async def unregister_all(self) -> None:
        state = self._state
        config = state.config
        command = RemotingCommand(
            code=MQRequestCode.UNREGISTER_BROKER,
            opaque=0,
            ext_fields=self._signed(
                MQRequestCode.UNREGISTER_BROKER,
                UnRegisterBrokerRequestHeader(
                    config.broker_name,
                    config.address,
                    config.broker_cluster_name,
                    state.broker_id,
                ).to_ext_fields(),
                None,
            ),
        )
        for address in config.namesrv_addr:
            with contextlib.suppress(LedgerMQError):
                await self._pool.request(address, command, 1.0)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
