"""Warren's ``warren`` data source for PySpark, placed in site-packages by an editable install.

PySpark registers the data sources of the top-level modules named ``pyspark_*`` that
``pkgutil.iter_modules()`` lists. An editable install (``pip install -e``) serves Warren's
packages through setuptools' import hook, which that scan does not see, so ``setup.py`` installs
this one-line module beside the hook: ``format("warren")`` then works there too, with no
``warren.spark.register(spark)``. (A regular install has the ``pyspark_warren`` package itself.)
"""

from warren.spark.datasource import WarrenDataSource as DefaultSource

__all__ = ["DefaultSource"]
