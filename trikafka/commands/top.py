"""placeholder"""
__all__ = ["register"]


def register(commands):
    pass
