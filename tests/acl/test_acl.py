"""security.acl: RocketMQ's plain ACL file, signatures, the permission table, the decision."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledgermq.security.acl import (
    AclConfig,
    AclConfigError,
    Decision,
    Perm,
    heartbeat_needs,
    parse_acl_config,
    parse_address_pattern,
    parse_perm,
    perm_allows,
    request_content,
    request_needs,
    sign,
    sign_request,
    signature_matches,
    validate,
)
from ledgermq.security.acl.resources import (
    ACCOUNT_ONLY_CODES,
    ADMIN_CODES,
    RESOURCE_CODES,
    Resource,
    lock_needs,
    send_needs,
)
from ledgermq.wire.codes import MQRequestCode

# RocketMQ's documented example (docs/cn/acl/user_guide.md), secretKey as YAML reads it: an int.
PLAIN_ACL = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"""


def config() -> AclConfig:
    return parse_acl_config({"plain_acl.yml": PLAIN_ACL})


# ------------------------------------------------------------------ signatures


def test_signature_vector() -> None:
    """Computed by hand from the algorithm: values ordered by name ("AccessKey" < "a" < "b":
    Java orders by UTF-16 code units, capitals first), then the body; HMAC-SHA1, Base64."""
    fields = {"b": "2", "a": "1", "AccessKey": "RocketMQ"}
    assert request_content(fields, b"hello") == b"RocketMQ12hello"
    assert sign(b"RocketMQ12hello", "12345678") == "Kzwm3m2emzXbrztROKCD3OpbYRQ="


def test_the_signature_is_not_part_of_what_it_signs() -> None:
    signed = sign_request({"topic": "T"}, b"x", "RocketMQ", "12345678")
    assert request_content(signed, b"x") == b"RocketMQTx"
    assert signature_matches(signed, b"x", "12345678")


def test_java_string_order_is_by_utf16_code_units() -> None:
    # U+10000 is the surrogate pair D800 DC00, which Java puts before U+FFFF (Python does not).
    fields = {"\uffff": "second", "\U00010000": "first"}
    assert request_content(fields, None) == b"firstsecond"


@given(
    fields=st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=20), max_size=6),
    body=st.binary(max_size=50),
    secret=st.text(min_size=7, max_size=20),
)
def test_sign_then_verify_and_any_change_breaks_it(
    fields: dict[str, str], body: bytes, secret: str
) -> None:
    signed = sign_request(fields, body, "AccessKeyX", secret)
    names = sorted(signed, key=lambda name: name.encode("utf-16-be", "surrogatepass"))
    values = "".join(signed[name] for name in names if name != "Signature")
    content = values.encode("utf-8", "surrogatepass") + body
    expected = base64.b64encode(hmac.new(secret.encode(), content, hashlib.sha1).digest()).decode()
    assert signed["Signature"] == expected
    assert signature_matches(signed, body, secret)
    assert not signature_matches(signed, body + b"!", secret)
    assert not signature_matches(signed, body, secret + "x")
    assert not signature_matches({**signed, "extra": "1"}, body, secret)


# ------------------------------------------------------------------ the file


