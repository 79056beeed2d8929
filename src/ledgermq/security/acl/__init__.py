"""RocketMQ's plain ACL, pure: accounts, signatures, and what each request needs.

DESIGN.md ("two front doors, one house"): ``ledgermq.security.acl`` parses ACL files, verifies
signatures and maps a request to the permission it needs, and every front door (remoting,
later gRPC, the NameServer) calls it. It does no I/O: the servers read the files and hand the
text in, so the rules are tested without sockets or files, and secrets never leave it (a refusal
says what is missing, never a secret, never whether the key or the signature was wrong).
"""

from ledgermq.security.acl.addresses import AddressPattern, parse_address_pattern
from ledgermq.security.acl.config import Account, AclConfig, AclConfigError, parse_acl_config
from ledgermq.security.acl.permission import Perm, parse_perm, perm_allows
from ledgermq.security.acl.resources import (
    Needs,
    Resource,
    header_needs,
    heartbeat_needs,
    lock_needs,
    record_needs,
    request_needs,
    send_needs,
)
from ledgermq.security.acl.signature import request_content, sign, sign_request, signature_matches
from ledgermq.security.acl.validator import Decision, validate

__all__ = [
    "Account",
    "AclConfig",
    "AclConfigError",
    "AddressPattern",
    "Decision",
    "Needs",
    "Perm",
    "Resource",
    "header_needs",
    "heartbeat_needs",
    "lock_needs",
    "parse_acl_config",
    "parse_address_pattern",
    "parse_perm",
    "perm_allows",
    "record_needs",
    "request_content",
    "request_needs",
    "send_needs",
    "sign",
    "sign_request",
    "signature_matches",
    "validate",
]
