"""Where ``client_for`` was before the Redis plumbing moved to ``ferret.redis_plumbing`` (0.1.0): code
written against the old name, such as the agent-turn probe the project's issues measure with, still runs."""

from ferret.redis_plumbing.redis_conn import client_for

__all__ = ["client_for"]
