"""Consumer groups: the classic group protocol's coordinator and committed offsets."""

__all__: list[str] = []
