"""The semantic retriever's parts: embedders (an OpenAI-compatible endpoint, or
all-MiniLM-L6-v2 on the CPU from a PyPI package) and a vector index."""
