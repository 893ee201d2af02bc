"""Datasets: the pinned releases and every layout the lab reads (WildGraphBench, GraphRAG-Bench, AuthTrace, HippoRAG, BEIR)."""
