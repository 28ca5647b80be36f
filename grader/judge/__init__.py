"""Judging: the checks (one registered stage each), comparisons and tolerances per dtype, the context a judge sees."""
