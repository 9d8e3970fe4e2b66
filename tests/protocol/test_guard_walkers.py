"""The generated bounds walkers answer exactly as the reference walk, on any bytes.

``guard._walk`` runs one generated function per entity class; ``guard._interpret`` is the
walk they were written from (the class's plan, step by step). For valid frames of every
supported API version, the same frames mutated, and arbitrary bodies after a valid head,
both must return the same frame, body start and lifted spans — or refuse it with the same
message. Pure bytes; hypothesis derandomized.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trikafka.errors import InvalidRequestError
from trikafka.protocol import guard
from trikafka.protocol.headers import encode_request
from trikafka.protocol.registry import ApiKey

from .test_headers import (
    FUZZ,
    SPECS,
    _minimal_request,
    _spec_id,
    _strip_prefix,
    correlation_ids,
    request_frames,
)


def _outcome(frame: bytes, spec) -> tuple:
    lift: list | None = [] if spec.api_key == ApiKey.PRODUCE else None
    try:
        checked, start = guard.check_request(spec.request_header_type.__flexible__, spec.request_type, frame, lift)
    except InvalidRequestError as exc:
        return ("refused", str(exc))
    return ("passed", bytes(checked), start, lift)


def _both(frame: bytes, spec, monkeypatch: pytest.MonkeyPatch) -> None:
    generated = _outcome(frame, spec)
    with monkeypatch.context() as patch:
        patch.setattr(guard, "_walk", guard._interpret)  # every nested walk too: a global
        reference = _outcome(frame, spec)
    assert generated == reference


@pytest.mark.parametrize("spec", SPECS, ids=_spec_id)
def test_every_api_version_minimal_frame(spec, monkeypatch):
    frame = _strip_prefix(encode_request(spec, 7, _minimal_request(spec), "client"))
    _both(frame, spec, monkeypatch)
    for cut in range(len(frame) - 1, 8, -max(1, len(frame) // 7)):
        _both(frame[:cut], spec, monkeypatch)


@pytest.mark.parametrize("spec", SPECS, ids=_spec_id)
def test_every_byte_of_a_frame_set_to_telling_values(spec, monkeypatch):
    """Each byte after the api head of a small valid frame, set in turn to values that make
    lengths and counts run past the end, go negative or become multi-byte varints."""
    frame = _strip_prefix(encode_request(spec, 7, _minimal_request(spec), "c"))
    for position in range(8, len(frame)):
        for value in (0x00, 0x02, 0x40, 0x7F, 0x80, 0xFF):
            mutated = bytearray(frame)
            mutated[position] = value
            _both(bytes(mutated), spec, monkeypatch)


@FUZZ
@given(frame=request_frames(), edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), max_size=4),
       cut=st.none() | st.integers(min_value=0))
def test_valid_and_mutated_frames(frame, edits, cut):
    spec, data = frame
    mutated = bytearray(data)
    for position, value in edits:
        position = 8 + position % max(1, len(mutated) - 8)
        if position < len(mutated):
            mutated[position] = value
    if cut is not None:
        del mutated[8 + cut % max(1, len(mutated) - 7):]
    with pytest.MonkeyPatch.context() as monkeypatch:
        _both(bytes(data), spec, monkeypatch)
        _both(bytes(mutated), spec, monkeypatch)


@FUZZ
@given(spec=st.sampled_from(SPECS), correlation_id=correlation_ids, tail=st.binary(max_size=96))
def test_any_body_after_a_valid_head(spec, correlation_id, tail):
    frame = struct.pack(">hhi", spec.api_key, spec.version, correlation_id) + tail
    with pytest.MonkeyPatch.context() as monkeypatch:
        _both(frame, spec, monkeypatch)
