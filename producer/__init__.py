"""Ferret's producer side: enqueue retrieval jobs and read their results."""

from ferret.producer.client import JobHandle, Producer

__all__ = ["JobHandle", "Producer"]
