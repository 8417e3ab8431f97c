"""A denoising convolutional autoencoder on scikit-learn's digits upscaled to 28x28.

TF's "Intro to Autoencoders" tutorial, its second part (image denoising), with ``tf``
replaced by ``jt``: Gaussian noise is added to the images and clipped to [0, 1]; a
subclassed ``jt.keras.Model`` with a Conv2D encoder (28x28 -> 14x14x16 -> 7x7x8, strides
2) and a Conv2DTranspose decoder (back to 28x28, a sigmoid Conv2D at the end) learns, with
``fit``, to map the noisy images to the clean ones.

It reports the reconstruction's mean squared error against the clean test images next to
the noisy inputs' own, and when matplotlib is installed it writes a PNG with noisy inputs
on the top row and their reconstructions below (``--out``).

Run: python examples/conv_autoencoder.py [--epochs N] [--out denoised.png]
Needs the ``examples`` extra (scikit-learn for the data; matplotlib for the figure).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import jittape as jt
from jittape.keras import layers, losses
from jittape.keras.models import Model


def load(size=28, seed=0):
    """Clean digits as (n, size, size, 1) float32 images in [0, 1], split 80/20."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    images = (load_digits().images / 16.0).astype("float32")[..., jt.newaxis]
    images = jt.image.resize(images, [size, size]).numpy()
    return train_test_split(images, test_size=0.2, random_state=seed)


class Denoise(Model):
    def __init__(self, size=28, filters=(16, 8)):
        super().__init__()
        self.encoder = jt.keras.Sequential([
            layers.Input(shape=(size, size, 1)),
            layers.Conv2D(filters[0], (3, 3), activation="relu", padding="same", strides=2),
            layers.Conv2D(filters[1], (3, 3), activation="relu", padding="same", strides=2)])

        self.decoder = jt.keras.Sequential([
            layers.Conv2DTranspose(filters[1], kernel_size=3, strides=2, activation="relu",
                                   padding="same"),
            layers.Conv2DTranspose(filters[0], kernel_size=3, strides=2, activation="relu",
                                   padding="same"),
            layers.Conv2D(1, kernel_size=(3, 3), activation="sigmoid", padding="same")])

    def call(self, x):
        encoded = self.encoder(x)
        decoded = self.decoder(encoded)
        return decoded


def plot(noisy, decoded, path, n=10):
    """Noisy inputs above, reconstructions below; None when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    plt.figure(figsize=(20, 4))
    for i in range(n):
        ax = plt.subplot(2, n, i + 1)
        plt.title("original + noise")
        plt.imshow(jt.squeeze(noisy[i]))
        plt.gray()
        ax.get_xaxis().set_visible(False)
        ax.get_yaxis().set_visible(False)

        ax = plt.subplot(2, n, i + n + 1)
        plt.title("reconstructed")
        plt.imshow(jt.squeeze(decoded[i]))
        plt.gray()
        ax.get_xaxis().set_visible(False)
        ax.get_yaxis().set_visible(False)
    plt.savefig(path)
    plt.close()
    return path


def main(epochs=10, size=28, filters=(16, 8), noise_factor=0.2, batch_size=32, n_train=None,
         out="denoised.png", seed=0, verbose=True):
    say = print if verbose else (lambda *a, **k: None)
    x_train, x_test = load(size, seed)
    if n_train is not None:
        x_train = x_train[:n_train]
    jt.keras.utils.set_random_seed(seed)

    x_train_noisy = x_train + noise_factor * jt.random.normal(shape=x_train.shape)
    x_test_noisy = x_test + noise_factor * jt.random.normal(shape=x_test.shape)
    x_train_noisy = jt.clip_by_value(x_train_noisy, clip_value_min=0., clip_value_max=1.)
    x_test_noisy = jt.clip_by_value(x_test_noisy, clip_value_min=0., clip_value_max=1.)

    autoencoder = Denoise(size, filters)
    autoencoder.compile(optimizer="adam", loss=losses.MeanSquaredError())
    t0 = time.perf_counter()
    history = autoencoder.fit(x_train_noisy, x_train,
                              epochs=epochs,
                              batch_size=batch_size,
                              shuffle=True,
                              validation_data=(x_test_noisy, x_test),
                              verbose=1 if verbose else 0)
    fit_s = time.perf_counter() - t0
    if verbose:
        autoencoder.encoder.summary()
        autoencoder.decoder.summary()

    encoded_imgs = autoencoder.encoder(x_test_noisy).numpy()
    decoded_imgs = autoencoder.decoder(encoded_imgs).numpy()

    noisy_mse = float(np.mean((x_test_noisy.numpy() - x_test) ** 2))
    denoised_mse = float(np.mean((decoded_imgs - x_test) ** 2))
    say(f"test MSE against the clean images: noisy input {noisy_mse:.5f}, "
        f"reconstruction {denoised_mse:.5f} ({noisy_mse / denoised_mse:.1f}x lower)")
    say(f"fit: {fit_s:.1f} s for {epochs} epochs")
    png = plot(x_test_noisy.numpy(), decoded_imgs, out) if out else None
    if png:
        say(f"wrote {png}")
    elif out:
        say("matplotlib is not installed: no figure (pip install matplotlib)")
    return {"history": history.history, "noisy_mse": noisy_mse, "denoised_mse": denoised_mse,
            "encoded_shape": encoded_imgs.shape, "png": png, "fit_s": fit_s,
            "model": autoencoder}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--noise-factor", type=float, default=0.2)
    ap.add_argument("--out", default="denoised.png", help="the figure's path ('' for none)")
    args = ap.parse_args()
    main(epochs=args.epochs, noise_factor=args.noise_factor, out=args.out)
