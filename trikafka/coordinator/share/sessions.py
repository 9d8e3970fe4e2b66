"""Share sessions (KIP-932, after KIP-227's fetch sessions): which partitions a member fetches
from this broker, so each ShareFetch names only what changed.

A session is keyed by (group id, member id, node id): each broker a member fetches from keeps
its own session (in an in-process cluster the cache is shared, the sessions are not).
ShareFetch with epoch 0 opens one (replacing any old one: its acquired records are released)
with the request's partitions; a later request must carry the session's current epoch, and
each accepted request moves it on by one (after
``INT32_MAX`` comes 1). Epoch -1 is the final request: its acknowledgements are applied and
the session closed (ShareAcknowledge; a ShareFetch with -1 may not fetch). Errors, as Kafka:
SHARE_SESSION_NOT_FOUND for a session this broker does not have, INVALID_SHARE_SESSION_EPOCH
for a wrong epoch (and ShareAcknowledge at epoch 0), SHARE_SESSION_LIMIT_REACHED when
``group.share.max.share.sessions`` are open.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from trikafka.errors import ErrorCode, KafkaProtocolError

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "ShareSession", "ShareSessionCache"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1

TopicPartition = tuple[str, int]


@attrs.define
class ShareSession:
    group_id: str
    member_id: str
    node_id: int = 0
    epoch: int = 1
    partitions: list[TopicPartition] = attrs.Factory(list)  # in the order they were added

    def next_epoch(self) -> None:
        self.epoch = 1 if self.epoch >= INT32_MAX else self.epoch + 1


@attrs.define
class ShareSessionCache:
    max_sessions: int = 2000
    sessions: dict[tuple[str, str, int], ShareSession] = attrs.Factory(dict)

    def open(self, group_id: str, member_id: str, partitions: Iterable[TopicPartition],
             node_id: int = 0) -> tuple[ShareSession, ShareSession | None]:
        """Epoch 0: a new session (and the one it replaced, whose records must be released)."""
        key = (group_id, member_id, node_id)
        old = self.sessions.pop(key, None)
        if len(self.sessions) >= self.max_sessions:
            if old is not None:
                self.sessions[key] = old
            raise KafkaProtocolError("The limit of share sessions has been reached.",
                                     ErrorCode.share_session_limit_reached)
        session = ShareSession(group_id, member_id, node_id)
        for tp in partitions:
            if tp not in session.partitions:
                session.partitions.append(tp)
        self.sessions[key] = session
        return session, old

    def get(self, group_id: str, member_id: str, epoch: int, node_id: int = 0) -> ShareSession:
        """The session a request at ``epoch`` (> 0 or -1) belongs to."""
        session = self.sessions.get((group_id, member_id, node_id))
        if session is None:
            raise KafkaProtocolError(f"Share session for member {member_id} not found.",
                                     ErrorCode.share_session_not_found)
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            raise KafkaProtocolError(f"Share session epoch {epoch} is not the expected {session.epoch}.",
                                     ErrorCode.invalid_share_session_epoch)
        return session

    def close(self, group_id: str, member_id: str, node_id: int = 0) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id, node_id), None)

    def of_member(self, group_id: str, member_id: str) -> list[ShareSession]:
        return [s for (g, m, _), s in self.sessions.items() if g == group_id and m == member_id]
