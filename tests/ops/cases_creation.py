"""Catalogue cases for the ops of tensor creation, shaping, scans, sorting and einsum (see cases.py for
the format); importing this module appends them to ``cases.CASES``."""

from __future__ import annotations

import numpy as np  # noqa: F401

import jittape as jt  # noqa: F401

from .cases import F, I, case  # noqa: F401
