"""``jt.image``: TF's ``tf.image`` over jittape's public ops, so every function runs
eagerly and inside ``@jt.function``, and differentiates where TF's do.

- ``resize``: resampling (``resize.py``), and ``ResizeMethod``;
- ``color``: ``convert_image_dtype``, grayscale and HSV, ``adjust_*``,
  ``per_image_standardization``;
- ``geometry``: flips, ``rot90``, ``transpose``, crops and pads, ``resize_with_pad``,
  and ``affine_transform`` (the projective transform of Keras' augmentation layers);
- ``augment``: the ``random_*`` ops, seeded as ``jt.random``;
- ``quality``: ``sobel_edges``, ``image_gradients``, ``psnr``, ``ssim``.
"""

from .augment import (  # noqa: F401
    random_brightness, random_contrast, random_crop, random_flip_left_right, random_flip_up_down,
)
from .color import (  # noqa: F401
    adjust_brightness, adjust_contrast, adjust_hue, adjust_saturation, convert_image_dtype,
    grayscale_to_rgb, hsv_to_rgb, per_image_standardization, rgb_to_grayscale, rgb_to_hsv,
)
from .geometry import (  # noqa: F401
    affine_transform, central_crop, crop_to_bounding_box, flip_left_right, flip_up_down,
    pad_to_bounding_box, resize_with_crop_or_pad, resize_with_pad, rot90, transpose,
)
from .quality import image_gradients, psnr, sobel_edges, ssim  # noqa: F401
from .resize import ResizeMethod, resize  # noqa: F401
