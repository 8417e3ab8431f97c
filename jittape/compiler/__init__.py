"""``jittape.compiler``."""
