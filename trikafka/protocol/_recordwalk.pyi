# The C extension's signatures (trikafka/protocol/_recordwalk.c; each function's docstring
# there says what it returns and when None sends the caller to the pure-Python reference).
from collections.abc import Sequence

Buffer = bytes | bytearray | memoryview

RecordTuple = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]

def walk_records(buffer: Buffer, position: int, end: int, count: int, base_offset: int, /) -> None: ...
def check_batch(buffer: Buffer, position: int, total: int, walk: bool, /) -> tuple[int, ...] | None: ...
def decode_records(
    buffer: Buffer, position: int, end: int, count: int, base_offset: int, base_timestamp: int,
    append_time: int | None, /,
) -> list[RecordTuple] | None: ...
def record_objects(
    buffer: Buffer, position: int, end: int, count: int, base_offset: int, base_timestamp: int,
    append_time: int | None, cls: type, record_slots: Sequence[object], constant_slots: Sequence[object],
    constants: Sequence[object], floor: int, /,
) -> list[object] | None: ...
def encode_records(
    records: Sequence[tuple[bytes | None, bytes | None, Sequence[tuple[str | bytes, bytes | None]], int]],
    base_timestamp: int, /,
) -> tuple[bytes, int] | None: ...
def murmur2(key: Buffer, /) -> int: ...
def encode_record_parts(
    records: Sequence[tuple[bytes | None, bytes | None, Sequence[tuple[str | bytes, bytes | None]], int]],
    base_timestamp: int, separate: int, /,
) -> tuple[list[bytes], int] | None: ...
def future_type(cls: type, batch_slot: object, index_slot: object, /) -> None: ...
def new_future(
    batch: object, records: list[object], futures: list[object], key: bytes | None, value: bytes | None,
    headers: object, timestamp: int | None, /,
) -> object: ...
def gc_track(obj: object, /) -> None: ...
