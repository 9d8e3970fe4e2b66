"""The sans-IO ConnectionState: bytes in, requests out, the mute cycle as a table.

No event loop anywhere in this module: that the state machine can be driven byte by byte
from plain functions is the point (h11's tests are the model).
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

import trikafka
from trikafka.network.connection_state import (
    NEED_DATA,
    SHUTTING_DOWN,
    TRANSITIONS,
    Closed,
    ConnectionEvent,
    ConnectionState,
    ConnectionStateError,
    MuteState,
)
from trikafka.network.responses import CloseConnectionResponse, NoOpResponse, SendResponse
from trikafka.protocol.headers import DecodedRequest
from trikafka.protocol.registry import ApiRegistry
from trikafka.testing.frames import api_versions_frame

REGISTRY = ApiRegistry()


def _state(max_size: int = 1024 * 1024, **kwargs) -> ConnectionState:
    return ConnectionState("127.0.0.1:9092-127.0.0.1:5000-0", REGISTRY, max_size, **kwargs)


def _answer(state: ConnectionState, response=None) -> object:
    state.request_queued()
    return state.send_response(response or SendResponse(b"answer"))


def test_a_request_split_at_every_byte_decodes_once():
    frames = api_versions_frame(7) + api_versions_frame(8)
    for cut in range(len(frames) + 1):
        state = _state()
        state.receive_data(frames[:cut])
        seen = []
        for chunk in (b"", frames[cut:]):
            state.receive_data(chunk)
            while state.state is MuteState.NOT_MUTED:
                event = state.next_event()
                if event is NEED_DATA:
                    break
                assert isinstance(event, DecodedRequest)
                assert state.frame_size == len(api_versions_frame(0)) - 4
                seen.append(event.correlation_id)
                assert _answer(state) == b"answer", cut  # each answer on its own
        assert seen == [7, 8], cut


def test_the_mute_cycle():
    state = _state()
    state.receive_data(api_versions_frame(1) + api_versions_frame(2))
    assert state.state is MuteState.NOT_MUTED
    assert isinstance(state.next_event(), DecodedRequest)
    assert state.state is MuteState.MUTED
    state.request_queued()
    assert state.state is MuteState.MUTED_AND_RESPONSE_PENDING
    assert state.send_response(NoOpResponse()) is None  # acks=0: nothing to write
    assert state.state is MuteState.NOT_MUTED
    assert state.next_event().correlation_id == 2


def test_a_throttled_answer_is_written_then_the_connection_stays_muted():
    """KIP-219: THROTTLE_STARTED before the answer; after it the connection hands out no
    request (asking is our bug) until THROTTLE_ENDED."""
    state = _state()
    state.receive_data(api_versions_frame(1) + api_versions_frame(2))
    state.next_event()
    state.request_queued()
    state.throttle_started()
    assert state.state is MuteState.MUTED_AND_THROTTLED_AND_RESPONSE_PENDING
    assert state.send_response(SendResponse(b"answer")) == b"answer"  # written at once
    assert state.state is MuteState.MUTED_AND_THROTTLED
    with pytest.raises(ConnectionStateError, match="REQUEST_RECEIVED is not allowed in state MUTED_AND_THROTTLED"):
        state.next_event()
    state.throttle_ended()
    assert state.state is MuteState.NOT_MUTED
    assert state.next_event().correlation_id == 2


def test_a_throttle_may_end_before_its_answer_is_written():
    state = _state()
    state.receive_data(api_versions_frame(1))
    state.next_event()
    state.request_queued()
    state.throttle_started()
    state.throttle_ended()
    assert state.state is MuteState.MUTED_AND_RESPONSE_PENDING
    assert state.send_response(SendResponse(b"answer")) == b"answer"
    assert state.state is MuteState.NOT_MUTED


def test_response_parts_are_handed_back_unjoined():
    state = _state()
    state.receive_data(api_versions_frame(1))
    state.next_event()
    parts = (b"head", memoryview(b"records"))
    assert _answer(state, SendResponse(parts)) is parts


@pytest.mark.parametrize(
    ("move", "state_name", "event_name"),
    [
        ("request_queued", "NOT_MUTED", "REQUEST_QUEUED"),
        ("next_event_twice", "MUTED", "REQUEST_RECEIVED"),
        ("respond_before_queued", "MUTED", "RESPONSE_SENT"),
        ("next_event_while_pending", "MUTED_AND_RESPONSE_PENDING", "REQUEST_RECEIVED"),
        ("queued_twice", "MUTED_AND_RESPONSE_PENDING", "REQUEST_QUEUED"),
        ("close_before_queued", "MUTED", "RESPONSE_SENT"),
    ],
)
def test_an_illegal_move_names_state_event_and_connection(move, state_name, event_name):
    state = _state()
    state.receive_data(api_versions_frame(1) * 2)
    with pytest.raises(ConnectionStateError) as info:
        if move == "request_queued":
            state.request_queued()
        state.next_event()
        if move == "next_event_twice":
            state.next_event()
        if move == "respond_before_queued":
            state.send_response(SendResponse(b""))
        if move == "close_before_queued":
            state.send_response(CloseConnectionResponse())
        state.request_queued()
        if move == "queued_twice":
            state.request_queued()
        state.next_event()
    message = str(info.value)
    assert state_name in message and event_name in message
    assert "127.0.0.1:9092-127.0.0.1:5000-0" in message
    assert (str(info.value.state), str(info.value.event)) == (state_name, event_name)


def test_every_absent_row_is_illegal():
    for state in MuteState:
        for event in ConnectionEvent:
            if event in TRANSITIONS[state]:
                continue
            machine = _state(initial=state)
            with pytest.raises(ConnectionStateError):
                if event is ConnectionEvent.REQUEST_RECEIVED:
                    machine.next_event()
                elif event is ConnectionEvent.REQUEST_QUEUED:
                    machine.request_queued()
                elif event is ConnectionEvent.RESPONSE_SENT:
                    machine.send_response(SendResponse(b""))
                elif event is ConnectionEvent.AUTHENTICATED:  # only from SASL_TRANSITIONS' rows
                    machine.authenticated()
                elif event is ConnectionEvent.THROTTLE_STARTED:
                    machine.throttle_started()
                elif event is ConnectionEvent.THROTTLE_ENDED:
                    machine.throttle_ended()
                elif event is ConnectionEvent.REAUTHENTICATE:  # only from SASL_TRANSITIONS' rows
                    machine.reauthentication_started(frozenset(), 1024)
                else:
                    pytest.fail(f"CLOSE must be legal from {state}")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        pytest.param(struct.pack(">i", 1025), "frame size 1025 is outside 0..1024", id="oversized"),
        pytest.param(struct.pack(">i", -1), "frame size -1", id="negative"),
        pytest.param(struct.pack(">i", 6) + b"\xff\xfe\x00\x00zz", "shorter than a header", id="garbage"),
        pytest.param(struct.pack(">ihhi", 8, 9999, 0, 1), "unknown api key 9999", id="unknown-api"),
        pytest.param(struct.pack(">ihhi", 8, 3, 99, 1), "Metadata v99 is not supported", id="version"),
    ],
)
def test_bad_bytes_close_as_the_clients_fault(data, reason):
    state = _state(max_size=1024)
    state.receive_data(data)
    event = state.next_event()
    assert isinstance(event, Closed)
    assert reason in event.reason
    assert event.client_fault
    assert state.state is MuteState.CLOSED
    with pytest.raises(ConnectionStateError):
        state.next_event()


def test_close_response_is_not_the_clients_fault():
    state = _state()
    state.receive_data(api_versions_frame(1))
    state.next_event()
    assert _answer(state, CloseConnectionResponse()) == Closed(
        "closed by the request handler", client_fault=False
    )
    assert state.state is MuteState.CLOSED
    state.close()  # closing twice is fine: the shell closes in its finally
    assert state.state is MuteState.CLOSED


def test_the_authentication_hook():
    """Issue 14's SASL states slot in as rows and an API filter, without touching the class."""
    authenticating = "AUTHENTICATING"
    table = {
        **TRANSITIONS,
        authenticating: {
            ConnectionEvent.REQUEST_RECEIVED: "AUTHENTICATING_MUTED",
            ConnectionEvent.CLOSE: MuteState.CLOSED,
        },
    }
    state = _state(transitions=table, initial=authenticating)
    state.allowed_api_keys = frozenset({18, 17, 36})  # ApiVersions, SaslHandshake, SaslAuthenticate
    state.receive_data(api_versions_frame(1))
    assert isinstance(state.next_event(), DecodedRequest)
    assert state.state == "AUTHENTICATING_MUTED"

    refused = _state(transitions=table, initial=authenticating)
    refused.allowed_api_keys = frozenset({18, 17, 36})
    refused.receive_data(struct.pack(">ihhi", 8, 3, 12, 1))
    event = refused.next_event()
    assert event == Closed("Metadata is not allowed in this state", client_fault=True)


