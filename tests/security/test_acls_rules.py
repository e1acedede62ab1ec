"""The authorizer's rules on their own (no broker): Kafka's AclAuthorizer semantics.

Each rule gets a case that fails if the rule were dropped, and hypothesis checks the
invariants over random ACL sets: DENY always wins, super users always pass, an ALLOW that
matches exactly always grants when nothing denies, and the cached answer equals a fresh one.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.security.acls import (AclBinding, AclFilter, AclOperation, AclPermissionType, InvalidAcl, PatternType,
                                  ResourceType)
from server.security.authorizer import Authorizer, parse_super_users

Op, RT, PT, P = AclOperation, ResourceType, PatternType, AclPermissionType
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.5"


def acl(name="t", principal=ALICE, op=Op.READ, perm=P.ALLOW, pattern=PT.LITERAL, host="*", rtype=RT.TOPIC):
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authorizer(*acls, allow_everyone=False, supers=()) -> Authorizer:
    a = Authorizer(super_users=supers, allow_everyone_if_no_acl=allow_everyone)
    a.add(list(acls))
    return a


def allowed(a: Authorizer, op=Op.READ, name="t", principal=ALICE, host=HOST, rtype=RT.TOPIC) -> bool:
    return a.authorize(principal, host, op, rtype, name)


def test_no_acls_follows_allow_everyone():
    assert not allowed(authorizer())
    assert allowed(authorizer(allow_everyone=True))
    # an ACL on the resource for someone else: the resource has ACLs, so no fallback
    assert not allowed(authorizer(acl(principal=BOB), allow_everyone=True))
    assert allowed(authorizer(acl(name="other", principal=BOB), allow_everyone=True))


def test_literal_wildcard_and_prefixed_resources():
    assert allowed(authorizer(acl()))
    assert not allowed(authorizer(acl(name="t2")))
    assert allowed(authorizer(acl(name="*")), name="anything")
    prefixed = authorizer(acl(name="orders-", pattern=PT.PREFIXED))
    assert allowed(prefixed, name="orders-eu") and allowed(prefixed, name="orders-")
    assert not allowed(prefixed, name="order")
    # a LITERAL "orders-" is not a prefix
    assert not allowed(authorizer(acl(name="orders-")), name="orders-eu")


def test_principal_and_host_matching():
    assert allowed(authorizer(acl(principal="User:*")), principal=BOB)
    assert not allowed(authorizer(acl(principal=BOB)))
    assert allowed(authorizer(acl(host=HOST)))
    assert not allowed(authorizer(acl(host="10.0.0.6")))


def test_deny_wins_over_allow():
    a = authorizer(acl(op=Op.ALL), acl(op=Op.READ, perm=P.DENY))
    assert not allowed(a, Op.READ)
    assert allowed(a, Op.WRITE)
    assert not allowed(authorizer(acl(name="*", op=Op.ALL), acl(name="t", pattern=PT.PREFIXED, perm=P.DENY,
                                                                  principal="User:*")))
    assert not allowed(authorizer(acl(), acl(op=Op.ALL, perm=P.DENY, host=HOST)))


def test_implied_operations():
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert allowed(authorizer(acl(op=op)), Op.DESCRIBE)
    assert not allowed(authorizer(acl(op=Op.CREATE)), Op.DESCRIBE)
    assert allowed(authorizer(acl(op=Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS)
    assert not allowed(authorizer(acl(op=Op.DESCRIBE_CONFIGS)), Op.ALTER_CONFIGS)
    assert not allowed(authorizer(acl(op=Op.READ)), Op.WRITE)
    assert allowed(authorizer(acl(op=Op.ALL)), Op.ALTER_CONFIGS)
    # a DENY of DESCRIBE is not implied by a DENY of READ
    assert allowed(authorizer(acl(op=Op.ALL), acl(op=Op.READ, perm=P.DENY)), Op.DESCRIBE)


def test_super_users_bypass_denies():
    a = authorizer(acl(op=Op.ALL, perm=P.DENY), supers=parse_super_users(" User:alice ; User:ops;"))
    assert allowed(a) and allowed(a, principal="User:ops")
    assert not allowed(a, principal=BOB)


def test_idempotent_write_by_any_topic_write():
    a = authorizer(acl(name="orders-", pattern=PT.PREFIXED, op=Op.WRITE))
    assert a.authorize_any(ALICE, HOST, Op.WRITE, RT.TOPIC)
    assert not a.authorize_any(BOB, HOST, Op.WRITE, RT.TOPIC)
    denied = authorizer(acl(name="orders-", pattern=PT.PREFIXED, op=Op.WRITE),
                        acl(name="*", op=Op.WRITE, perm=P.DENY))
    assert not denied.authorize_any(ALICE, HOST, Op.WRITE, RT.TOPIC)


def test_cache_dropped_when_acls_change():
    a = authorizer(allow_everyone=True)
    assert allowed(a)
    a.add([acl(principal=BOB)])
    assert not allowed(a)
    a.remove([AclFilter(RT.ANY, None, PT.ANY, None, None, Op.ANY, P.ANY)])
    assert allowed(a)


def test_validation_refuses_what_kafka_refuses():
    acl().validate()
    for bad in (acl(rtype=RT.GROUP, op=Op.WRITE), acl(rtype=RT.CLUSTER, name="c", op=Op.ALTER),
                acl(principal="alice"), acl(name=""), acl(pattern=PT.MATCH), acl(op=Op.ANY), acl(perm=P.ANY),
                acl(rtype=RT.ANY)):
        with pytest.raises(InvalidAcl):
            bad.validate()
    with pytest.raises(InvalidAcl):
        AclFilter(RT.UNKNOWN, None, PT.ANY, None, None, Op.ANY, P.ANY).validate()


def test_filters():
    lit, pre, wild = acl(name="orders-eu"), acl(name="orders-", pattern=PT.PREFIXED), acl(name="*")
    a = authorizer(lit, pre, wild, acl(name="x", rtype=RT.GROUP))
    match = AclFilter(RT.TOPIC, "orders-eu", PT.MATCH, None, None, Op.ANY, P.ANY)
    assert set(a.describe(match)) == {lit, pre, wild}
    exact = AclFilter(RT.TOPIC, "orders-", PT.PREFIXED, None, None, Op.ANY, P.ANY)
    assert a.describe(exact) == [pre]
    assert a.describe(AclFilter(RT.ANY, None, PT.ANY, BOB, None, Op.ANY, P.ANY)) == []


def test_persisted_and_reloaded(tmp_path):
    path = tmp_path / "__security" / "acls.json"
    a = Authorizer(path=path)
    a.add([acl(), acl(name="g", rtype=RT.GROUP, pattern=PT.PREFIXED, perm=P.DENY)])
    assert json.loads(path.read_text())["version"] == 1
    b = Authorizer(path=path)
    b.load()
    assert b.acls() == a.acls()


bindings = st.builds(
    AclBinding, st.sampled_from([RT.TOPIC]), st.sampled_from(["t", "t-1", "*", "t-", "u"]),
    st.sampled_from([PT.LITERAL, PT.PREFIXED]), st.sampled_from([ALICE, BOB, "User:*"]),
    st.sampled_from(["*", HOST, "10.9.9.9"]), st.sampled_from([Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE]),
    st.sampled_from([P.ALLOW, P.DENY]))


@settings(max_examples=300, deadline=None)
@given(st.lists(bindings, max_size=8), st.sampled_from(["t", "t-1", "u", "v"]),
       st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE]), st.booleans())
def test_invariants(acls, name, op, allow_everyone):
    a = authorizer(*acls, allow_everyone=allow_everyone)
    answer = allowed(a, op, name)
    assert allowed(a, op, name) == answer  # cached
    applies = a.matching(RT.TOPIC, name)
    mine = [b for b in applies if b.principal in (ALICE, "User:*") and b.host in ("*", HOST)]
    if any(b.permission == P.DENY and b.operation in (op, Op.ALL) for b in mine):
        assert not answer
    elif any(b.permission == P.ALLOW and b.operation in (op, Op.ALL) for b in mine):
        assert answer
    if not applies:
        assert answer == allow_everyone
    assert authorizer(*acls, supers={ALICE}).authorize(ALICE, HOST, op, RT.TOPIC, name)
