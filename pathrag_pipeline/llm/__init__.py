"""Model clients: the OpenAI-compatible chat client (openai + instructor, retries, usage counting) and the
embedders (offline hashing, OpenAI-compatible endpoint, local sentence-transformers).

May import: ``errors``, ``config``, ``text``. Knows nothing of tables or stages.
"""
