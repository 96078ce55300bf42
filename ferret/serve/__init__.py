"""``ferret serve``: Ferret over HTTP for any language and host (FastAPI on uvicorn), behind per-namespace keys."""
