"""(being written)"""


def add_routes(app) -> None:
    pass
