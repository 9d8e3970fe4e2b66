"""The one thing pyproject.toml cannot say: the optional native record walk.

``optional=True``: without a C compiler (or Python's headers) the build warns and goes on, and
the package uses the pure-Python walk in ``trikafka/protocol/records.py`` (README, Performance).
Everything else about the package is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "trikafka.protocol._recordwalk",
            ["trikafka/protocol/_recordwalk.c"],
            optional=True,
        )
    ]
)
