"""Catalogue cases for the ops of math, nn activations, linalg, random and image (see cases.py for
the format); importing this module appends them to ``cases.CASES``."""

from __future__ import annotations

import numpy as np  # noqa: F401

import jittape as jt  # noqa: F401

from .cases import F, I, case  # noqa: F401
