"""Models: embeddings, the LLM client and its one cache, transport, prices and budgets, prompts, roles, spaCy."""