def test_rocketmq_documented_file_parses() -> None:
    acl = config()
    assert [p.text for p in acl.global_white] == ["10.10.103.*", "192.168.0.*"]
    user = acl.accounts["RocketMQ"]
    assert user.secret_key == "12345678"  # YAML's int, as RocketMQ reads it
    assert not user.admin
    assert user.default_topic_perm == Perm.DENY
    assert user.default_group_perm == Perm.SUB
    assert user.topic_perms == {
        "topicA": Perm.DENY,
        "topicB": Perm.PUB | Perm.SUB,
        "topicC": Perm.SUB,
    }
    assert user.group_perms["groupB"] == Perm.PUB | Perm.SUB
    assert acl.accounts["rocketmq2"].admin
    assert "12345678" not in repr(user)


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("accounts: [{accessKey: RocketMQ, secretKey: short}]", "longer than 6"),
        ("accounts: [{accessKey: RocketMQ}]", "longer than 6"),
        (
            "accounts: [{accessKey: RocketMQ, secretKey: 12345678, admn: true}]",
            "unknown field(s) admn",
        ),
        (
            "accounts: [{accessKey: RocketMQ, secretKey: 12345678, defaultTopicPerm: PUBSUB}]",
            "unknown permission",
        ),
        (
            "accounts: [{accessKey: RocketMQ, secretKey: 12345678, topicPerms: [topicA]}]",
            "not name=PERM",
        ),
        (
            "accounts: [{accessKey: RocketMQ, secretKey: 12345678, whiteRemoteAddress: 1.2.3}]",
            "four parts",
        ),
        ("accounts: [{accessKey: RocketMQ, secretKey: 12345678, admin: maybe}]", "true or false"),
        ("globalWhiteRemoteAddresses: [300.1.1.1]", "0 to 255"),
        ("accounts: {accessKey: RocketMQ}", "must be a list"),
        ("acounts: []", "unknown field(s) acounts"),
        ("accounts: [", "not valid YAML"),
    ],
)
def test_bad_files_are_refused_clearly(text: str, complaint: str) -> None:
    with pytest.raises(AclConfigError) as caught:
        parse_acl_config({"conf/plain_acl.yml": text})
    assert complaint in str(caught.value)
    assert "conf/plain_acl.yml" in str(caught.value)
    assert "12345678" not in str(caught.value)


def test_one_key_in_two_files_is_refused() -> None:
    account = "accounts: [{accessKey: RocketMQ, secretKey: 12345678}]"
    with pytest.raises(AclConfigError, match=r"also defined in conf/acl/a\.yml"):
        parse_acl_config({"conf/acl/a.yml": account, "conf/acl/b.yml": account})


def test_files_merge_and_an_empty_file_grants_nothing() -> None:
    acl = parse_acl_config(
        {
            "a.yml": "accounts: [{accessKey: alice-key, secretKey: alice-secret}]",
            "b.yml": "accounts: [{accessKey: bobby-key, secretKey: bobby-secret}]",
            "c.yml": "",
        }
    )
    assert set(acl.accounts) == {"alice-key", "bobby-key"}


# ------------------------------------------------------------------ permissions and addresses


def test_permissions() -> None:
    assert parse_perm("PUB|SUB") == parse_perm(" sub | pub ") == Perm.PUB | Perm.SUB
    assert perm_allows(Perm.PUB, Perm.PUB | Perm.SUB)
    assert not perm_allows(Perm.PUB, Perm.SUB)
    assert not perm_allows(Perm.SUB, Perm.DENY)
    assert perm_allows(Perm.ANY, Perm.SUB)
    assert not perm_allows(Perm.ANY, Perm.DENY)
    with pytest.raises(ValueError, match="unknown permission"):
        parse_perm("ALL")


@pytest.mark.parametrize(
    ("pattern", "inside", "outside"),
    [
        ("*", ["1.2.3.4", "::1"], []),
        ("192.168.0.*", ["192.168.0.1", "192.168.0.255"], ["192.168.1.1", "10.0.0.1"]),
        ("192.168.1.10-20", ["192.168.1.10", "192.168.1.20"], ["192.168.1.9", "192.168.1.21"]),
        ("192.168.0.{1,2}", ["192.168.0.1", "192.168.0.2"], ["192.168.0.3"]),
        ("10.0.0.1,10.0.0.5", ["10.0.0.1", "10.0.0.5", "::ffff:10.0.0.5"], ["10.0.0.2"]),
        ("::1", ["::1", "0:0:0:0:0:0:0:1"], ["127.0.0.1"]),
        ("", [], ["127.0.0.1"]),
    ],
)
def test_white_addresses(pattern: str, inside: list[str], outside: list[str]) -> None:
    parsed = parse_address_pattern(pattern)
    assert all(parsed.matches(a) for a in inside)
    assert not any(parsed.matches(a) for a in outside)
    assert not parsed.matches("not-an-address") or parsed.everything


# ------------------------------------------------------------------ what a request needs


def test_every_request_code_is_classified_once() -> None:
    for code in MQRequestCode:
        homes = [code in ADMIN_CODES, code in RESOURCE_CODES, code in ACCOUNT_ONLY_CODES]
        assert homes.count(True) == 1, code


