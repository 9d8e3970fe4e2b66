"""Several brokers in one process: shared metadata, leaders, ISR, replication (see cluster.py)."""

from trikafka.cluster.cluster import Cluster, open_cluster

__all__ = ["Cluster", "open_cluster"]
