"""The one thing pyproject.toml cannot say: the optional native record walk.

``optional=True``: without a C compiler (or Python's headers) the build warns and goes on, and
the package uses the pure-Python walk in ``trikafka/protocol/records.py`` (README, Performance).
``TRIKAFKA_NO_EXTENSIONS=1`` at build time (any non-empty value, as aiohttp and yarl read
theirs) leaves the extension out: a pure-Python wheel (``py3-none-any``). The sdist carries
the C source either way. Everything else about the package is in pyproject.toml.
"""

import os

from setuptools import Extension, setup

NO_EXTENSIONS = bool(os.environ.get("TRIKAFKA_NO_EXTENSIONS"))

setup(
    ext_modules=[]
    if NO_EXTENSIONS
    else [
        Extension(
            "trikafka.protocol._recordwalk",
            ["trikafka/protocol/_recordwalk.c"],
            optional=True,
        )
    ]
)