def test_an_unclassified_code_or_an_unparsed_body_needs_an_admin_account() -> None:
    """Issue 25: a code in none of the lists needed any account; now it is refused to all but
    an admin, and so are codes whose needs only their parsed body tells (a door that forgot to
    parse must refuse, not allow). Reading every group's offsets is an admin's."""
    assert request_needs(9999, {"topic": "T"}).admin
    for code in (
        MQRequestCode.HEART_BEAT,
        MQRequestCode.LOCK_BATCH_MQ,
        MQRequestCode.UNLOCK_BATCH_MQ,
        MQRequestCode.GET_ALL_CONSUMER_OFFSET,
    ):
        assert request_needs(code, {}).admin, code
    topic, group = Resource("topic", "T"), Resource("group", "G")
    stats = request_needs(MQRequestCode.GET_CONSUME_STATS, {"consumerGroup": "G", "topic": "T"})
    assert stats.resources == {topic: Perm.SUB, group: Perm.SUB}
    assert request_needs(MQRequestCode.GET_TOPIC_STATS_INFO, {"topic": "T"}).resources == {
        topic: Perm.SUB
    }
    assert lock_needs("G", ["T", "T"]).resources == {topic: Perm.SUB, group: Perm.SUB}
    assert send_needs("%DLQ%G").resources == {group: Perm.SUB}
    # a V2 send carrying a V1 name, or no b, is refused by its parser: nothing to allow here
    assert request_needs(MQRequestCode.SEND_MESSAGE_V2, {"b": "T", "topic": "U"}).admin
    assert request_needs(MQRequestCode.SEND_MESSAGE_V2, {"topic": "U"}).admin


def test_needs() -> None:
    topic, group = Resource("topic", "T"), Resource("group", "G")
    assert request_needs(MQRequestCode.SEND_MESSAGE_V2, {"a": "P", "b": "T"}).resources == {
        topic: Perm.PUB
    }
    assert request_needs(MQRequestCode.SEND_MESSAGE, {"topic": "T"}).resources == {topic: Perm.PUB}
    retry = request_needs(MQRequestCode.SEND_MESSAGE_V2, {"a": "G", "b": "%RETRY%G"})
    assert retry.resources == {group: Perm.SUB}
    pull_fields = {"topic": "T", "consumerGroup": "G", "queueId": "0", "queueOffset": "0"}
    pull = request_needs(MQRequestCode.PULL_MESSAGE, pull_fields)
    assert pull.resources == {topic: Perm.SUB, group: Perm.SUB}
    # a header that does not parse is refused by its parser: nothing to allow here
    assert request_needs(MQRequestCode.PULL_MESSAGE, {"topic": "T", "consumerGroup": "G"}).admin
    for code in (
        MQRequestCode.POP_MESSAGE,
        MQRequestCode.ACK_MESSAGE,
        MQRequestCode.CHANGE_MESSAGE_INVISIBLETIME,
    ):
        pop_fields = {"topic": "T", "consumerGroup": "G", "extraInfo": "x"}
        pop_fields |= {"maxMsgNums": "1", "invisibleTime": "1000"}
        pop = request_needs(code, pop_fields)
        assert pop.resources == {topic: Perm.SUB, group: Perm.SUB}
    end = {"producerGroup": "P", "commitLogOffset": "1", "commitOrRollback": "8", "topic": "T"}
    assert request_needs(MQRequestCode.END_TRANSACTION, end).resources == {topic: Perm.PUB}
    del end["topic"]  # RocketMQ 4's header: an account only (the broker checks a topic given)
    assert request_needs(MQRequestCode.END_TRANSACTION, end).resources == {}
    assert request_needs(MQRequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "T"}).admin
    assert request_needs(MQRequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}).resources == {}
    beat = heartbeat_needs([("G", ["T", "%RETRY%G"])])
    assert beat.resources == {group: Perm.SUB, topic: Perm.SUB}


# ------------------------------------------------------------------ the decision


