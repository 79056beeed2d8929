"""Every request code the remoting door serves has its needs (issue 26 item 2): a code whose
header the door parses into a typed header (``ledgermq.wire.headers``) is served from that
header and its needs come from ``acl.header_needs``; every other served code is classified in
the ACL's lists, so an unmapped code is refused to all but an admin, never allowed."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, cast

import pytest

from ledgermq.broker.remoting.parse_once import PARSED_CODES, RequestParser
from ledgermq.errors import BadRequestError
from ledgermq.security.acl import Needs
from ledgermq.security.acl.resources import (
    ACCOUNT_ONLY_CODES,
    ADMIN_CODES,
    HEADER_NEEDS,
    RESOURCE_CODES,
)
from ledgermq.wire import MQRequestCode, RemotingCommand
from ledgermq.wire.headers import HEADER_TYPES
from tests.broker.harness import Cluster

if TYPE_CHECKING:
    from pathlib import Path


def test_every_served_code_is_classified_and_typed_codes_are_served_from_their_header(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        cluster = Cluster(tmp_path)
        try:
            await cluster.start()
            master = await cluster.master()
            typed, untyped = set(master.remoting.typed_codes), set(master.remoting.handled_codes)
            assert typed == set(HEADER_TYPES)
            assert not typed & untyped  # one way to serve each code
            # every typed header's needs are in the one table, computed from the header
            assert {HEADER_TYPES[code] for code in typed} <= set(HEADER_NEEDS)
            # sends, heartbeats and locks are parsed once too, and their needs come from that
            assert typed <= PARSED_CODES
            for code in typed | untyped | PARSED_CODES:
                homes = [code in ADMIN_CODES, code in RESOURCE_CODES, code in ACCOUNT_ONLY_CODES]
                assert homes.count(True) == 1, code
        finally:
            await cluster.close()

    asyncio.run(asyncio.wait_for(main(), 60))


@pytest.mark.parametrize(
    ("code", "fields"),
    [
        (MQRequestCode.GET_PRODUCER_CONNECTION_LIST, {}),
        (MQRequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "a/b"}),
        (MQRequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "T", "readQueueNums": "many"}),
        (MQRequestCode.REPLICA_REMOVE, {}),
    ],
)
def test_an_admin_request_that_does_not_parse_is_still_refused_to_all_but_an_admin(
    code: int, fields: dict[str, str]
) -> None:
    """The door parses admin headers before the ACL too; a malformed one needs an admin
    account all the same, so the parser's error is answered to no one else."""
    parser = RequestParser({}, cast("Any", None), acl=True)
    parsed = parser.parse(RemotingCommand(code, 1, ext_fields=fields))
    assert parsed.needs == Needs(admin=True)
    assert code in ADMIN_CODES


def test_a_malformed_resource_request_needs_a_valid_account_and_is_answered_its_error() -> None:
    parser = RequestParser({}, cast("Any", None), acl=True)
    parsed = parser.parse(RemotingCommand(MQRequestCode.PULL_MESSAGE, 1, ext_fields={}))
    assert parsed.needs == Needs()
    handler = parsed.handler
    assert handler is not None

    async def serve() -> object:
        return await handler(cast("Any", None), RemotingCommand(11, 1))

    with pytest.raises(BadRequestError, match="lacks the field 'consumerGroup'"):
        asyncio.run(serve())
