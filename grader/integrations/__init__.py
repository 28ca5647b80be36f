"""Integrations: notebooks, nbgrader, Gradescope, GitHub Classroom, the candidate bundle, batches."""