def _send(ak: str, secret: str, topic: str) -> tuple[dict[str, str], bytes]:
    body = b"payload"
    return sign_request({"a": "P", "b": topic, "e": "0"}, body, ak, secret), body


def _decide(
    fields: dict[str, str], body: bytes, ip: str = "127.0.0.1", code: int = 310
) -> Decision:
    needs = request_needs(code, fields)
    return validate(config(), ip, code, fields, body, needs)


def test_a_signed_send_with_pub_is_allowed() -> None:
    decision = _decide(*_send("RocketMQ", "12345678", "topicB"))
    assert decision.allowed
    assert decision.access_key == "RocketMQ"


def test_refusals_say_what_is_missing() -> None:
    assert (
        "no PUB permission on topic 'topicC'"
        in _decide(*_send("RocketMQ", "12345678", "topicC")).remark
    )
    assert (
        "no PUB permission on topic 'other'"
        in _decide(*_send("RocketMQ", "12345678", "other")).remark
    )
    unsigned = _decide({"a": "P", "b": "topicB"}, b"x")
    assert not unsigned.allowed
    assert "not signed" in unsigned.remark


def test_a_wrong_secret_and_an_unknown_key_read_alike() -> None:
    wrong_secret = _decide(*_send("RocketMQ", "12345679", "topicB"))
    unknown_key = _decide(*_send("NoSuchKey", "12345678", "topicB"))
    assert not wrong_secret.allowed
    assert not unknown_key.allowed
    assert wrong_secret.remark == unknown_key.remark
    assert "12345678" not in wrong_secret.remark


def test_white_addresses_pass_as_rocketmq_lets_them() -> None:
    assert _decide({"a": "P", "b": "topicA"}, b"x", ip="192.168.0.7").allowed  # global
    # the account's own white address: no signature needed, and no permission check
    fields = {"a": "P", "b": "topicA", "AccessKey": "rocketmq2"}
    assert _decide(fields, b"x", ip="192.168.1.9").allowed
    assert not _decide(fields, b"x", ip="192.168.2.9").allowed


def test_admin_codes_need_an_admin_account() -> None:
    fields = sign_request({"topic": "T"}, None, "RocketMQ", "12345678")
    refused = _decide(fields, b"", code=MQRequestCode.UPDATE_AND_CREATE_TOPIC)
    assert not refused.allowed
    assert "needs an admin account" in refused.remark
    admin = sign_request({"topic": "T"}, None, "rocketmq2", "12345678")
    assert _decide(admin, b"", code=MQRequestCode.UPDATE_AND_CREATE_TOPIC).allowed
    # an admin without permission lists may use every resource (RocketMQ's rule)
    assert _decide(*_send("rocketmq2", "12345678", "topicA"), ip="10.1.1.1").allowed


def test_group_permissions_and_defaults() -> None:
    def pull(group: str) -> bool:
        fields = sign_request(
            {"topic": "topicB", "consumerGroup": group, "queueId": "0", "queueOffset": "0"},
            None,
            "RocketMQ",
            "12345678",
        )
        return bool(_decide(fields, b"", code=MQRequestCode.PULL_MESSAGE).allowed)

    assert pull("groupB")
    assert pull("groupC")
    assert not pull("groupA")  # DENY
    assert pull("anyOtherGroup")  # defaultGroupPerm: SUB


# ------------------------------------------------------------------ the strong signature
def test_rocketmq_signatures_do_not_cover_the_code_nor_field_boundaries() -> None:
    """What the strong signature is for: RocketMQ's content is the same for a topic-create and
    a topic-delete with the same fields, and for values moved between fields."""
    from ledgermq.security.acl.strong import strong_content

    create = {"topic": "Orders", "readQueueNums": "8"}
    moved = {"topic": "8Orders", "readQueueNums": ""}
    assert request_content(create, None) == request_content(moved, None)
    assert strong_content(17, create, None) != strong_content(215, create, None)
    assert strong_content(17, create, None) != strong_content(17, moved, None)
    assert strong_content(17, create, b"a") != strong_content(17, create, b"b")
    assert strong_content(17, {"a": "b=1"}, None) != strong_content(17, {"a=b": "1"}, None)


