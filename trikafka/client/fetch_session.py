"""The client's side of incremental fetch sessions (KIP-227; Java's ``FetchSessionHandler``), sans-IO.

One :class:`FetchSessionHandler` per broker. The first Fetch is *full* (epoch 0): it names
every partition wanted and asks the broker to open a session. While the session lives, each
Fetch is *incremental*: it names only partitions whose fetch offset changed since the broker
last heard of them (new ones included), lists the ones no longer wanted as forgotten, and
carries the next epoch; the broker answers only partitions with news. An idle consumer of many
partitions then sends and receives a few dozen bytes per poll.

Anything that leaves the two sides unsure of each other — FETCH_SESSION_ID_NOT_FOUND,
INVALID_FETCH_SESSION_EPOCH, a lost connection, a fetch cancelled after it was sent (a poll's
timeout), an answer without a session — resets the handler: the next Fetch is full again, with
the old session id and epoch 0, which closes that session on the broker and opens a new one.
"""

from __future__ import annotations

from collections.abc import Mapping

from trikafka.client.cluster import TopicPartition
from trikafka.errors import ErrorCode

__all__ = ["FetchSessionHandler", "SESSION_ERRORS"]

INT32_MAX = 2**31 - 1
SESSION_ERRORS = frozenset({ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch})


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = 0  # the epoch the next request carries; 0: a full fetch
        self.sent: dict[TopicPartition, int] = {}  # what the broker's session holds: partition → fetch offset
        self._pending: dict[TopicPartition, int] | None = None  # wanted by the request in flight

    def build(
        self, wanted: Mapping[TopicPartition, int]
    ) -> tuple[int, int, dict[TopicPartition, int], list[TopicPartition]]:
        """(session_id, epoch, partitions to name with their offsets, partitions to forget)."""
        self._pending = dict(wanted)
        if self.epoch == 0:
            return self.session_id, 0, dict(wanted), []
        changed = {tp: offset for tp, offset in wanted.items() if self.sent.get(tp) != offset}
        forgotten = [tp for tp in self.sent if tp not in wanted]
        return self.session_id, self.epoch, changed, forgotten

    def handle_response(self, error_code: int, session_id: int) -> bool:
        """Absorb the answer's top-level error and session id; False when the answer is a
        session error to drop (the next request is full)."""
        wanted, self._pending = self._pending, None
        code = ErrorCode(error_code)
        if code in SESSION_ERRORS or wanted is None:
            self.reset()
            return code not in SESSION_ERRORS
        if code != ErrorCode.none or not session_id:
            self.reset()
            self.session_id = session_id if code == ErrorCode.none else self.session_id
            return True
        if self.epoch == 0 or session_id != self.session_id:
            self.session_id, self.epoch = session_id, 1
        else:
            self.epoch = 1 if self.epoch >= INT32_MAX else self.epoch + 1
        self.sent = wanted
        return True

    def reset(self) -> None:
        """Start over with a full fetch (the old session id, epoch 0: the broker replaces it)."""
        self.epoch = 0
        self.sent = {}
        self._pending = None
