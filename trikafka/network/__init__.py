"""Kafka's SocketServer as a nursery tree: Acceptors, Processors, Connections, RequestChannel."""

__all__: list[str] = []
