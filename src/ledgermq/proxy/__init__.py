"""The gRPC v5 front door (``apache.rocketmq.v2.MessagingService``, issue 16).

DESIGN.md, "two front doors, one house": this package translates RocketMQ 5's gRPC protocol to
the broker's protocol-neutral service layer in a replica (RocketMQ's "local" proxy mode) and,
later, to remoting calls (a stand-alone proxy, "cluster" mode). Its rooms:

- ``protocol``: the generated v2 stubs, in a private descriptor pool;
- ``local``: ``GrpcDoor``, the ``grpc.aio`` server a ``BrokerServer`` opens on ``grpcServerPort``;
- ``backend``: what the door asks of whoever stores the messages (``Backend``); ``door`` and
  ``door_pull``: the RPCs written once over it, with the ACL, name and duration checks;
  ``local_backend`` (a replica's services) and ``remote_backend`` (the masters over remoting,
  for the stand-alone proxy and for a follower's door);
- ``servicer``, ``cluster_servicer``: each mode's RPCs not moved onto the backend yet;
- ``replica_servicer``, ``master_link``: what a follower's door still forwards to its master;
- ``messages``: a v5 message as RocketMQ properties and a ``SendRequest`` (pure);
- ``routes``: topic routes from the NameServers and every replica's gRPC endpoint;
- ``status``: the one place a service refusal becomes a v2 status code.
"""
