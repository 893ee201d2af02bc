"""Doors: the command line, the Hydra app and the benches."""
