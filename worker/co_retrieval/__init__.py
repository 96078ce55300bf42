"""Co-retrieval strengthening (seed 000): memories retrieved together, within
one sub-query group, get linked more strongly; the ``local`` backend lets those
links lend a small bonus to scores."""
