"""Memory backends behind one narrow interface (see ``base``)."""
