"""The servers' side of access control: ACL files on disk, the request gate, the audit log.

``ledgermq.security.acl`` decides (pure); this package feeds it the files (found where RocketMQ
finds them, reloaded when they change, the old configuration kept when a new one is bad), turns its
refusals into NO_PERMISSION answers at a front door, and writes the audit log.
"""

from ledgermq.security.acl_files import AclFiles, default_acl_paths
from ledgermq.security.audit import AuditLog
from ledgermq.security.gate import AclGate, remote_ip

__all__ = ["AclFiles", "AclGate", "AuditLog", "default_acl_paths", "remote_ip"]
