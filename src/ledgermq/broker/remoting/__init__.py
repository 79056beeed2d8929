"""The broker's remoting door: RocketMQ's remoting requests translated to the service.

Each processor reads the request's header and body (wire fields in), calls the protocol-neutral
operation in ``broker.service`` and writes the response's fields (wire fields out); it holds no
semantics of its own. ``errors`` is the one place a service refusal becomes a response code.
``consumers`` parses the client management bodies (heartbeats, queue locks) that ``clients``
serves over the broker's client registry (``broker.service.client_registry``).
"""
