"""The optional C accelerators, each beside its Python twin (warren/codec/_speedups.c,
warren/store/_records.c, warren/broker/_messages.c, sharing warren/codec/_cshared.h; and
warren/store/_fsync.c); everything else about the package is in pyproject.toml.

``optional=True``: when one cannot be compiled (no C compiler, no Python headers), pip installs
Warren anyway and the pure-Python code runs instead. ``WARREN_NO_EXTENSIONS=1`` skips it on purpose;
``WARREN_REQUIRE_EXTENSIONS=1`` makes a failed compile fail the build, for a release's wheel that
must carry them (``tests/test_package.py``, docs/install.md).
"""

import os
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.editable_wheel import editable_wheel

optional = not os.environ.get("WARREN_REQUIRE_EXTENSIONS")
shared = {"include_dirs": ["warren/codec"], "depends": ["warren/codec/_cshared.h"], "optional": optional}
extensions = [] if os.environ.get("WARREN_NO_EXTENSIONS") else [
    # the codec's fast paths: publish and deliver frames, ack runs, property lists, hand-over batches
    Extension("warren.codec._speedups", ["warren/codec/_speedups.c"], **shared),
    # the store's record framing, and the broker's runs of messages
    Extension("warren.store._records", ["warren/store/_records.c"], **shared),
    Extension("warren.broker._messages", ["warren/broker/_messages.c"], **shared),
    # the group commit's fsync thread that never takes the GIL (warren/store/fsync_worker.py)
    Extension("warren.store._fsync", ["warren/store/_fsync.c"], optional=optional),
]

# PySpark finds the `warren` data source by listing top-level `pyspark_*` modules with
# pkgutil.iter_modules(), which cannot see the import hook of an editable install: such an
# install also gets a one-line `pyspark_warren.py` at the root of site-packages (its source:
# pyspark_warren/editable/). setuptools installs no data_files in editable mode, so the module
# is added to the editable wheel by wrapping the strategy that writes it.
PYSPARK_STUB = Path(__file__).resolve().parent / "pyspark_warren" / "editable" / "pyspark_warren.py"


class _WithPysparkStub:
    def __init__(self, strategy) -> None:
        self.strategy = strategy

    def __call__(self, wheel, files, mapping):
        self.strategy(wheel, files, mapping)
        wheel.writestr("pyspark_warren.py", PYSPARK_STUB.read_bytes())

    def __enter__(self):
        self.strategy.__enter__()
        return self

    def __exit__(self, *exc):
        return self.strategy.__exit__(*exc)


class EditableWheel(editable_wheel):
    def _select_strategy(self, *args, **kwargs):
        return _WithPysparkStub(super()._select_strategy(*args, **kwargs))


setup(ext_modules=extensions, cmdclass={"editable_wheel": EditableWheel})
