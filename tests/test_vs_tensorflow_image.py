"""``jt.image`` and the Keras image preprocessing layers against TensorFlow 2.21 / Keras 3
on random inputs, run only where both are installed (the default suite does not need
TF). Each case is written once against the shared names (``m`` is ``tensorflow`` or
``jittape``); ``affine_transform`` is ``keras.ops.image.affine_transform`` on TF, and the
random layers are given one-point ranges, so their transforms are fixed and the pixels
comparable (their random streams are not Keras')."""

import numpy as np
import pytest

import jittape as jt

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

R = np.random.default_rng(0)
IMG = R.uniform(0, 1, (2, 6, 7, 3)).astype("float32")
IMG2 = np.clip(IMG + R.normal(0, 0.1, IMG.shape), 0, 1).astype("float32")
U8 = (R.uniform(0, 256, (2, 6, 7, 3))).astype("uint8")
BIG = R.uniform(0, 1, (1, 16, 13, 2)).astype("float32")
BIG2 = np.clip(BIG + R.normal(0, 0.1, BIG.shape), 0, 1).astype("float32")
GREY = np.repeat(IMG[..., :1], 3, -1)  # r == g == b
TIES = np.round(IMG * 4) / 4  # many equal channels
T = np.array([[0.9, -0.2, 1.5, 0.3, 1.1, -2.0, 0.01, -0.02],
              [1.2, 0.4, -3.0, -0.5, 0.8, 2.5, 0.0, 0.0]], "float32")

C = {}
for nm, x in [("img", IMG), ("u8", U8)]:
    C[f"gray_{nm}"] = (lambda m, x: m.image.rgb_to_grayscale(x), [x])
    C[f"bright_{nm}"] = (lambda m, x: m.image.adjust_brightness(x, 0.2), [x])
    C[f"contrast_{nm}"] = (lambda m, x: m.image.adjust_contrast(x, 1.7), [x])
    C[f"sat_{nm}"] = (lambda m, x: m.image.adjust_saturation(x, 0.6), [x])
    C[f"sat2_{nm}"] = (lambda m, x: m.image.adjust_saturation(x, 2.5), [x])
    C[f"hue_{nm}"] = (lambda m, x: m.image.adjust_hue(x, 0.3), [x])
    C[f"hueneg_{nm}"] = (lambda m, x: m.image.adjust_hue(x, -0.7), [x])
    C[f"std_{nm}"] = (lambda m, x: m.image.per_image_standardization(x), [x])
for nm, x in [("grey", GREY), ("ties", TIES)]:
    C[f"hsv_{nm}"] = (lambda m, x: m.image.rgb_to_hsv(x), [x])
    C[f"hue_{nm}"] = (lambda m, x: m.image.adjust_hue(x, 0.45), [x])
    C[f"sat_{nm}"] = (lambda m, x: m.image.adjust_saturation(x, 1.3), [x])
C["hsv"] = (lambda m, x: m.image.rgb_to_hsv(x), [IMG])
C["hsv_back"] = (lambda m, x: m.image.hsv_to_rgb(x), [IMG])
C["g2rgb"] = (lambda m, x: m.image.grayscale_to_rgb(x[..., :1]), [IMG])
for dt in ["uint8", "int16", "int32", "float32", "float64"]:
    C[f"cvt_f_{dt}"] = (lambda m, x, dt=dt: m.image.convert_image_dtype(x * 1.2 - 0.1, dt, saturate=True), [IMG])
    C[f"cvt_u8_{dt}"] = (lambda m, x, dt=dt: m.image.convert_image_dtype(x, dt), [U8])
C["cvt_i32_u8"] = (lambda m, x: m.image.convert_image_dtype(m.cast(x, "int32") * 1000000, "uint8"), [U8])
C["flip_lr"] = (lambda m, x: m.image.flip_left_right(x), [IMG])
C["flip_ud"] = (lambda m, x: m.image.flip_up_down(x[0]), [IMG])
for k in range(4):
    C[f"rot{k}"] = (lambda m, x, k=k: m.image.rot90(x, k), [IMG])
C["rot3_hwc"] = (lambda m, x: m.image.rot90(x[1], 3), [IMG])
C["transpose"] = (lambda m, x: m.image.transpose(x), [IMG])
C["central"] = (lambda m, x: m.image.central_crop(x, 0.55), [IMG])
C["crop_box"] = (lambda m, x: m.image.crop_to_bounding_box(x, 1, 2, 4, 3), [IMG])
C["pad_box"] = (lambda m, x: m.image.pad_to_bounding_box(x, 1, 2, 9, 11), [IMG])
for th, tw in [(4, 9), (9, 4), (3, 3), (8, 10)]:
    C[f"crop_or_pad_{th}x{tw}"] = (lambda m, x, s=(th, tw): m.image.resize_with_crop_or_pad(x, *s), [IMG])
    C[f"with_pad_{th}x{tw}"] = (lambda m, x, s=(th, tw): m.image.resize_with_pad(x, *s), [IMG])
