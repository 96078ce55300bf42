"""The agent loop: a ReAct loop that plans its own searches when a question needs it."""
