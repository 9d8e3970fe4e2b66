"""The protocol side of one connection, sans I/O: bytes in, requests out, responses in, bytes out.

This is h11's shape for Kafka's wire. :class:`ConnectionState` never touches a socket, a
clock or trio: the Trio shell (:mod:`trikafka.network.connection`) feeds it what it read
(``receive_data``, or ``unfilled``/``received_into`` for a large frame received in place),
asks ``next_event()`` for the next decoded request — or ``NEED_DATA``, or :class:`Closed` —
and hands it the handler's answer through ``send_response``, which says what to write.
Tests drive it byte by byte without an event loop.

Theory of operation — the mute cycle (Kafka's KafkaChannel ``ChannelMuteState``)::

  NOT_MUTED ──REQUEST_RECEIVED──▶ MUTED ──REQUEST_QUEUED──▶ MUTED_AND_RESPONSE_PENDING
      ▲                                                              │
      └──────────────────── RESPONSE_SENT ◀──────────────────────────┘

  any state ──CLOSE──▶ CLOSED

Throttling (KIP-219, Kafka's THROTTLE_STARTED / THROTTLE_ENDED): an answer over a client
quota comes with a throttle time; it is still written at once, and then the connection
stays muted until the throttle ends::

  MUTED_AND_RESPONSE_PENDING ──THROTTLE_STARTED──▶ MUTED_AND_THROTTLED_AND_RESPONSE_PENDING
  MUTED_AND_THROTTLED_AND_RESPONSE_PENDING ──RESPONSE_SENT──▶ MUTED_AND_THROTTLED
  MUTED_AND_THROTTLED ──THROTTLE_ENDED──▶ NOT_MUTED

While muted the connection hands out no further request, so a client that pipelines leaves
them in the kernel's buffers (and in the frame decoder, if one read brought several): the
broker answers strictly in order, one request in flight per connection. The cycle is the
table :data:`TRANSITIONS`; a move that is not in it is our bug, not the client's, and
raises :class:`ConnectionStateError` naming state, event and connection (h11 ``_state.py``).

Errors know whose fault they are: a size prefix out of range, a header that does not parse
or an API we do not serve is the *client's* fault — ``next_event`` returns
``Closed(reason, client_fault=True)`` and the shell logs one line and closes. A
``CloseConnectionResponse`` from a handler is ``Closed(..., client_fault=False)``.

One answer, one write: ``send_response`` turns each answer into what to write for it alone.
Answers are never held back to be joined with the next one — that would mean reading the
next request before this answer is out, which the mute forbids. A large answer may come as
parts (a fetch's record sets), written in order by one scatter-gather call.

Authentication (SASL listeners): Kafka's SASL states come *before* the mute cycle. Such a
connection is built with :data:`SASL_TRANSITIONS` and starts AUTHENTICATING, where only
ApiVersions, SaslHandshake and SaslAuthenticate are served (``allowed_api_keys``; any other
API is the client's fault and closes, as Kafka's ``IllegalSaslStateException``)::

  AUTHENTICATING ──REQUEST_RECEIVED──▶ AUTHENTICATING_MUTED ──REQUEST_QUEUED──▶ AUTHENTICATING_RESPONSE_PENDING
      ▲    ▲                              │        │                                   │
      │    └────── RESPONSE_SENT ─────────┘        │ AUTHENTICATED                     │
      └──────────────────── RESPONSE_SENT ◀────────┼───────────────────────────────────┘
                                                   ▼
                                               NOT_MUTED (the mute cycle above)

Re-authentication (KIP-368): a SaslHandshake received on an authenticated connection moves
MUTED ──REAUTHENTICATE──▶ AUTHENTICATING_MUTED, and the exchange runs again as above (only
the SASL APIs allowed) until AUTHENTICATED returns it to NOT_MUTED.

ApiVersions goes through the handlers (REQUEST_QUEUED); the SASL requests are answered by
the connection's authenticator (``answered``: RESPONSE_SENT straight from
AUTHENTICATING_MUTED). The answer that completes the exchange moves to NOT_MUTED
(``authenticated``). After a SaslHandshake v0 the client's tokens are bare frames with no
request header: with ``raw_frames`` set, ``next_event`` hands them out as :class:`RawFrame`.
Until authenticated, frames are limited to Kafka's sasl.server.max.receive.size. None of this
costs a plaintext connection anything.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs

from trikafka.errors import InvalidRequestError
from trikafka.network.responses import (
    CloseConnectionResponse,
    NoOpResponse,
    Response,
    SendResponse,
)
from trikafka.protocol.framing import NEED_DATA, FrameDecoder, NeedData
from trikafka.protocol.headers import DecodedRequest, LastRequest, decode_request, peek_api
from trikafka.protocol.registry import ApiRegistry, api_name

__all__ = [
    "NEED_DATA",
    "SASL_TRANSITIONS",
    "SHUTTING_DOWN",
    "TRANSITIONS",
    "AuthState",
    "RawFrame",
    "Closed",
    "ConnectionEvent",
    "ConnectionState",
    "ConnectionStateError",
    "MuteState",
]


class MuteState(enum.StrEnum):
    """Kafka's ChannelMuteState names (a StrEnum: C-speed hashing on the hot path)."""

    NOT_MUTED = "NOT_MUTED"
    MUTED = "MUTED"
    MUTED_AND_RESPONSE_PENDING = "MUTED_AND_RESPONSE_PENDING"
    MUTED_AND_THROTTLED = "MUTED_AND_THROTTLED"
    MUTED_AND_THROTTLED_AND_RESPONSE_PENDING = "MUTED_AND_THROTTLED_AND_RESPONSE_PENDING"
    CLOSED = "CLOSED"


