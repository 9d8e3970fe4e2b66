"""Did this Spark task's Python worker receive all of its input, or did the input stop early?

A Python data source writer gets its rows as an iterator of Arrow batches. When something
upstream of the sink fails in the same task (a UDF raising, an executor losing a shuffle
block), the JVM stops sending and shuts the socket: the Arrow stream then simply ends, and the
iterator ends as if the task's rows were all there. Spark fails the task afterwards, but a
sink that commits when its iterator ends has already committed a part of the partition — and
for the exactly-once sink, its marker too, so the retry would skip the rest.

The one signal there is comes after the data: when the input is complete the JVM writes
``END_OF_STREAM`` right behind it (pyspark's worker reads it once the task's function
returned, to decide whether the worker may be reused). :func:`input_complete` looks at those
next four bytes without consuming them. It needs the worker's input stream, which pyspark
does not hand to data sources: it is found as the ``infile`` argument of pyspark's worker
``main`` on the call stack (pyspark 4.x). Where it is not found, the answer is ``None``.
"""

from __future__ import annotations

import os
import select
import struct
import sys
from types import FrameType
from typing import Any

__all__ = ["END_OF_STREAM_WAIT", "input_complete"]

#: Seconds to wait for the bytes after the data. The JVM writes them with the data's end; when an
#: upstream failure cut the input off it ends the Arrow stream but sends nothing more, and
#: waits for this worker: the wait is what a failed attempt costs (too short a wait under
#: load would only fail a complete task, which Spark retries).
END_OF_STREAM_WAIT = 10.0


def _worker_infile() -> Any:
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "main" and (
            frame.f_globals.get("__name__", "").startswith("pyspark.")  # via pyspark.daemon
            or code.co_filename.replace(os.sep, "/").endswith("/pyspark/worker.py")  # python -m pyspark.worker
        ):
            infile = frame.f_locals.get("infile")
            if infile is not None and hasattr(infile, "peek") and hasattr(infile, "fileno"):
                return infile
        frame = frame.f_back
    return None


def _peek(infile: Any, wait: float) -> bytes:
    fd = infile.fileno()
    blocking = os.get_blocking(fd)
    os.set_blocking(fd, False)
    try:
        data = infile.peek(4)  # what is buffered, or one non-blocking read
    except BlockingIOError:
        data = b""
    finally:
        os.set_blocking(fd, blocking)
    if data:
        return bytes(data)
    ready, _, _ = select.select([fd], [], [], wait)
    return bytes(infile.peek(4)) if ready else b""


def input_complete(wait: float = END_OF_STREAM_WAIT) -> bool | None:
    """``True`` if the JVM marked the end of this task's input, ``False`` if the input was cut
    off, ``None`` if this is not running in a pyspark worker whose input can be checked.

    Call it only after the rows' iterator is exhausted.
    """
    from pyspark.serializers import SpecialLengths

    infile = _worker_infile()
    if infile is None:
        return None
    try:
        data = _peek(infile, wait)
    except (OSError, ValueError):
        return False
    return data[:4] == struct.pack(">i", SpecialLengths.END_OF_STREAM)
