"""Keras 3's trainers: ``trainer`` (``compile``, ``fit``, ``evaluate``, ``predict``) and
``data_adapter`` (arrays, datasets and generators as batches)."""
