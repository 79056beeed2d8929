"""Broker role follows ledger role (spec-broker.md section 5, ``DLedgerRoleChangeHandler``).

- CANDIDATE: a master steps down to slave at once (it can no longer be sure it leads); a slave
  stays as it is.
- FOLLOWER: slave, and re-register (the NameServers learn the new master from its own
  registration; this one re-registers under its slave id).
- LEADER: become master only when everything this replica holds is committed (its NOOP of the
  new term included) and everything committed has been dispatched to the queues; then rebuild the
  next queue offsets from the queues and become master. If leadership is lost while waiting,
  nothing happens.

Where RocketMQ polls every 100 ms on a single thread, this reacts to the dispatcher's progress
(with a 50 ms fallback timer), so a new master is serving within a few milliseconds of its NOOP
being committed. Every change re-registers with all NameServers at once (``on_change``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Final

from ledgermq.broker.state.broker_state import BrokerRole
from ledgermq.raft import Role, RoleChange

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.ledger.server import LedgerServer

__all__ = ["RoleHandler"]

_log = logging.getLogger(__name__)

_CHECK_INTERVAL_S: Final = 0.05


class RoleHandler:
    def __init__(
        self,
        state: BrokerState,
        ledger: LedgerServer,
        on_master: Callable[[], None],
        on_slave: Callable[[], None],
    ) -> None:
        self._state = state
        self._ledger = ledger
        self._on_master = on_master
        self._on_slave = on_slave
        self._waiting_term: int | None = None
        self._master_term: int | None = None
        self._timer: asyncio.TimerHandle | None = None

    def on_role_change(self, change: RoleChange) -> None:
        """The ledger's role listener."""
        state = self._state
        if change.role is Role.LEADER:
            if change.term in (self._master_term, self._waiting_term):
                return  # told twice (the broker replays the role the ledger had at its start)
            self._waiting_term = change.term
            _log.info("replica %s leads term %d: waiting for commit and dispatch to catch up",
                      state.config.dleger_self_id, change.term)  # fmt: skip
            self.check()
            return
        self._waiting_term = None
        self._master_term = None
        if change.role is Role.CANDIDATE and state.role is BrokerRole.SLAVE and state.broker_id > 0:
            return
        self._become_slave()

    def follow_current_role(self) -> None:
        """Act on the role the ledger holds now; called once the listener is in place.

        The ledger runs from ``LedgerServer.start()`` on, before the broker has opened its
        queues and put this listener on it, and may take its role meanwhile: a one-replica group
        elects itself at once, a follower may hear of a leader. That change reached no listener,
        and the broker stayed SLAVE with brokerId -1, so it never registered with the NameServers
        and no client ever got a route to it. A change that is reported later as well is
        ignored by ``on_role_change`` (same term).
        """
        core = self._ledger.core
        if core.role is not Role.CANDIDATE:
            self.on_role_change(RoleChange(core.term, core.role, core.leader_id))

    def check(self) -> None:
        """Promote if waiting and ready; called on dispatch progress and by a fallback timer."""
        if self._waiting_term is None:
            return
        core = self._ledger.core
        if core.role is not Role.LEADER or core.term != self._waiting_term:
            self._waiting_term = None
            return
        store = self._ledger.store
        if store.committed_index == store.end_index and self._state.dispatcher.caught_up:
            self._waiting_term = None
            self._become_master()
            return
        if self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(_CHECK_INTERVAL_S, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.check()

    def _become_master(self) -> None:
        state = self._state
        state.queue_offsets.rebuild(
            (q.topic, q.queue_id, q.max_offset) for q in state.queues.stats()
        )
        state.role = BrokerRole.MASTER
        state.broker_id = 0
        self._master_term = self._ledger.core.term
        _log.info("broker %s replica %s is MASTER (term %d)", state.config.broker_name,
                  state.config.dleger_self_id, self._ledger.core.term)  # fmt: skip
        self._on_master()

    def _become_slave(self) -> None:
        state = self._state
        was = state.role, state.broker_id
        state.role = BrokerRole.SLAVE
        state.broker_id = state.config.slave_broker_id
        if was != (state.role, state.broker_id):
            _log.info("broker %s replica %s is SLAVE (brokerId %d)", state.config.broker_name,
                      state.config.dleger_self_id, state.broker_id)  # fmt: skip
        self._on_slave()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
