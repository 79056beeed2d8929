"""Access control, one package: the ACL's decisions (``acl``) and the servers' side around them.

``acl`` is pure (RocketMQ's plain ACL file, signatures, what each request needs, the decision):
the clients sign with it and every front door asks it. The other modules are the servers': the
ACL files on disk (``acl_files``: found where RocketMQ finds them, reloaded when they change, the
old configuration kept when a new one is bad), the gate that turns a refusal into NO_PERMISSION
at a front door (``gate``, ``strong_check``, ``throttle``), the audit log (``audit``) and local
certificates (``certs``). Import them from their modules: this ``__init__`` imports nothing, so
a client that signs requests loads ``acl`` and none of the servers' side (a contract keeps
``acl`` from importing it).
"""
