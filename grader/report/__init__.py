"""Outputs: the score table and JSON, the interviewer's report, plots, terminal styling."""
