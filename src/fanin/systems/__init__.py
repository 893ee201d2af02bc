"""Systems: every way of building an evidence pack, from BM25 to graphs, LLM-built indexes, peers and pack files."""
