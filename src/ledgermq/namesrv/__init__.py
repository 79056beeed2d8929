"""The NameServer: broker groups, their members and current master, topic routes, liveness.

``routes.RouteTable`` is the pure policy (RocketMQ's ``RouteInfoManager`` plus a Raft-term guard
on master claims); ``server.NameServer`` serves it over RocketMQ remoting.
"""

from ledgermq.namesrv.config import NameServerConfig
from ledgermq.namesrv.routes import RegisterResult, RemovedBroker, RouteTable
from ledgermq.namesrv.server import NameServer

__all__ = ["NameServer", "NameServerConfig", "RegisterResult", "RemovedBroker", "RouteTable"]