def test_connection_state_imports_no_trio():
    """Sans-IO for real: importing the module (and all it imports) never loads trio."""
    package = Path(trikafka.__file__).parent
    script = f"""
import sys, types
for name, sub in (("trikafka", ""), ("trikafka.network", "network"), ("trikafka.protocol", "protocol")):
    module = types.ModuleType(name)
    module.__path__ = [{str(package)!r} + ("/" + sub if sub else "")]
    sys.modules[name] = module  # skip the package __init__s, which start brokers
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("trio", "trio_util", "outcome"):
            raise ImportError(f"sans-IO module imported {{name}}")
sys.meta_path.insert(0, Refuse())
import trikafka.network.connection_state
assert "trio" not in sys.modules
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_stop_reading_drops_pipelined_requests_not_the_one_in_flight():
    state = _state()
    state.receive_data(api_versions_frame(1) + api_versions_frame(2) + api_versions_frame(3)[:5])
    in_flight = state.next_event()
    dropped = state.stop_reading()
    assert dropped == len(api_versions_frame(2)) + 5
    assert in_flight.correlation_id == 1
    assert _answer(state) == b"answer"
    # Where the next request would be read, the connection closes instead (not the client's fault).
    assert state.next_event() == Closed(SHUTTING_DOWN, client_fault=False)
    assert state.state is MuteState.CLOSED


# -- one answer, one write -----------------------------------------------------------------


def _serve_next(state: ConnectionState, answer: object) -> object:
    event = state.next_event()
    assert isinstance(event, DecodedRequest)
    state.request_queued()
    return state.send_response(answer if not isinstance(answer, bytes) else SendResponse(answer))


def test_pipelined_answers_are_never_held_back():
    """The next request is buffered whole, yet each answer is returned to be written now:
    the mute reads the next frame only after the answer before it is out."""
    state = _state()
    state.receive_data(b"".join(api_versions_frame(i) for i in range(1, 4)))
    assert _serve_next(state, b"one") == b"one"
    assert _serve_next(state, NoOpResponse()) is None  # acks=0: nothing to write
    assert _serve_next(state, b"three") == b"three"


def test_an_answer_in_parts_is_returned_as_its_parts():
    state = _state()
    state.receive_data(b"".join(api_versions_frame(i) for i in range(1, 3)))
    parts = (b"header", memoryview(b"records"))
    assert _serve_next(state, SendResponse(parts)) == parts


def test_a_close_from_the_handler_closes():
    state = _state()
    state.receive_data(api_versions_frame(1) + api_versions_frame(2))
    assert isinstance(_serve_next(state, CloseConnectionResponse()), Closed)
    assert state.state is MuteState.CLOSED
