"""API families: each module is a class with ``handlers()`` → {api key: coroutine}."""

__all__: list[str] = []
