"""WGAN-GP: a critic trained with a gradient penalty (Gulrajani et al., 2017).

The critic D scores 2-D points; "real" points lie on a ring, "fake" ones come from a
small generator G (a Dense layer on Gaussian noise). Each step trains the critic on

    L_D = mean D(fake) - mean D(real) + lambda * mean (||grad_x D(x_hat)|| - 1)^2

with x_hat a random interpolate between real and fake points. The penalty needs the
gradient of D with respect to its input (inner tape) differentiated again with
respect to D's weights (outer tape). Every few critic steps the generator takes one
step on -mean D(G(z)). Before training, the penalty's weight gradient is checked
against finite differences in float64.

Run: python examples/gradient_penalty.py [--steps N]
"""

import argparse

import numpy as np

import jittape as jt

LAMBDA = 10.0


def make_critic(dtype="float32"):
    return jt.Sequential([
        jt.layers.Dense(32, activation="tanh", dtype=dtype),
        jt.layers.Dense(32, activation="tanh", dtype=dtype),
        jt.layers.Dense(1, dtype=dtype),
    ])


def real_batch(rng, n):
    angle = rng.uniform(0, 2 * np.pi, n)
    r = 2.0 + 0.1 * rng.standard_normal(n)
    return np.stack([r * np.cos(angle), r * np.sin(angle)], axis=1)


def gradient_penalty(critic, real, fake, alpha):
    """mean (||d critic / d x_hat|| - 1)^2 at x_hat = alpha real + (1 - alpha) fake."""
    x_hat = alpha * real + (1.0 - alpha) * fake
    with jt.GradientTape() as tape:
        tape.watch(x_hat)
        score = critic(x_hat, training=True)
    g = tape.gradient(score, x_hat)
    norm = jt.sqrt(jt.reduce_sum(jt.square(g), axis=1) + 1e-12)
    return jt.reduce_mean(jt.square(norm - 1.0))


def check_penalty_gradient(seed=0, eps=1e-6):
    """<d penalty / d weights, v> against a central difference along v (float64)."""
    jt.random.set_seed(seed)
    rng = np.random.default_rng(seed)
    critic = make_critic("float64")
    real, fake = real_batch(rng, 8), rng.standard_normal((8, 2))
    alpha = rng.uniform(size=(8, 1))
    critic(real)
    params = critic.trainable_variables
    with jt.GradientTape() as tape:
        gp = gradient_penalty(critic, jt.constant(real), jt.constant(fake), jt.constant(alpha))
    # the penalty does not depend on the output bias: its gradient is None unless asked
    # for zeros
    grads = tape.gradient(gp, params, unconnected_gradients=jt.UnconnectedGradients.ZERO)
    direction = [rng.standard_normal(p.shape) for p in params]
    analytic = sum(float(np.sum(g.numpy() * d)) for g, d in zip(grads, direction))
    base = critic.get_weights()

    def penalty_at(sign):
        critic.set_weights([b + sign * eps * d for b, d in zip(base, direction)])
        return float(gradient_penalty(critic, jt.constant(real), jt.constant(fake),
                                      jt.constant(alpha)))

    numeric = (penalty_at(+1) - penalty_at(-1)) / (2 * eps)
    critic.set_weights(base)
    return analytic, numeric


def main(steps=300, batch_size=64, n_critic=5, seed=0, verbose=True):
    say = print if verbose else (lambda *a, **k: None)
    analytic, numeric = check_penalty_gradient(seed)
    say(f"penalty gradient along a random direction: tape {analytic:.8f}, "
        f"finite differences {numeric:.8f}")

    jt.random.set_seed(seed)
    rng = np.random.default_rng(seed)
    critic = make_critic()
    generator = jt.Sequential([jt.layers.Dense(16, activation="tanh"), jt.layers.Dense(2)])
    c_opt = jt.optimizers.Adam(1e-3, beta_1=0.5, beta_2=0.9)
    g_opt = jt.optimizers.Adam(1e-3, beta_1=0.5, beta_2=0.9)

    history = []
    for step in range(1, steps + 1):
        real = jt.constant(real_batch(rng, batch_size).astype(np.float32))
        fake = generator(jt.random.normal((batch_size, 2)))
        alpha = jt.random.uniform((batch_size, 1))
        with jt.GradientTape() as tape:
            w_estimate = (jt.reduce_mean(critic(real, training=True))
                          - jt.reduce_mean(critic(fake, training=True)))
            gp = gradient_penalty(critic, real, fake, alpha)
            c_loss = -w_estimate + LAMBDA * gp
        grads = tape.gradient(c_loss, critic.trainable_variables)
        c_opt.apply_gradients(zip(grads, critic.trainable_variables))
        if step % n_critic == 0:
            with jt.GradientTape() as tape:
                g_loss = -jt.reduce_mean(critic(generator(jt.random.normal((batch_size, 2)))))
            grads = tape.gradient(g_loss, generator.trainable_variables)
            g_opt.apply_gradients(zip(grads, generator.trainable_variables))
        history.append((float(w_estimate), float(gp)))
        if step % 100 == 0 or step == steps:
            say(f"step {step:4d}  critic loss {float(c_loss):8.4f}  "
                f"W estimate {float(w_estimate):.4f}  penalty {float(gp):.4f}")
    return {"fd_check": (analytic, numeric), "history": history}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    main(steps=p.parse_args().steps)
