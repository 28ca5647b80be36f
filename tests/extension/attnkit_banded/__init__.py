"""A throwaway extension (tests/test_extension.py): a problem with a mask rule of its own (a sliding window) and a
check with a worker hook of its own, added to the kit by new files alone (grader/extensions.py)."""
