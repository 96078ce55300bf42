"""Ferret's Redis plumbing: connections (plain, Sentinel, Cluster), the embedded server and its keeper,
retry, Redis's clock, replica waits and pid files. The kernel above it holds the domain only."""
