"""The gRPC v5 front door (``apache.rocketmq.v2.MessagingService``, issue 16).

DESIGN.md, "two front doors, one house": this package translates RocketMQ 5's gRPC protocol to
the broker's protocol-neutral service layer (in a replica, RocketMQ's "local" proxy mode) or to
remoting calls (a stand-alone proxy, "cluster" mode). So far it holds the generated protocol
stubs (``ledgermq.proxy.protocol``); the servicer comes with the service layer.
"""
