"""fanin: a reproducible lab for evidence construction."""
__version__ = "0.1.0"
