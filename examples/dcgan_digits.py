"""A DCGAN that draws digits: TF's "Deep Convolutional Generative Adversarial Network"
tutorial with ``tf`` replaced by ``jt``, on scikit-learn's digits upscaled to 28x28.

The generator maps 100 normal numbers to an image (Dense -> BatchNormalization ->
LeakyReLU -> Reshape 7x7x256 -> three Conv2DTranspose, the last two of stride 2, with
BatchNormalization and LeakyReLU between, tanh at the end); the discriminator is a
Conv2D / LeakyReLU / Dropout stack with one logit. The train step is the tutorial's: two
tapes, two Adam optimizers, one ``@jt.function`` call per batch (forward through both
models, both backward passes, both updates). After each epoch the generator draws 16
images from a fixed seed; when matplotlib is installed they are saved as a 4x4 grid,
``image_at_epoch_NNNN.png`` in ``--out``.

Batches of 64 rather than the tutorial's 256 (1,797 digits, not 60,000 MNIST images: 28
steps an epoch); after the 50 epochs the grid shows digit shapes.

Run: python examples/dcgan_digits.py [--epochs N] [--out DIR]
Needs the ``examples`` extra (scikit-learn for the data; matplotlib for the images).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import jittape as jt
from jittape.keras import layers


def load(size=28):
    """All 1,797 digits as (n, size, size, 1) float32 images in [-1, 1], as the tutorial's."""
    from sklearn.datasets import load_digits

    images = load_digits().images.astype("float32")[..., np.newaxis]  # 0..16
    images = jt.image.resize(images, [size, size]).numpy()
    return (images - 8.0) / 8.0  # normalize the images to [-1, 1]


def make_generator_model(size=28, noise_dim=100, filters=(256, 128, 64)):
    s = size // 4
    model = jt.keras.Sequential()
    model.add(layers.Dense(s * s * filters[0], use_bias=False, input_shape=(noise_dim,)))
    model.add(layers.BatchNormalization())
    model.add(layers.LeakyReLU())

    model.add(layers.Reshape((s, s, filters[0])))
    assert model.output_shape == (None, s, s, filters[0])  # None is the batch size

    model.add(layers.Conv2DTranspose(filters[1], (5, 5), strides=(1, 1), padding="same",
                                     use_bias=False))
    assert model.output_shape == (None, s, s, filters[1])
    model.add(layers.BatchNormalization())
    model.add(layers.LeakyReLU())

    model.add(layers.Conv2DTranspose(filters[2], (5, 5), strides=(2, 2), padding="same",
                                     use_bias=False))
    assert model.output_shape == (None, 2 * s, 2 * s, filters[2])
    model.add(layers.BatchNormalization())
    model.add(layers.LeakyReLU())

    model.add(layers.Conv2DTranspose(1, (5, 5), strides=(2, 2), padding="same", use_bias=False,
                                     activation="tanh"))
    assert model.output_shape == (None, 4 * s, 4 * s, 1)

    return model


def make_discriminator_model(size=28, filters=(64, 128)):
    model = jt.keras.Sequential()
    model.add(layers.Conv2D(filters[0], (5, 5), strides=(2, 2), padding="same",
                            input_shape=[size, size, 1]))
    model.add(layers.LeakyReLU())
    model.add(layers.Dropout(0.3))

    model.add(layers.Conv2D(filters[1], (5, 5), strides=(2, 2), padding="same"))
    model.add(layers.LeakyReLU())
    model.add(layers.Dropout(0.3))

    model.add(layers.Flatten())
    model.add(layers.Dense(1))

    return model


# This method returns a helper function to compute cross entropy loss
cross_entropy = jt.keras.losses.BinaryCrossentropy(from_logits=True)


def discriminator_loss(real_output, fake_output):
    real_loss = cross_entropy(jt.ones_like(real_output), real_output)
    fake_loss = cross_entropy(jt.zeros_like(fake_output), fake_output)
    total_loss = real_loss + fake_loss
    return total_loss


def generator_loss(fake_output):
    return cross_entropy(jt.ones_like(fake_output), fake_output)


def generate_and_save_images(model, epoch, test_input, out):
    """The generator's images for ``test_input`` as a 4x4 grid; the path, or None without
    matplotlib."""
    # Notice `training` is set to False: all layers run in inference mode (batchnorm).
    predictions = model(test_input, training=False)
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig = plt.figure(figsize=(4, 4))
    for i in range(predictions.shape[0]):
        plt.subplot(4, 4, i + 1)
        plt.imshow(predictions[i, :, :, 0] * 127.5 + 127.5, cmap="gray")
        plt.axis("off")
    path = os.path.join(out, "image_at_epoch_{:04d}.png".format(epoch))
    plt.savefig(path)
    plt.close(fig)
    return path


