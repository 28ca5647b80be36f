"""The problem model: what a spec is (arguments, outputs, checks, points, mistakes), its translations, and the stubs
generated from it."""
