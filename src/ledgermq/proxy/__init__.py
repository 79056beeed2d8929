"""The gRPC v5 front door (``apache.rocketmq.v2.MessagingService``, issue 16).

DESIGN.md, "two front doors, one house": this package translates RocketMQ 5's gRPC protocol to
the broker's protocol-neutral service layer in a replica (RocketMQ's "local" proxy mode) and to
remoting calls to the masters (the stand-alone proxy, "cluster" mode). Its rooms:

- ``protocol``: the generated v2 stubs, in a private descriptor pool;
- ``local``: ``GrpcDoor``, the ``grpc.aio`` server a ``BrokerServer`` opens on ``grpcServerPort``;
- ``cluster``: ``ClusterProxy``, the stand-alone proxy's server;
- ``backend``: ``GrpcBackend``, the messaging contract's ``Backend`` (``ledgermq.messaging``:
  what a door asks of whoever stores the messages) with gRPC's Telemetry streams; ``door``,
  ``door_send`` and ``door_pull``: every RPC written once over it, with the ACL, name and
  duration checks; ``local_backend`` and ``local_send`` (a replica's services) and
  ``remote_backend``, ``remote_messages`` and ``remote_sessions`` (the masters over remoting,
  for the stand-alone proxy and for what a follower's door hands its master);
- ``messages``: a v5 message as the contract's ``Outgoing`` (RocketMQ's properties; pure);
- ``routes``: topic routes from the NameServers and every replica's gRPC endpoint;
- ``status``: the one place a service refusal becomes a v2 status code.
"""
