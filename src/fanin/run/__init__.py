"""Running: what a config builds, the stages of a run, the plan of what it will cost, question generation."""
