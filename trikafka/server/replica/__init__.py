"""Partition and replica state, apart from the request plumbing around it: the
:mod:`.replica_manager` (the partitions this broker leads and every topic operation on them),
the topics (:mod:`.topics`, :mod:`.topic_config`), idempotent producers
(:mod:`.producer_state`) and leadership as the request path asks about it
(:mod:`.cluster_view`)."""

__all__: list[str] = []
