"""librdkafka's mock cluster in a process of its own: the reference the benchmarks compare with.

Why a process: the mock runs its I/O on a C thread inside librdkafka, but it is started from
Python; in the harness's own process it would share a machine's worth of scheduling with the
load and with the GIL-holding client. Here it has the process to itself.

The library is the librdkafka that the confluent-kafka wheel bundles (``confluent_kafka.libs``),
reached through ctypes: ``rd_kafka_new`` makes the producer handle the mock needs,
``rd_kafka_mock_cluster_new`` starts one broker on 127.0.0.1 (an ephemeral port), and
``rd_kafka_mock_cluster_bootstraps`` tells us where.

Protocol with the parent, one line each way (stdout is flushed per line):

    → READY <host:port> <startup_ms>      startup_ms: dlopen + rd_kafka_new + mock_cluster_new
    ← topic <name> <partitions>           → ok | error <code>   (the mock has no CreateTopics)
    ← group-initial-rebalance-delay <ms>  → ok   (the mock's group.initial.rebalance.delay.ms,
                                                  3000 as Kafka's unless changed)
    ← (EOF on stdin)                      the cluster is destroyed and the process exits

The mock keeps at most 5 MiB (and 100,000 batches) per partition and drops the oldest batches
beyond that, so the harness spreads consume workloads over enough partitions to keep them.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import time

__all__ = ["find_librdkafka", "main"]


def find_librdkafka() -> str:
    """The path of the librdkafka shared object inside the installed confluent-kafka wheel."""
    import confluent_kafka

    package = os.path.dirname(os.path.abspath(confluent_kafka.__file__))
    candidates = sorted(
        glob.glob(os.path.join(os.path.dirname(package), "confluent_kafka.libs", "librdkafka*.so*"))
        + glob.glob(os.path.join(package, ".libs", "librdkafka*.so*"))
        + glob.glob(os.path.join(package, "librdkafka*.so*"))
    )
    if not candidates:
        raise FileNotFoundError(f"no librdkafka*.so* next to {package}")
    return candidates[0]


def _load(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.restype = ctypes.c_int
    lib.rd_kafka_conf_set.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t
    ]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
    lib.rd_kafka_mock_topic_create.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int
    ]
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms.restype = None
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    return lib


def main() -> int:
    path = find_librdkafka()
    start = time.perf_counter()  # from loading the library to a listening broker
    lib = _load(path)
    errstr = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    # The handle only hosts the mock; keep it quiet about having no bootstrap servers.
    lib.rd_kafka_conf_set(conf, b"log_level", b"3", errstr, len(errstr))
    rk = lib.rd_kafka_new(0, conf, errstr, len(errstr))  # RD_KAFKA_PRODUCER
    if not rk:
        print(f"error rd_kafka_new: {errstr.value.decode()}", flush=True)
        return 1
    cluster = lib.rd_kafka_mock_cluster_new(rk, 1)
    if not cluster:
        print("error rd_kafka_mock_cluster_new failed", flush=True)
        return 1
    bootstraps = lib.rd_kafka_mock_cluster_bootstraps(cluster).decode()
    startup_ms = (time.perf_counter() - start) * 1000
    print(f"READY {bootstraps.split(',')[0]} {startup_ms:.3f}", flush=True)
    try:
        for line in sys.stdin:
            words = line.split()
            if len(words) == 3 and words[0] == "topic":
                code = lib.rd_kafka_mock_topic_create(cluster, words[1].encode(), int(words[2]), 1)
                print("ok" if code == 0 else f"error {code}", flush=True)
            elif len(words) == 2 and words[0] == "group-initial-rebalance-delay":
                lib.rd_kafka_mock_group_initial_rebalance_delay_ms(cluster, int(words[1]))
                print("ok", flush=True)
            elif words:
                print(f"error unknown command {words[0]!r}", flush=True)
    finally:
        lib.rd_kafka_mock_cluster_destroy(cluster)
        lib.rd_kafka_destroy(rk)
    return 0


if __name__ == "__main__":
    sys.exit(main())
