"""Sans-IO Kafka protocol: bytes in, values out. Nothing here imports trio or touches a socket."""

__all__: list[str] = []
