"""Higher-order derivatives with nested GradientTapes.

1. d/dx, d2/dx2 and d3/dx3 of x^3 (three nested tapes).
2. A Hessian-vector product of a small network's loss with respect to its weights
   (gradient inside, then the gradient of <gradient, v> outside), checked against
   central finite differences of the gradient, in float64.
3. The full Hessian as the jacobian of the gradient, and H v against the product.

Run: python examples/higher_order.py [--steps N]   (N: power-iteration steps)
"""

import argparse

import numpy as np

import jittape as jt


def third_derivative(x0=2.0):
    x = jt.constant(x0)
    with jt.GradientTape() as t3:
        t3.watch(x)
        with jt.GradientTape() as t2:
            t2.watch(x)
            with jt.GradientTape() as t1:
                t1.watch(x)
                y = x * x * x
            dy = t1.gradient(y, x)
        d2y = t2.gradient(dy, x)
    d3y = t3.gradient(d2y, x)
    return float(dy), float(d2y), float(d3y)


def make_problem(seed=0):
    jt.random.set_seed(seed)  # reproducible initial weights
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((16, 3))
    y = np.sin(x.sum(axis=1, keepdims=True))
    model = jt.Sequential([
        jt.layers.Dense(5, activation="tanh", dtype="float64"),
        jt.layers.Dense(1, dtype="float64"),
    ])
    model(x)
    return model, x, y


def loss_of(model, x, y):
    return jt.losses.MeanSquaredError()(y, model(x))


def gradient(model, x, y):
    with jt.GradientTape() as tape:
        loss = loss_of(model, x, y)
    return tape.gradient(loss, model.trainable_variables)


def hvp(model, x, y, vector):
    """H v by reverse-over-reverse: the gradient of <grad, v> with respect to the weights."""
    params = model.trainable_variables
    with jt.GradientTape() as outer:
        with jt.GradientTape() as inner:
            loss = loss_of(model, x, y)
        grads = inner.gradient(loss, params)
        dot = sum(jt.reduce_sum(g * v) for g, v in zip(grads, vector))
    return outer.gradient(dot, params)


def hvp_finite_differences(model, x, y, vector, eps=1e-5):
    params = model.trainable_variables
    base = [p.numpy() for p in params]

    def grad_at(sign):
        for p, b, v in zip(params, base, vector):
            p.assign(b + sign * eps * v)
        return [g.numpy() for g in gradient(model, x, y)]

    plus, minus = grad_at(+1), grad_at(-1)
    for p, b in zip(params, base):
        p.assign(b)
    return [(a - b) / (2 * eps) for a, b in zip(plus, minus)]


def full_hessian(model, x, y):
    """The Hessian over the flattened weights, as the jacobian of the flat gradient."""
    params = model.trainable_variables
    with jt.GradientTape() as outer:
        with jt.GradientTape() as inner:
            loss = loss_of(model, x, y)
        grads = inner.gradient(loss, params)
        flat = jt.concat([jt.reshape(g, [-1]) for g in grads], axis=0)
    blocks = outer.jacobian(flat, params)
    return np.concatenate([np.asarray(b).reshape(flat.shape[0], -1) for b in blocks], axis=1)


def main(steps=20, seed=0, verbose=True):
    say = print if verbose else (lambda *a, **k: None)
    d1, d2, d3 = third_derivative(2.0)
    say(f"x^3 at 2: first {d1}, second {d2}, third {d3}")

    model, x, y = make_problem(seed)
    rng = np.random.default_rng(seed + 1)
    vector = [rng.standard_normal(p.shape) for p in model.trainable_variables]
    hv = [g.numpy() for g in hvp(model, x, y, vector)]
    fd = hvp_finite_differences(model, x, y, vector)
    hvp_error = max(float(np.max(np.abs(a - b))) for a, b in zip(hv, fd))
    scale = max(float(np.max(np.abs(b))) for b in fd)
    say(f"Hessian-vector product vs finite differences: max |diff| {hvp_error:.2e} "
        f"(entries up to {scale:.2f})")

    H = full_hessian(model, x, y)
    v_flat = np.concatenate([v.ravel() for v in vector])
    hv_flat = np.concatenate([h.ravel() for h in hv])
    product_error = float(np.max(np.abs(H @ v_flat - hv_flat)))
    asym = float(np.max(np.abs(H - H.T)))
    say(f"full Hessian {H.shape}: |H v - hvp| {product_error:.2e}, |H - H^T| {asym:.2e}")

    # the largest-magnitude curvature by power iteration on H v products
    u = [rng.standard_normal(p.shape) for p in model.trainable_variables]
    lam = 0.0
    for _ in range(steps):
        norm = np.sqrt(sum(float(np.sum(a * a)) for a in u))
        u = [a / norm for a in u]
        hu = [g.numpy() for g in hvp(model, x, y, u)]
        lam = sum(float(np.sum(a * b)) for a, b in zip(u, hu))
        u = hu
    eig = np.linalg.eigvalsh((H + H.T) / 2)
    top = float(eig[np.argmax(np.abs(eig))])
    say(f"power iteration ({steps} HVPs): curvature {lam:.4f}; eigvalsh: {top:.4f}")
    return {"derivatives": (d1, d2, d3), "hvp_error": hvp_error, "hvp_scale": scale,
            "product_error": product_error, "asymmetry": asym, "power_eigenvalue": lam,
            "top_eigenvalue": top}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    main(steps=p.parse_args().steps)