def main(epochs=50, size=28, batch_size=64, noise_dim=100, gen_filters=(256, 128, 64),
         disc_filters=(64, 128), n_images=None, out="dcgan_images", seed=0, verbose=True):
    say = print if verbose else (lambda *a, **k: None)
    train_images = load(size)
    if n_images is not None:
        train_images = train_images[:n_images]
    jt.keras.utils.set_random_seed(seed)

    BUFFER_SIZE = len(train_images)
    BATCH_SIZE = batch_size
    # Batch and shuffle the data. Full batches only (not in the tutorial, whose last batch
    # is smaller): every step then has BATCH_SIZE images, and the step one signature
    train_dataset = jt.data.Dataset.from_tensor_slices(train_images).shuffle(
        BUFFER_SIZE).batch(BATCH_SIZE, drop_remainder=True)

    generator = make_generator_model(size, noise_dim, gen_filters)
    discriminator = make_discriminator_model(size, disc_filters)
    generator_optimizer = jt.keras.optimizers.Adam(1e-4)
    discriminator_optimizer = jt.keras.optimizers.Adam(1e-4)

    num_examples_to_generate = 16
    # You will reuse this seed overtime (so it's easier to visualize progress)
    seed_noise = jt.random.normal([num_examples_to_generate, noise_dim])

    # Notice the use of `jt.function`
    # This annotation causes the function to be "compiled".
    @jt.function
    def train_step(images):
        noise = jt.random.normal([BATCH_SIZE, noise_dim])

        with jt.GradientTape() as gen_tape, jt.GradientTape() as disc_tape:
            generated_images = generator(noise, training=True)

            real_output = discriminator(images, training=True)
            fake_output = discriminator(generated_images, training=True)

            gen_loss = generator_loss(fake_output)
            disc_loss = discriminator_loss(real_output, fake_output)

        gradients_of_generator = gen_tape.gradient(gen_loss, generator.trainable_variables)
        gradients_of_discriminator = disc_tape.gradient(disc_loss,
                                                        discriminator.trainable_variables)

        generator_optimizer.apply_gradients(zip(gradients_of_generator,
                                                generator.trainable_variables))
        discriminator_optimizer.apply_gradients(zip(gradients_of_discriminator,
                                                    discriminator.trainable_variables))
        # not in the tutorial: what the step saw, for the log and the tests
        return (gen_loss, disc_loss, jt.reduce_mean(jt.sigmoid(real_output)),
                jt.reduce_mean(jt.sigmoid(fake_output)))

    if out:
        os.makedirs(out, exist_ok=True)
    g0 = [w.copy() for w in generator.get_weights()]
    history, pngs = [], []
    t_start = time.perf_counter()
    for epoch in range(epochs):
        start = time.perf_counter()
        stats = []
        for image_batch in train_dataset:
            stats.append([float(v) for v in train_step(image_batch)])
        gen_loss, disc_loss, d_real, d_fake = np.mean(stats, axis=0)
        history.append({"gen_loss": float(gen_loss), "disc_loss": float(disc_loss),
                        "d_real": float(d_real), "d_fake": float(d_fake), "steps": stats})
        png = generate_and_save_images(generator, epoch + 1, seed_noise, out) if out else None
        if png:
            pngs.append(png)
        say("Epoch {:3d}: gen loss {:.3f}, disc loss {:.3f}, D(real) {:.2f}, D(fake) {:.2f}, "
            "{:.1f} sec".format(epoch + 1, gen_loss, disc_loss, d_real, d_fake,
                                time.perf_counter() - start))
    train_s = time.perf_counter() - t_start
    if out and not pngs:
        say("matplotlib is not installed: no images (pip install matplotlib)")
    elif pngs:
        say(f"wrote {len(pngs)} grids, the last {pngs[-1]}")
    g1 = generator.get_weights()
    return {"history": history, "pngs": pngs, "train_s": train_s,
            "traces": train_step.experimental_get_tracing_count(),
            "generator_change": max(float(np.max(np.abs(a - b))) for a, b in zip(g0, g1)),
            "samples": generator(seed_noise, training=False).numpy(),
            "generator": generator, "discriminator": discriminator}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=50)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--out", default="dcgan_images", help="folder for the PNGs ('' for none)")
    args = ap.parse_args()
    main(epochs=args.epochs, batch_size=args.batch_size, out=args.out)
