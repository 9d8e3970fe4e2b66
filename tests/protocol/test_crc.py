"""CRC-32C of record batches: the package's function, loaded without the package's ``__init__``."""

from __future__ import annotations

import subprocess
import sys

from trikafka.protocol import crc

CHECK = 0xE3069283  # CRC-32C of b"123456789"

#: A batch of one record, checked by the C walk: its CRC must come from crc.implementation().
FIRST_BATCH = """
import sys
from trikafka.protocol.records import NATIVE_RECORD_WALK, iter_batches
from trikafka.protocol.crc import crc32c
batch = bytes.fromhex("{batch}")
[header] = iter_batches(batch)
assert crc32c(b"123456789") == {check}
print(NATIVE_RECORD_WALK, header.record_count, sorted(m for m in ("crc32c", "importlib.metadata") if m in sys.modules))
"""


def test_the_first_checksum_does_not_run_the_crc32c_package_init():
    """The package's ``__init__`` reads importlib.metadata and imports its command line: tens of
    milliseconds inside a broker's first Produce. The compiled module alone is loaded."""
    from trikafka.protocol.records import build_batch

    batch = build_batch([(None, b"value", [], 1)]).hex()
    out = subprocess.run(
        [sys.executable, "-c", FIRST_BATCH.format(batch=batch, check=CHECK)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.split(" ", 2)
    assert out[1:] == ["1", "[]\n"]


def test_without_the_compiled_module_the_package_is_imported(monkeypatch):
    monkeypatch.setattr(crc, "_impl", None)
    monkeypatch.setattr(crc, "_compiled", lambda: None)
    assert crc.crc32c(b"123456789") == CHECK
    assert crc.crc32c(b"6789", crc.crc32c(b"12345")) == CHECK  # continued over parts
    import crc32c

    assert crc.implementation() is crc32c.crc32c


def test_the_compiled_module_gives_the_packages_answers():
    compiled = crc._compiled()
    assert compiled is not None
    import crc32c

    for data in (b"", b"123456789", bytes(range(256)) * 40):
        assert compiled(data) == crc32c.crc32c(data)
