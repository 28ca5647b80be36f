"""Front ends: the command line, the pytest plugin, watch, the learner's commands and state."""