class AuthState(enum.StrEnum):
    """States before a SASL exchange completes (see the module docstring)."""

    AUTHENTICATING = "AUTHENTICATING"
    AUTHENTICATING_MUTED = "AUTHENTICATING_MUTED"
    AUTHENTICATING_RESPONSE_PENDING = "AUTHENTICATING_RESPONSE_PENDING"


class ConnectionEvent(enum.StrEnum):
    REQUEST_RECEIVED = "REQUEST_RECEIVED"  # a whole request frame decoded
    REQUEST_QUEUED = "REQUEST_QUEUED"  # handed to the request channel
    RESPONSE_SENT = "RESPONSE_SENT"  # answer written, or nothing to write (acks=0)
    AUTHENTICATED = "AUTHENTICATED"  # the SASL exchange succeeded
    THROTTLE_STARTED = "THROTTLE_STARTED"  # the answer is over a client quota (KIP-219)
    THROTTLE_ENDED = "THROTTLE_ENDED"  # its throttle time has passed
    REAUTHENTICATE = "REAUTHENTICATE"  # a SaslHandshake on an authenticated connection (KIP-368)
    CLOSE = "CLOSE"


@attrs.frozen
class RawFrame:
    """A frame handed out as bytes, not decoded: a SASL token after SaslHandshake v0."""

    data: bytes


_S = MuteState
_E = ConnectionEvent
_RECEIVED = ConnectionEvent.REQUEST_RECEIVED
_QUEUED = ConnectionEvent.REQUEST_QUEUED
_SENT = ConnectionEvent.RESPONSE_SENT

#: state → event → next state. Everything absent is illegal.
TRANSITIONS: Mapping[MuteState | AuthState, Mapping[ConnectionEvent, MuteState | AuthState]] = {
    _S.NOT_MUTED: {_E.REQUEST_RECEIVED: _S.MUTED, _E.CLOSE: _S.CLOSED},
    _S.MUTED: {_E.REQUEST_QUEUED: _S.MUTED_AND_RESPONSE_PENDING, _E.CLOSE: _S.CLOSED},
    _S.MUTED_AND_RESPONSE_PENDING: {
        _E.RESPONSE_SENT: _S.NOT_MUTED,
        _E.THROTTLE_STARTED: _S.MUTED_AND_THROTTLED_AND_RESPONSE_PENDING,
        _E.CLOSE: _S.CLOSED,
    },
    _S.MUTED_AND_THROTTLED_AND_RESPONSE_PENDING: {
        _E.RESPONSE_SENT: _S.MUTED_AND_THROTTLED,
        _E.THROTTLE_ENDED: _S.MUTED_AND_RESPONSE_PENDING,
        _E.CLOSE: _S.CLOSED,
    },
    _S.MUTED_AND_THROTTLED: {_E.THROTTLE_ENDED: _S.NOT_MUTED, _E.CLOSE: _S.CLOSED},
    _S.CLOSED: {_E.CLOSE: _S.CLOSED},
}

