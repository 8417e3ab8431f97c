"""The convolution layers: values against a position-by-position numpy convolution (the
transposes through their adjoint identity), output shapes for each padding, stride,
dilation and output_padding (the sizes Keras 3.15 gives), configs, Keras' errors, the
functional API, BatchNormalization after a convolution, and one tiny ``fit`` compiled on
the cpu backend. ``test_vs_tensorflow_layers_conv.py`` checks the same layers against
Keras itself."""

import json

import numpy as np
import pytest
from tolerances import tol

import jittape as jt
from jittape.errors import InvalidArgumentError
from jittape.keras import layers as L

T32 = tol("float32")
RNG = np.random.default_rng(0)


def close(actual, expected, t=T32):
    expected = np.asarray(expected)
    atol = max(t.fwd_atol, t.fwd_rtol * float(np.max(np.abs(expected), initial=0.0)))
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=t.fwd_rtol, atol=atol)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def ref_conv(x, w, strides, dilations, pads, groups=1):
    """``out[n, o, f] = sum_{k, c} xpad[n, o * s + k * d, g(f) * Cg + c] w[k, c, f]`` over
    channels-last ``x``, one output position at a time (float64)."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    ns = x.ndim - 2
    xp = np.pad(x, [(0, 0), *pads, (0, 0)])
    ks, cg, f = w.shape[:ns], w.shape[-2], w.shape[-1]
    outs = [(xp.shape[1 + i] - (ks[i] - 1) * dilations[i] - 1) // strides[i] + 1
            for i in range(ns)]
    y = np.zeros((x.shape[0], *outs, f))
    per = f // groups
    for o in np.ndindex(*outs):
        for k in np.ndindex(*ks):
            at = tuple(o[i] * strides[i] + k[i] * dilations[i] for i in range(ns))
            for g in range(groups):
                patch = xp[(slice(None), *at, slice(g * cg, (g + 1) * cg))]
                y[(slice(None), *o, slice(g * per, (g + 1) * per))] += (
                    patch @ w[k][:, g * per:(g + 1) * per])
    return y


def same_pads(sizes, ks, strides, dilations):
    """TF's SAME: total pad for ``ceil(n / s)`` outputs, the odd one at the end."""
    out = []
    for n, k, s, d in zip(sizes, ks, strides, dilations):
        total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
        out.append((total // 2, total - total // 2))
    return out


def first(x):
    return np.moveaxis(np.asarray(x), -1, 1)


# ---------------------------------------------------------------------------
# values


@pytest.mark.parametrize("kw,shape", [
    (dict(filters=3, kernel_size=(3, 2)), (2, 6, 5, 4)),
    (dict(filters=4, kernel_size=3, strides=(2, 1), padding="same", groups=2), (1, 7, 6, 4)),
    (dict(filters=2, kernel_size=2, dilation_rate=2, padding="same"), (1, 5, 6, 3)),
])
def test_conv2d_matches_a_numpy_convolution(kw, shape):
    x = rand(*shape)
    layer = L.Conv2D(**kw, bias_initializer="random_normal")
    y = layer(x).numpy()
    k, b = layer.kernel.numpy(), layer.bias.numpy()
    assert k.shape == layer.kernel_size + (shape[-1] // layer.groups, layer.filters)
    pads = (same_pads(shape[1:3], layer.kernel_size, layer.strides, layer.dilation_rate)
            if layer.padding == "same" else [(0, 0)] * 2)
    close(y, ref_conv(x, k, layer.strides, layer.dilation_rate, pads, layer.groups) + b)
    # channels_first: the same numbers with the channels moved
    cf = L.Conv2D(**kw, data_format="channels_first")
    cf(first(x))
    cf.set_weights([k, b])
    close(cf(first(x)), first(y))


def test_conv1d_and_conv3d_match_numpy_and_causal_padding_reads_no_later_step():
    x = rand(2, 8, 3)
    causal = L.Conv1D(2, 3, padding="causal", dilation_rate=2, use_bias=False)
    y = causal(x).numpy()
    assert y.shape == (2, 8, 2)
    close(y, ref_conv(x, causal.kernel.numpy(), (1,), (2,), [(4, 0)]))
    later = x.copy()
    later[:, 5:] += 1.0
    close(causal(later).numpy()[:, :5], y[:, :5])  # steps 0..4 ignore steps 5..
    assert not np.allclose(causal(later).numpy()[:, 5:], y[:, 5:])
    cf = L.Conv1D(2, 3, padding="causal", dilation_rate=2, use_bias=False,
                  data_format="channels_first")
    cf(first(x))
    cf.set_weights(causal.get_weights())
    close(cf(first(x)), first(y))
    v = rand(1, 4, 5, 3, 2)
    c3 = L.Conv3D(3, (2, 3, 1), strides=(1, 2, 1), use_bias=False)
    close(c3(v), ref_conv(v, c3.kernel.numpy(), (1, 2, 1), (1, 1, 1), [(0, 0)] * 3))


@pytest.mark.parametrize("cls,kw,shape", [
    (L.Conv1DTranspose, dict(filters=2, kernel_size=3, strides=2), (2, 4, 3)),
    (L.Conv2DTranspose, dict(filters=3, kernel_size=(3, 2), strides=(2, 3), padding="same",
                             output_padding=(1, 2)), (1, 3, 4, 2)),
    (L.Conv2DTranspose, dict(filters=2, kernel_size=2, strides=3), (1, 2, 3, 2)),
    (L.Conv3DTranspose, dict(filters=2, kernel_size=2, strides=2, padding="same"),
     (1, 2, 3, 2, 2)),
])
def test_transposes_are_the_adjoints_of_the_convolution(cls, kw, shape):
    """<convT(x), y> = <x, conv(y)>, with the convolution's padding computed for the
    transpose's output size."""
    layer = cls(**kw, use_bias=False)
    x = rand(*shape)
    out = layer(x).numpy()
    assert out.shape == tuple(layer.compute_output_shape(shape))
    y = rand(*out.shape)
    ns = len(shape) - 2
    pads = (same_pads(out.shape[1:-1], layer.kernel_size, layer.strides, layer.dilation_rate)
            if layer.padding == "same" else [(0, 0)] * ns)
    w = layer.kernel.numpy()  # (*K, filters, in): a convolution from filters to in
    conv_y = ref_conv(y, w, layer.strides, layer.dilation_rate, pads)
    conv_y = conv_y[(slice(None), *(slice(0, n) for n in shape[1:-1]))]
    assert conv_y.shape == shape
    close(np.vdot(out, y), np.vdot(x, conv_y))


def test_depthwise_and_separable_match_a_grouped_numpy_convolution():
    x = rand(2, 6, 6, 3)
    dw = L.DepthwiseConv2D(3, depth_multiplier=2, strides=2, dilation_rate=2, padding="same",
                           bias_initializer="random_normal")
    y = dw(x).numpy()
    k = dw.kernel.numpy()
    assert k.shape == (3, 3, 3, 2) and dw.bias.shape == (6,)
    pads = same_pads((6, 6), (3, 3), (2, 2), (2, 2))
    grouped = k.reshape(3, 3, 1, 6)  # output channel c * M + m
    close(y, ref_conv(x, grouped, (2, 2), (2, 2), pads, groups=3) + dw.bias.numpy())
    sep = L.SeparableConv1D(4, 2, depth_multiplier=2, bias_initializer="random_normal")
    s = x[:, 0]
    z = sep(s).numpy()
    assert [w.name for w in sep.weights] == ["depthwise_kernel", "pointwise_kernel", "bias"]
    d = ref_conv(s, sep.depthwise_kernel.numpy().reshape(2, 1, 6), (1,), (1,), [(0, 0)], 3)
    close(z, d @ sep.pointwise_kernel.numpy()[0] + sep.bias.numpy())


# ---------------------------------------------------------------------------
# shapes (the sizes Keras 3.15 computes for the same arguments)


@pytest.mark.parametrize("layer,shape,want", [
    (lambda: L.Conv2D(2, 3), (1, 7, 6, 3), (1, 5, 4, 2)),
    (lambda: L.Conv2D(2, 3, strides=2), (1, 7, 6, 3), (1, 3, 2, 2)),
    (lambda: L.Conv2D(2, 3, strides=2, padding="same"), (1, 7, 6, 3), (1, 4, 3, 2)),
    (lambda: L.Conv2D(2, 3, dilation_rate=2), (1, 7, 6, 3), (1, 3, 2, 2)),
    (lambda: L.Conv2D(2, 3, data_format="channels_first"), (1, 3, 7, 6), (1, 2, 5, 4)),
    (lambda: L.Conv1D(2, 3, padding="causal", strides=2), (1, 7, 3), (1, 4, 2)),
    (lambda: L.Conv3D(2, 2, strides=(1, 2, 3), padding="same"), (1, 3, 4, 5, 1),
     (1, 3, 2, 2, 2)),
    (lambda: L.Conv2DTranspose(2, 3, strides=2), (1, 3, 3, 3), (1, 7, 7, 2)),
    (lambda: L.Conv2DTranspose(2, 3, strides=3), (1, 3, 3, 3), (1, 9, 9, 2)),
    (lambda: L.Conv2DTranspose(2, 3, strides=4), (1, 3, 3, 3), (1, 12, 12, 2)),
    (lambda: L.Conv2DTranspose(2, 3, strides=2, padding="same"), (1, 3, 3, 3), (1, 6, 6, 2)),
    (lambda: L.Conv2DTranspose(2, 3, strides=2, padding="same", output_padding=1),
     (1, 3, 3, 3), (1, 6, 6, 2)),
    (lambda: L.Conv2DTranspose(2, 3, strides=2, output_padding=1), (1, 3, 3, 3),
     (1, 8, 8, 2)),
    (lambda: L.Conv2DTranspose(2, 3, dilation_rate=2), (1, 3, 3, 3), (1, 7, 7, 2)),
    (lambda: L.Conv1DTranspose(2, 4, strides=3, padding="same", output_padding=2),
     (1, 4, 3), (1, 11, 2)),
    (lambda: L.DepthwiseConv2D(3, strides=2, dilation_rate=2), (1, 9, 9, 3), (1, 3, 3, 3)),
    (lambda: L.DepthwiseConv1D(2, depth_multiplier=3, data_format="channels_first"),
     (1, 2, 5), (1, 6, 4)),
    (lambda: L.SeparableConv2D(4, 3, padding="same", depth_multiplier=2), (1, 5, 5, 3),
     (1, 5, 5, 4)),
])
def test_output_shapes(layer, shape, want):
    layer = layer()
    assert tuple(layer.compute_output_shape((None,) + shape[1:])) == (None,) + want[1:]
    assert layer(np.zeros(shape, np.float32)).shape == want


def test_functional_api_with_unknown_sizes():
    i = jt.Input((None, None, 3))
    h = L.Conv2D(4, 3, padding="same", activation="relu")(i)
    o = L.Conv2DTranspose(2, 2, strides=2)(L.Conv2D(4, 3, strides=2)(h))
    assert tuple(h.shape) == (None, None, None, 4) and tuple(o.shape) == (None, None, None, 2)
    model = jt.Model(i, o)
    assert model(np.zeros((1, 9, 9, 3), np.float32)).shape == (1, 8, 8, 2)


# ---------------------------------------------------------------------------
# configs and errors


def test_configs_round_trip_and_aliases_are_the_classes():
    layers = [L.Conv1D(2, 3, padding="CAUSAL", kernel_regularizer="l2", activation="relu"),
              L.Conv2D(4, (3, 1), groups=2, data_format="Channels_First"),
              L.Conv3DTranspose(2, 2, strides=2, output_padding=1),
              L.DepthwiseConv2D(3, depth_multiplier=2, depthwise_constraint="non_neg"),
              L.SeparableConv2D(3, 2, pointwise_initializer="he_normal")]
    c = layers[0].get_config()
    assert (c["padding"], c["kernel_size"], c["strides"], c["activation"]) == (
        "causal", (3,), (1,), "relu")
    assert c["kernel_regularizer"]["class_name"] == "L2" and c["activity_regularizer"] is None
    assert layers[1].get_config()["data_format"] == "channels_first"
    assert layers[2].get_config()["output_padding"] == (1, 1, 1)
    for layer in layers:
        spatial = (6,) * len(layer.kernel_size)
        layer.build((None, *spatial, 4) if layer.data_format == "channels_last" else
                    (None, 4, *spatial))
        again = L.deserialize(json.loads(json.dumps(L.serialize(layer))))
        assert type(again) is type(layer)
        assert json.dumps(again.get_config()) == json.dumps(
            json.loads(json.dumps(layer.get_config())))
        assert [tuple(w.shape) for w in again.weights] == [tuple(w.shape) for w in layer.weights]
    assert (L.Convolution2D, L.Convolution1DTranspose, L.SeparableConvolution2D) == (
        L.Conv2D, L.Conv1DTranspose, L.SeparableConv2D)
    assert len(layers[0].losses) == 1  # the kernel's L2 penalty


@pytest.mark.parametrize("make,match", [
    (lambda: L.Conv2D(0, 3), r"Conv2D: invalid value for argument `filters`"),
    (lambda: L.Conv2D(2, (3, 0)), r"`kernel_size` argument must be a tuple of 2 integers"),
    (lambda: L.Conv2D(2, 3, padding="causal"), r"Conv2D: the `padding` argument"),
    (lambda: L.Conv1D(2, 3, padding="full"), r"Conv1D: the `padding` argument"),
    (lambda: L.Conv2D(2, 3, strides=2, dilation_rate=2), r"`strides > 1` not supported"),
    (lambda: L.Conv2D(3, 3, groups=2), r"filters must be evenly divisible by the number of "
                                       r"groups. Received: groups=2, filters=3"),
    (lambda: L.Conv2D(2, 3, groups=0), r"groups must be a positive integer"),
    (lambda: L.Conv2D(2, 3, lora_rank=4), r"LoRA .* not supported"),
    (lambda: L.Conv2D(2, 3, data_format="NCHW"), r"data_format"),
    (lambda: L.Conv2DTranspose(2, 3, strides=2, output_padding=2),
     r"`output_padding` must be strictly less than `strides`"),
    (lambda: L.DepthwiseConv2D(3, depth_multiplier=0), r"`depth_multiplier`"),
    (lambda: L.SeparableConv1D(-1, 3), r"SeparableConv1D: invalid value for argument `filters`"),
])
def test_bad_arguments_are_keras_errors(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_inputs_name_the_layer_and_the_shapes():
    with pytest.raises(InvalidArgumentError, match=r'layer "c2".*expected ndim=4, found '
                                                   r"ndim=3. Full shape received: \(1, 5, 3\)"):
        L.Conv2D(2, 3, name="c2")(np.zeros((1, 5, 3), np.float32))
    with pytest.raises(InvalidArgumentError, match=r"evenly divisible by the number of groups. "
                                                   r"Received groups=2, but the input has 3"):
        L.Conv2D(4, 3, groups=2)(np.zeros((1, 5, 5, 3), np.float32))
    with pytest.raises(InvalidArgumentError, match=r"computed output size would be zero or "
                                                   r"negative: inputs of shape \(1, 2, 5, 3\)"):
        L.Conv2D(2, 3)(np.zeros((1, 2, 5, 3), np.float32))
    layer = L.DepthwiseConv1D(2, name="dw")
    layer(np.zeros((1, 5, 3), np.float32))
    with pytest.raises(InvalidArgumentError, match=r'layer "dw".*expected axis -1 of input '
                                                   r"shape to have value 3.*\(1, 5, 4\)"):
        layer(np.zeros((1, 5, 4), np.float32))


# ---------------------------------------------------------------------------
# with the other layers


def test_batch_normalization_over_the_channels_of_either_layout():
    x = rand(3, 6, 6, 2)
    last = jt.Sequential([L.Conv2D(3, 3), L.BatchNormalization()])
    cf = jt.Sequential([L.Conv2D(3, 3, data_format="channels_first"),
                        L.BatchNormalization(axis=1)])
    last(x)
    cf(first(x))  # built, in inference (the moving statistics stay)
    cf.set_weights(last.get_weights())
    y = last(x, training=True).numpy()
    close(cf(first(x), training=True), first(y))
    close(y.mean((0, 1, 2)), np.zeros(3))  # each channel normalized over batch and space
    close(cf.layers[1].moving_mean, last.layers[1].moving_mean)


def test_a_small_convolutional_model_fits_on_the_cpu_backend():
    """One compiled SGD step: the loss it reports and the kernel it leaves are those of
    the same step taken eagerly."""
    x = rand(8, 6, 6, 1)
    y = (x.mean((1, 2, 3)) > 0).astype(np.int64)
    model = jt.Sequential([jt.Input((6, 6, 1)), L.Conv2D(2, 3, activation="relu"),
                           L.Flatten(), L.Dense(2)])
    loss_fn = jt.losses.SparseCategoricalCrossentropy(from_logits=True)
    with jt.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    kernel = model.layers[0].kernel
    want = kernel.numpy() - 0.1 * tape.gradient(loss, kernel).numpy()
    model.compile(jt.optimizers.SGD(0.1), loss_fn)
    old = jt.get_backend()
    jt.set_backend("cpu")
    try:
        history = model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    finally:
        jt.set_backend(old)
    close(history.history["loss"][0], loss.numpy())
    close(kernel, want)