def test_a_strong_signature_is_checked_for_time_code_and_every_field() -> None:
    from ledgermq.security.acl.strong import (
        STRONG_NONCE,
        STRONG_SIGNATURE,
        STRONG_TIME,
        sign_strong,
        strong_matches,
        strong_problem,
    )

    now = 1_800_000_000.0
    nonce = "0123456789abcdef" * 2
    fields = sign_strong(17, {"topic": "T"}, b"x", "ak", "sk", now_s=now, nonce=nonce)
    assert fields[STRONG_TIME] == str(int(now * 1000))
    assert fields[STRONG_NONCE] == nonce
    assert signature_matches(fields, b"x", "sk")  # RocketMQ servers accept it too
    assert strong_matches(17, fields, b"x", "sk")
    assert not strong_matches(215, fields, b"x", "sk")
    assert not strong_matches(17, fields, b"y", "sk")
    assert not strong_matches(17, fields | {"topic": "U"}, b"x", "sk")
    assert not strong_matches(17, fields, b"x", "other")
    assert not strong_matches(
        17, {k: v for k, v in fields.items() if k != STRONG_SIGNATURE}, b"x", "sk"
    )
    assert strong_problem(fields, now + 299) is None
    assert "behind this server's clock" in (strong_problem(fields, now + 301) or "")
    assert "ahead of" in (strong_problem(fields, now - 301) or "")
    assert "LmqSigNonce" in (strong_problem(fields | {STRONG_NONCE: "short"}, now) or "")
    assert "LmqSigTime" in (strong_problem(fields | {STRONG_TIME: "-5"}, now) or "")


def test_the_nonce_cache_refuses_replays_and_stays_bounded() -> None:
    from ledgermq.security.acl.strong import NonceCache

    cache = NonceCache(skew_s=300, max_nonces=100)
    now_ms = 1_800_000_000_000
    cache.remember("ak", "n0", now_ms, now_ms)
    assert "used before" in (cache.problem("ak", "n0", now_ms) or "")
    assert cache.problem("other", "n0", now_ms) is None  # per account
    for i in range(1, 1_000):
        cache.remember("ak", f"n{i}", now_ms + i, now_ms + i)
    assert len(cache) <= 100
    # n0 was forgotten while still acceptable: its time (and older) is refused from now on
    assert "older than the replays" in (cache.problem("ak", "n0", now_ms) or "")
    assert cache.problem("ak", "fresh", now_ms + 1_000) is None
    # once past the skew, expired nonces go first and no floor is needed
    later = NonceCache(skew_s=1, max_nonces=10)
    for i in range(100):
        later.remember("ak", f"n{i}", now_ms + i * 2_000, now_ms + i * 2_000)
    assert len(later) == 1
    assert later.floor_ms == -1


def test_one_account_flooding_the_nonce_cache_does_not_refuse_another_accounts_requests() -> None:
    """Found in review: the floor was one for all keys, so an account that filled the cache
    with requests dated nearly 300 s ahead made every other account's honest requests "older
    than the replays this server can still tell apart" for about 5 minutes."""
    from ledgermq.security.acl.strong import NonceCache

    cache = NonceCache(skew_s=300, max_nonces=100)
    now_ms = 1_800_000_000_000
    cache.remember("honest", "h0", now_ms, now_ms)
    for i in range(1_000):
        cache.remember("flooder", f"f{i}", now_ms + 299_000, now_ms)
    assert "older than the replays" in (cache.problem("flooder", "new", now_ms + 1) or "")
    assert cache.problem("honest", "h1", now_ms + 1) is None


@pytest.mark.parametrize("code", sorted(ADMIN_CODES))
def test_every_admin_code_is_refused_to_an_account_that_is_not_admin(code: int) -> None:
    """Every admin-only request (membership changes, REPLICA_BACKUP, which writes a directory on
    the replica's host, ...) is refused to a plain account, whatever its fields say."""
    fields = sign_request({"topic": "T", "to": "/tmp/x"}, None, "RocketMQ", "12345678")
    refused = _decide(fields, b"", code=code)
    assert not refused.allowed
    assert "admin" in refused.remark