_A = AuthState
#: The mute cycle, preceded by authentication (SASL listeners).
SASL_TRANSITIONS: Mapping[MuteState | AuthState, Mapping[ConnectionEvent, MuteState | AuthState]] = {
    **TRANSITIONS,
    # KIP-368: the SaslHandshake just received starts a new exchange on this connection.
    _S.MUTED: {**TRANSITIONS[_S.MUTED], _E.REAUTHENTICATE: _A.AUTHENTICATING_MUTED},
    _A.AUTHENTICATING: {_E.REQUEST_RECEIVED: _A.AUTHENTICATING_MUTED, _E.CLOSE: _S.CLOSED},
    _A.AUTHENTICATING_MUTED: {
        _E.REQUEST_QUEUED: _A.AUTHENTICATING_RESPONSE_PENDING,  # ApiVersions, to the handlers
        _E.RESPONSE_SENT: _A.AUTHENTICATING,  # the authenticator answered
        _E.AUTHENTICATED: _S.NOT_MUTED,
        _E.CLOSE: _S.CLOSED,
    },
    _A.AUTHENTICATING_RESPONSE_PENDING: {_E.RESPONSE_SENT: _A.AUTHENTICATING, _E.CLOSE: _S.CLOSED},
}


class ConnectionStateError(RuntimeError):
    """An illegal move of the mute cycle: our bug, never the client's."""

    def __init__(self, connection_id: str, state: MuteState | AuthState, event: ConnectionEvent) -> None:
        # str(): a StrEnum's value, or a plain name from an extended table.
        super().__init__(f"connection {connection_id}: {event!s} is not allowed in state {state!s}")
        self.connection_id = connection_id
        self.state = state
        self.event = event


@attrs.frozen
class Closed:
    """The connection must close: why, and whether the client's bytes were to blame."""

    reason: str
    client_fault: bool


#: Why a connection closes once the broker stopped its reading (``Closed`` reason).
SHUTTING_DOWN = "broker shutting down"


