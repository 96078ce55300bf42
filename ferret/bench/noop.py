"""A job that does nothing: the raw RQ baseline."""


def noop(payload: object = None) -> int:
    return 0
