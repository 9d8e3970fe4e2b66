"""A request's response channel as the faults see it: dropped, throttled or held."""

from __future__ import annotations

from typing import Any

import trio

from trikafka.network.request_channel import CloseConnectionResponse, SendResponse
from trikafka.server.throttling import with_throttle_time
from trikafka.testing.fault_codes import FaultKind

__all__ = ["FaultyResponses", "KIP_219_VERSIONS", "put"]

#: The first version of each API whose throttled responses are sent at once, with the
#: client expected to back off (KIP-219); before it the broker delays the response.
KIP_219_VERSIONS = {
    0: 6, 1: 8, 2: 3, 3: 6, 8: 4, 9: 4, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2, 15: 2, 16: 2,
    18: 2, 19: 3, 20: 2, 21: 1, 22: 1, 24: 1, 25: 1, 26: 1, 28: 1, 32: 2, 33: 1, 37: 1, 42: 1,
}  # fmt: skip


class FaultyResponses:
    """Stands in for a request's response channel to drop, throttle or hold its answer."""

    __slots__ = ("faults", "request", "slot", "hit")

    def __init__(self, faults: Any, request: Any, slot: Any, hit: list[Any]) -> None:  # a Faults, its hit Faults
        self.faults, self.request, self.slot, self.hit = faults, request, slot, hit

    def send_nowait(self, response: Any) -> None:
        faults, request = self.faults, self.request
        kinds = {f.kind: f for f in self.hit}
        if (fault := kinds.get(FaultKind.DROP_AFTER)) is not None:
            faults.note(fault, request)
            response = CloseConnectionResponse()
        elif (fault := kinds.get(FaultKind.THROTTLE)) is not None and isinstance(response, SendResponse):
            faults.note(fault, request)
            seconds = fault.throttle_time_ms / 1000
            if request.api_version >= KIP_219_VERSIONS.get(request.api_key, 0):
                response = with_throttle_time(request, response, fault.throttle_time_ms)
                faults.mute(request.connection_id, trio.current_time() + seconds)
            else:  # before KIP-219 the broker held the response for the throttle time
                faults.context.purgatory.delay(
                    _put_later, self.slot, response, trio.current_time() + seconds, name="fault-throttle"
                )
                return
        if (fault := kinds.get(FaultKind.HOLD)) is not None and fault in faults.faults:
            faults.note(fault, request)
            fault.held.append((self.slot, response))
            return
        put(self.slot, response)


async def _put_later(slot: Any, response: Any, until: float) -> None:
    await trio.sleep_until(until)
    put(slot, response)


def put(channel: Any, response: Any) -> int:
    try:
        channel.send_nowait(response)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return 0  # the client went away meanwhile
    return 1