class ConnectionState:
    """One connection's frame decoder, request decoder and mute cycle."""

    __slots__ = (
        "connection_id", "state", "frame_size", "allowed_api_keys", "raw_frames", "reading_stopped",
        "receive_data", "unfilled", "received_into",
        "_decoder", "_registry", "_transitions", "_max_request_size", "_last", "__weakref__",
    )

    def __init__(
        self,
        connection_id: str,
        registry: ApiRegistry,
        max_request_size: int,
        *,
        transitions: Mapping[MuteState | AuthState, Mapping[ConnectionEvent, MuteState | AuthState]] = TRANSITIONS,
        initial: MuteState | AuthState = MuteState.NOT_MUTED,
    ) -> None:
        self.connection_id = connection_id
        self.state = initial
        self.frame_size = 0  # bytes of the last request handed out (Request.size)
        self.allowed_api_keys: frozenset[int] | None = None  # None: every API (see module doc)
        self.raw_frames = False  # hand frames out undecoded (SASL tokens after a v0 handshake)
        #: The broker is stopping (:meth:`stop_reading`): no request is handed out any more.
        self.reading_stopped = False
        self._max_request_size = max_request_size
        self._registry = registry
        self._transitions = transitions
        self._last = LastRequest()  # this connection's last small repeatable request, decoded
        self._new_decoder(max_request_size)

    def _new_decoder(self, max_request_size: int) -> None:
        self._decoder = decoder = FrameDecoder(max_request_size)
        #: Feed bytes the transport read.
        self.receive_data = decoder.receive_data
        #: Where a large frame's remaining bytes may be received in place; else None.
        self.unfilled = decoder.unfilled
        #: ``count`` bytes were received into :attr:`unfilled`'s view.
        self.received_into = decoder.received_into

    def stop_reading(self) -> int:
        """The broker is stopping: hand out no more requests; return the bytes dropped.

        Every byte received but not handed out is dropped — pipelined requests are not
        served (Kafka drops them with the connection) — and from now on, where a request
        would be read, :meth:`next_event` is ``Closed(SHUTTING_DOWN)`` instead of
        ``NEED_DATA``. A request in flight is unaffected: its answer is still written (its
        objects, and any views of its frame, keep the old buffers).
        """
        dropped = self._decoder.buffered
        self._new_decoder(self._decoder.max_size)
        self.reading_stopped = True
        return dropped

    # -- bytes in -------------------------------------------------------------------------
    # receive_data(data), unfilled() and received_into(count) are the FrameDecoder's own
    # bound methods, set in __init__: a wrapper here was one more call per read.

    @property
    def buffered(self) -> int:
        return self._decoder.buffered

    @property
    def pending_size(self) -> int:
        """The declared size of the frame being read (its prefix read, its body not all
        here), for the request memory pool; 0 when none is."""
        return self._decoder.pending_size

    # -- events out -----------------------------------------------------------------------

    def next_event(self) -> DecodedRequest | RawFrame | Closed | NeedData:
        """The next decoded request, ``NEED_DATA``, or :class:`Closed` (also once reading
        stopped: :meth:`stop_reading`).

        Only where the table allows REQUEST_RECEIVED (NOT_MUTED): a muted connection hands
        out nothing (``NEED_DATA`` would be a lie, so asking is our bug). A returned request
        moves the cycle on (to MUTED).
        """
        muted = self._transitions[self.state].get(_RECEIVED)
        if muted is None:
            self._illegal(_RECEIVED)
        try:
            frame = self._decoder.next_frame()
            if frame is NEED_DATA:
                return self._close(SHUTTING_DOWN, False) if self.reading_stopped else NEED_DATA
            allowed = self.allowed_api_keys
            if self.raw_frames:
                self.frame_size = len(frame)
                self.state = muted  # type: ignore[assignment]  # checked against None above
                return RawFrame(bytes(frame))
            if allowed is not None:
                api_key = peek_api(frame)[0]  # type: ignore[arg-type]  # a frame: NEED_DATA returned above
                if api_key not in allowed:
                    return self._close(f"{api_name(api_key)} is not allowed in this state", True)
            decoded = decode_request(frame, self._registry, self._last)  # type: ignore[arg-type]  # as above
        except InvalidRequestError as exc:
            return self._close(str(exc), True)
        self.frame_size = len(frame)
        self.state = muted  # type: ignore[assignment]  # checked against None above
        return decoded

    def request_queued(self) -> None:
        """The request is with the request channel; its response is now pending."""
        try:  # _move, inlined: this and send_response run once per request
            self.state = self._transitions[self.state][_QUEUED]
        except KeyError:
            self._illegal(_QUEUED)

    def send_response(self, response: Response) -> bytes | tuple[Any, ...] | Closed | None:
        """What to write for ``response``: bytes, a tuple of parts written in order without
        joining, None (nothing to write: acks=0), or :class:`Closed`. Unmutes unless closing."""
        cls = response.__class__
        if cls is SendResponse or cls is NoOpResponse:
            try:
                self.state = self._transitions[self.state][_SENT]
            except KeyError:
                self._illegal(_SENT)
            if cls is NoOpResponse:
                return None
            return response.data  # type: ignore[union-attr]  # a SendResponse: the others returned
        if cls is CloseConnectionResponse:
            if _SENT not in self._transitions[self.state]:
                self._illegal(_SENT)
            return self._close("closed by the request handler", False)
        raise TypeError(f"connection {self.connection_id}: not a response: {response!r}")

    def close(self) -> None:
        self._move(ConnectionEvent.CLOSE)

    # -- throttling (KIP-219) ---------------------------------------------------------------

    def throttle_started(self) -> None:
        """The pending answer is over a client quota: after it, stay muted."""
        self._move(ConnectionEvent.THROTTLE_STARTED)

    def throttle_ended(self) -> None:
        """The throttle time has passed: unmute (or, answer not yet written, just wait for it)."""
        self._move(ConnectionEvent.THROTTLE_ENDED)

    # -- authentication (SASL_TRANSITIONS) --------------------------------------------------

    def start_authentication(self, allowed_api_keys: frozenset[int], max_receive_size: int) -> None:
        """Before the first byte: serve only ``allowed_api_keys``, frames up to ``max_receive_size``."""
        self.state = AuthState.AUTHENTICATING
        self.allowed_api_keys = allowed_api_keys
        self._decoder.max_size = min(max_receive_size, self._max_request_size)

    def reauthentication_started(self, allowed_api_keys: frozenset[int], max_receive_size: int) -> None:
        """KIP-368: the request just handed out (a SaslHandshake) begins a new exchange."""
        self._move(ConnectionEvent.REAUTHENTICATE)
        self.allowed_api_keys = allowed_api_keys
        self._decoder.max_size = min(max_receive_size, self._max_request_size)

    def answered(self) -> None:
        """The connection wrote the answer itself (the authenticator's); read the next frame."""
        self._move(ConnectionEvent.RESPONSE_SENT)

    def authenticated(self) -> None:
        """The exchange succeeded: every API from now on, full-size frames, the mute cycle."""
        self._move(ConnectionEvent.AUTHENTICATED)
        self.allowed_api_keys = None
        self.raw_frames = False
        self._decoder.max_size = self._max_request_size

    # -- the table ------------------------------------------------------------------------

    def _move(self, event: ConnectionEvent) -> None:
        try:
            self.state = self._transitions[self.state][event]
        except KeyError:
            self._illegal(event)

    def _illegal(self, event: ConnectionEvent) -> None:
        raise ConnectionStateError(self.connection_id, self.state, event) from None

    def _close(self, reason: str, client_fault: bool) -> Closed:
        self._move(ConnectionEvent.CLOSE)
        return Closed(reason, client_fault)
