"""The optional C accelerators (warren/codec/_speedups.c, warren/store/_fsync.c); everything else
about the package is in pyproject.toml.

``optional=True``: when one cannot be compiled (no C compiler, no Python headers), pip installs
Warren anyway and the pure-Python code runs instead. ``WARREN_NO_EXTENSIONS=1`` skips it on purpose.
"""

import os

from setuptools import Extension, setup

extensions = [] if os.environ.get("WARREN_NO_EXTENSIONS") else [
    Extension("warren.codec._speedups", ["warren/codec/_speedups.c"], optional=True),
    # the group commit's fsync thread that never takes the GIL (warren/store/fsync_worker.py)
    Extension("warren.store._fsync", ["warren/store/_fsync.c"], optional=True),
]

setup(ext_modules=extensions)
