"""``jittape.keras.saving``."""
