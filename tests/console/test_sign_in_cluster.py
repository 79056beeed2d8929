"""The console's sign-in against real ACL brokers (issue 18 section 1), without a browser: the
probe finds ACL on, an admin account passes the check, a wrong secret and a non-admin account
are refused with their own message, and the check leaves no topic behind.

Select with ``-m integration``; skip with ``-m "not integration"``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from ledgermq.client import Admin, Credentials
from ledgermq.console.access import AclMode, ConsoleAccess, SignInRefusedError
from ledgermq.console.link import ClusterLink
from ledgermq.errors import MQResponseError
from ledgermq.wire import MQResponseCode
from tests.console.test_browser import ACL, ADMIN
from tests.console.test_rates import FakeClock

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ledgermq.testing.broker_cluster import BrokerCluster

    MakeCluster = Callable[..., BrokerCluster]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_sign_in_against_acl_brokers(broker_clusters: MakeCluster, tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    cluster = broker_clusters(
        replicas=1,
        credentials=(ADMIN.access_key, ADMIN.secret_key),
        extra_settings={
            "aclEnable": "true",
            "aclFilePath": str(acl),
            "aclAccessKey": ADMIN.access_key,
            "aclSecretKey": ADMIN.secret_key,
        },
    )
    cluster.wait_routable()

    async def main() -> None:
        base = ClusterLink(cluster.namesrv_addr)
        await base.start()
        try:
            access = ConsoleAccess(base, FakeClock(), AclMode.AUTO)
            assert await access.sign_in_required()

            link = await access.sign_in("ops-admin", "ops-admin-secret")
            try:
                await link.admin.check_admin_account()  # again, on the signed-in link
                assert "ledgermq console sign-in check" not in await link.admin.topic_list()
            finally:
                await link.close()

            with pytest.raises(SignInRefusedError, match="do not match an account") as wrong:
                await access.sign_in("ops-admin", "wrong-secret")
            assert "wrong-secret" not in str(wrong.value)
            with pytest.raises(SignInRefusedError, match="do not match an account"):
                await access.sign_in("no-such-key", "whatever-secret")
            with pytest.raises(SignInRefusedError, match="app-user is not an admin account"):
                await access.sign_in("app-user", "app-user-secret")
        finally:
            await base.close()

        async with Admin(
            cluster.namesrv_addr, credentials=Credentials("app-user", "app-user-secret")
        ) as app:
            with pytest.raises(MQResponseError) as refused:
                await app.check_admin_account()
            assert refused.value.code == MQResponseCode.NO_PERMISSION

    asyncio.run(main())
