"""Both kinds of partition log fit the one PartitionLog protocol the request path is typed
with, and both kinds of log set fit PartitionLogs (trikafka/log/partition_log.py)."""

from __future__ import annotations

import inspect
import typing

from trikafka.cluster import open_cluster
from trikafka.cluster.replication import ClusterLogManager, ReplicatedLog
from trikafka.log.log import Log
from trikafka.log.manager import LogManager
from trikafka.log.memory import MemoryLog
from trikafka.log.partition_log import PartitionLog, PartitionLogs


def _methods(protocol: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(protocol).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }


def _accepts(method: object, wanted: inspect.Signature) -> list[str]:
    """The protocol's parameters (minus self) bind to ``method`` as the protocol passes them."""
    args, kwargs = [], {}
    for parameter in list(wanted.parameters.values())[1:]:
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY:
            kwargs[parameter.name] = None
        else:
            args.append(None)
    try:
        inspect.signature(method).bind(*args, **kwargs)
    except TypeError as exc:
        return [str(exc)]
    return []


def _members(protocol: type) -> set[str]:
    """The protocol's members (``typing.get_protocol_members`` on 3.13, the same set before)."""
    found = getattr(typing, "get_protocol_members", None)
    if found is not None:
        return set(found(protocol))
    return set(getattr(protocol, "__protocol_attrs__", None) or typing._get_protocol_attrs(protocol))  # type: ignore[attr-defined]  # 3.11's name for it


def _misfits(obj: object, protocol: type) -> list[str]:
    """What ``obj`` lacks of ``protocol``, looked up as the request path looks it up: a log that
    delegates to its leader's (``ReplicatedLog.__getattr__``) fits. Not ``isinstance``: since
    3.12 a runtime-checkable protocol looks attributes up statically, without ``__getattr__``."""
    problems = [f"{type(obj).__name__} has no {name}" for name in sorted(_members(protocol)) if not hasattr(obj, name)]
    for name, wanted in _methods(protocol).items():
        if hasattr(obj, name):
            problems += [f"{type(obj).__name__}.{name}: {p}" for p in _accepts(getattr(obj, name), wanted)]
    return problems


def test_the_protocols_list_what_the_request_path_uses():
    members = set(dir(PartitionLog))
    assert {"append", "read", "high_watermark", "last_stable_offset", "closed", "delete_records_before"} <= members
    assert {"get_log", "logs", "create_logs", "delete_log", "flush_log"} <= set(dir(PartitionLogs))
    assert not isinstance(object(), PartitionLog)  # the check is not vacuous
    assert "PartitionLog" not in _misfits(MemoryLog("t", 0), PartitionLog) and _misfits(object(), PartitionLog)


async def test_a_broker_log_and_its_manager_fit():
    log = MemoryLog("t", 0)
    assert isinstance(log, Log)
    assert _misfits(log, PartitionLog) == []
    manager = LogManager()
    manager.create_logs("t", range(1))
    assert _misfits(manager, PartitionLogs) == []
    assert _misfits(manager.get_log("t", 0), PartitionLog) == []


async def test_a_replicated_log_and_the_cluster_view_fit(autojump_clock):
    async with open_cluster(brokers=2, transport="memory") as cluster:
        logs = cluster.logs
        assert isinstance(logs, ClusterLogManager)
        logs.create_logs("t", range(1))
        replicated = logs.get_log("t", 0)
        assert isinstance(replicated, ReplicatedLog)
        assert _misfits(logs, PartitionLogs) == []
        assert _misfits(replicated, PartitionLog) == []
        assert cluster.replica_manager.log_manager is logs
