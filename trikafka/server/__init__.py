"""KafkaApis, the request handler pool, the purgatory and the metadata cache."""

__all__: list[str] = []
