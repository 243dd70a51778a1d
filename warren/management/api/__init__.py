"""The resource modules of the HTTP API (one per kind of object) and what they share."""
