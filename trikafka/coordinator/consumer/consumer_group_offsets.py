"""Offsets of consumer groups: the member checks of OffsetCommit, OffsetFetch and
TxnOffsetCommit under KIP-848 (Kafka's ``ConsumerGroup.validateOffsetCommit/Fetch``).

The ``generation_id`` field of those requests carries the **member epoch** for a consumer
group (OffsetCommit v9 renamed it ``generation_id_or_member_epoch``). A commit with a
negative epoch into a group without members is an admin's or a standalone consumer's and is
allowed; otherwise the member must exist (UNKNOWN_MEMBER_ID) and its epoch be the current one
(STALE_MEMBER_EPOCH). A consumer-protocol member must use OffsetCommit v9+
(UNSUPPORTED_VERSION); a classic member of the group commits with any version, its
generation being its member epoch (ILLEGAL_GENERATION otherwise). TxnOffsetCommit answers a
stale epoch with ILLEGAL_GENERATION, the code transactional producers already handle as
"fenced by a rebalance".
"""

from __future__ import annotations

from trikafka.coordinator.consumer.consumer_group import ConsumerGroup
from trikafka.errors import ErrorCode

__all__ = ["check_commit", "check_fetch", "check_transactional_commit"]


def check_commit(group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int) -> ErrorCode | None:
    if member_epoch < 0 and not group.members:
        return None
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.unknown_member_id
    if member.uses_classic_protocol:  # its generation is its member epoch
        return ErrorCode.illegal_generation if member_epoch != member.member_epoch else None
    if api_version < 9:
        return ErrorCode.unsupported_version
    if member_epoch != member.member_epoch:
        return ErrorCode.stale_member_epoch
    return None


def check_transactional_commit(group: ConsumerGroup, member_id: str, member_epoch: int) -> ErrorCode | None:
    if member_epoch < 0:
        return None
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.unknown_member_id
    if member_epoch != member.member_epoch:
        return ErrorCode.illegal_generation
    return None


def check_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> ErrorCode | None:
    """OffsetFetch v9+: an admin fetch (no member, epoch -1) is always allowed."""
    if member_epoch < 0 and not member_id:
        return None
    member = group.members.get(member_id or "")
    if member is None:
        return ErrorCode.unknown_member_id
    if member_epoch != member.member_epoch:
        return ErrorCode.stale_member_epoch
    return None
