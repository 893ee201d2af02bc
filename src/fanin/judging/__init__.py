"""Judging: the evidence metrics, the readers, the answer and evidence judges, WildGraphBench's evaluation rules."""
