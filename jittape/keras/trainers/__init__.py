"""``jittape.keras.trainers``."""
