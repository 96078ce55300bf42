"""The operator benchmarks behind `ferret bench ...`: the service, its round trips, scale, footprint, agents,
cluster, breaker, lateness and the queue bomb. The retrieval-tuning lab stays in the repository's `benchmarks/`."""
