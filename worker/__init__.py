"""Ferret's worker side: the retrieval pipeline, its backends, the RQ job."""
