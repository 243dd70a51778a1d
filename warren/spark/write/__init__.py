"""Writing with the ``warren`` source: DataFrame rows published to an exchange with publisher confirms."""
