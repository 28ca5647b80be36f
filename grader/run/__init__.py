"""Running the learner's code: the OS sandbox (bubblewrap) or the process sandbox, the forkserver, one worker per
problem, interception of banned calls and memory, the fresh-interpreter import probe, and the untrusted channel back."""
