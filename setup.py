"""The optional C accelerators (warren/codec/_speedups.c, warren/store/_fsync.c); everything else
about the package is in pyproject.toml.

``optional=True``: when one cannot be compiled (no C compiler, no Python headers), pip installs
Warren anyway and the pure-Python code runs instead. ``WARREN_NO_EXTENSIONS=1`` skips it on purpose;
``WARREN_REQUIRE_EXTENSIONS=1`` makes a failed compile fail the build, for a release's wheel that
must carry them (``tests/test_package.py``, docs/install.md).
"""

import os

from setuptools import Extension, setup

optional = not os.environ.get("WARREN_REQUIRE_EXTENSIONS")
extensions = [] if os.environ.get("WARREN_NO_EXTENSIONS") else [
    Extension("warren.codec._speedups", ["warren/codec/_speedups.c"], optional=optional),
    # the group commit's fsync thread that never takes the GIL (warren/store/fsync_worker.py)
    Extension("warren.store._fsync", ["warren/store/_fsync.c"], optional=optional),
]

setup(ext_modules=extensions)
