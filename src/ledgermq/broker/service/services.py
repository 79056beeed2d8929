"""The service's operations of one broker replica, together: what a front door is given.

The remoting door's translators each hold the one they serve; a door in the same process (the
gRPC servicer in a replica, issue 16) takes ``BrokerServer.services``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ledgermq.broker.service.admin import AdminService
    from ledgermq.broker.service.clients import ClientService
    from ledgermq.broker.service.offsets import OffsetService
    from ledgermq.broker.service.pop import PopService
    from ledgermq.broker.service.pull import PullService
    from ledgermq.broker.service.retry import SendBackService
    from ledgermq.broker.service.send import SendService
    from ledgermq.broker.service.timers import TimerService
    from ledgermq.broker.service.trace import BrokerTracer
    from ledgermq.broker.service.transactions import TransactionService

__all__ = ["BrokerServices"]


@dataclass(frozen=True, slots=True)
class BrokerServices:
    send: SendService
    pull: PullService
    offsets: OffsetService
    send_back: SendBackService
    clients: ClientService
    admin: AdminService
    pop: PopService
    transactions: TransactionService
    timers: TimerService
    trace: BrokerTracer | None = None
    """Broker-side message trace (``traceTopicEnable``); None: off, and doors skip it."""