for meth in ["bicubic", "area", "lanczos3", "lanczos5", "mitchellcubic", "gaussian", "bilinear"]:
    for s in [(3, 4), (11, 17), (6, 7), (4, 13)]:
        for aa in ([False, True] if meth not in ("area",) else [False]):
            C[f"resize_{meth}_{s[0]}x{s[1]}_{aa}"] = (
                lambda m, x, s=s, meth=meth, aa=aa: m.image.resize(x, s, method=meth, antialias=aa), [IMG])
C["resize_aspect"] = (lambda m, x: m.image.resize(x, (20, 9), preserve_aspect_ratio=True), [IMG])
C["resize_u8_bicubic"] = (lambda m, x: m.image.resize(x, (4, 9), method="bicubic"), [U8])
C["sobel"] = (lambda m, x: m.image.sobel_edges(x), [IMG])
C["grads"] = (lambda m, x: m.image.image_gradients(x), [IMG])
C["psnr"] = (lambda m, a, b: m.image.psnr(a, b, 1.0), [IMG, IMG2])
C["psnr_u8"] = (lambda m, a, b: m.image.psnr(a, b, 255), [U8, U8[::-1].copy()])
C["ssim"] = (lambda m, a, b: m.image.ssim(a, b, 1.0), [BIG, BIG2])
C["ssim_small"] = (lambda m, a, b: m.image.ssim(a, b, 1.0, filter_size=5, filter_sigma=0.8), [IMG, IMG2])
C["ssim_map"] = (lambda m, a, b: m.image.ssim(a, b, 2.0, filter_size=3, return_index_map=True), [IMG, IMG2])
C["ssim_u8"] = (lambda m, a, b: m.image.ssim(a, b, 255, filter_size=3), [U8, U8[::-1].copy()])
for mode in ["reflect", "wrap", "constant", "nearest"]:
    for interp in ["bilinear", "nearest"]:
        C[f"affine_{mode}_{interp}"] = (lambda m, x, t, mode=mode, interp=interp: m.image.affine_transform(
            x, t, interpolation=interp, fill_mode=mode, fill_value=0.5), [IMG, T])
IMG255 = (IMG * 255).astype("float32")
LAYERS = {
    "rescale": lambda L: L.Rescaling(1 / 127.5, offset=-1),
    "resizing": lambda L: L.Resizing(4, 9),
    "resizing_bicubic": lambda L: L.Resizing(9, 4, interpolation="bicubic"),
    "resizing_crop": lambda L: L.Resizing(4, 9, crop_to_aspect_ratio=True),
    "resizing_crop2": lambda L: L.Resizing(9, 4, crop_to_aspect_ratio=True),
    "resizing_pad": lambda L: L.Resizing(4, 9, pad_to_aspect_ratio=True, fill_value=3.0),
    "resizing_pad2": lambda L: L.Resizing(9, 4, pad_to_aspect_ratio=True),
    "center": lambda L: L.CenterCrop(3, 5),
    "center_up": lambda L: L.CenterCrop(8, 5),
}
for mode in ["reflect", "wrap", "constant", "nearest"]:
    for interp in ["bilinear", "nearest"]:
        LAYERS[f"rot_{mode}_{interp}"] = lambda L, mode=mode, interp=interp: L.RandomRotation(
            (0.07, 0.07), fill_mode=mode, interpolation=interp, fill_value=7.0)
        LAYERS[f"zoom_{mode}_{interp}"] = lambda L, mode=mode, interp=interp: L.RandomZoom(
            (0.3, 0.3), (-0.2, -0.2), fill_mode=mode, interpolation=interp)
        LAYERS[f"trans_{mode}_{interp}"] = lambda L, mode=mode, interp=interp: L.RandomTranslation(
            (0.2, 0.2), (-0.3, -0.3), fill_mode=mode, interpolation=interp)
LAYERS["zoom_same"] = lambda L: L.RandomZoom((-0.4, -0.4))
LAYERS["contrast"] = lambda L: L.RandomContrast((-0.3, 0.3))
LAYERS["brightness"] = lambda L: L.RandomBrightness((0.1, 0.1))
LAYERS["crop_small"] = lambda L: L.RandomCrop(8, 9)
LAYERS["crop_tall"] = lambda L: L.RandomCrop(7, 3)
LAYERS["crop_same"] = lambda L: L.RandomCrop(6, 7)
for k, mk in list(LAYERS.items()):
    C[f"layer_{k}"] = (lambda m, x, mk=mk: mk(m.keras.layers)(x, training=True), [IMG255])
    C[f"layer_hwc_{k}"] = (lambda m, x, mk=mk: mk(m.keras.layers)(x[1], training=True), [IMG255])


class _TF:
    """``tf`` with ``image.affine_transform`` and ``keras`` where jittape has them."""

    class image:  # noqa: N801 - stands for the module
        def __getattr__(self, k):
            return getattr(tf.image, k)

        def affine_transform(self, x, t, **kw):
            return keras.ops.image.affine_transform(x, t, **kw)

    def __init__(self):
        self.image = _TF.image()
        self.keras = keras

    def __getattr__(self, k):
        return getattr(tf, k)


@pytest.mark.parametrize("name", sorted(C))
def test_as_tensorflow(name):
    f, xs = C[name]
    want = f(_TF(), *[tf.constant(x) for x in xs])
    got = f(jt, *[jt.constant(x) for x in xs])
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if g.dtype.kind in "iu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(w).max()))
