"""Keras 3's optimizer update rules and its ``apply`` pipeline written out in numpy, from the
formulas in Keras' documentation and the papers (a test oracle: no jittape here).

``RULES[name](**hyperparameters)`` gives ``(init, step)``: ``init(w) -> state`` and
``step(w, g, lr, t, state) -> w`` for the ``t``-th update (1-based). ``f32`` marks the
hyperparameters Keras' TensorFlow backend casts through a float32 tensor (they matter
for float64 variables only). ``apply_reference`` runs Keras' order of operations
around a rule: loss scaling, gradient accumulation, clipping, weight decay, the rule,
the EMA of the variables and its overwrite, constraints.
"""

from __future__ import annotations

import math

import numpy as np


def f32(x):
    return float(np.float32(x))


def sgd(momentum=0.0, nesterov=False):
    mu = f32(momentum)

    def init(w):
        return {"m": np.zeros_like(w)}

    def step(w, g, lr, t, s):
        if momentum == 0:
            return w - lr * g
        s["m"] = mu * s["m"] - lr * g
        return w + (mu * s["m"] - lr * g if nesterov else s["m"])
    return init, step


def adam(beta_1=0.9, beta_2=0.999, epsilon=1e-7, amsgrad=False):
    def init(w):
        return {"m": np.zeros_like(w), "v": np.zeros_like(w), "vhat": np.zeros_like(w)}

    def step(w, g, lr, t, s):
        s["m"] = s["m"] + (g - s["m"]) * (1 - beta_1)
        s["v"] = s["v"] + (g * g - s["v"]) * (1 - beta_2)
        alpha = lr * math.sqrt(1 - f32(beta_2) ** t) / (1 - f32(beta_1) ** t)
        v = s["v"]
        if amsgrad:
            s["vhat"] = np.maximum(s["vhat"], v)
            v = s["vhat"]
        return w - alpha * s["m"] / (np.sqrt(v) + epsilon)
    return init, step


def rmsprop(rho=0.9, momentum=0.0, epsilon=1e-7, centered=False):
    def init(w):
        return {"rms": np.zeros_like(w), "mg": np.zeros_like(w), "mom": np.zeros_like(w)}

    def step(w, g, lr, t, s):
        s["rms"] = rho * s["rms"] + (1 - rho) * g * g
        den = s["rms"] + epsilon
        if centered:
            s["mg"] = rho * s["mg"] + (1 - rho) * g
            den = s["rms"] - s["mg"] ** 2 + epsilon
        inc = lr * g / np.sqrt(den)
        if momentum > 0:
            s["mom"] = momentum * s["mom"] + inc
            return w - s["mom"]
        return w - inc
    return init, step


def adagrad(initial_accumulator_value=0.1, epsilon=1e-7):
    def init(w):
        return {"acc": np.full_like(w, f32(initial_accumulator_value))}

    def step(w, g, lr, t, s):
        s["acc"] = s["acc"] + g * g
        return w - lr * g / np.sqrt(s["acc"] + epsilon)
    return init, step


def adadelta(rho=0.95, epsilon=1e-7):
    def init(w):
        return {"eg": np.zeros_like(w), "edx": np.zeros_like(w)}

    def step(w, g, lr, t, s):
        s["eg"] = rho * s["eg"] + (1 - rho) * g * g
        dx = -np.sqrt(s["edx"] + epsilon) / np.sqrt(s["eg"] + epsilon) * g
        s["edx"] = rho * s["edx"] + (1 - rho) * dx * dx
        return w + lr * dx
    return init, step


def adamax(beta_1=0.9, beta_2=0.999, epsilon=1e-7):
    def init(w):
        return {"m": np.zeros_like(w), "u": np.zeros_like(w)}

    def step(w, g, lr, t, s):
        s["m"] = s["m"] + (g - s["m"]) * (1 - beta_1)
        s["u"] = np.maximum(beta_2 * s["u"], np.abs(g))
        return w - lr * s["m"] / ((1 - f32(beta_1) ** t) * (s["u"] + epsilon))
    return init, step


def nadam(beta_1=0.9, beta_2=0.999, epsilon=1e-7):
    """Dozat's Nadam with the momentum schedule mu_t = beta_1 (1 - 0.5 * 0.96^t)."""
    b1, b2, decay = f32(beta_1), f32(beta_2), f32(0.96)

    def init(w):
        return {"m": np.zeros_like(w), "v": np.zeros_like(w), "u_product": 1.0}

    def step(w, g, lr, t, s):
        s["u_product"] = s["u_product"] * beta_1 * (1 - 0.5 * 0.96 ** t)  # exact betas
        mu_t = b1 * (1 - 0.5 * decay ** t)
        mu_next = b1 * (1 - 0.5 * decay ** (t + 1))
        s["m"] = s["m"] + (g - s["m"]) * (1 - b1)
        s["v"] = s["v"] + (g * g - s["v"]) * (1 - b2)
        m_hat = (mu_next * s["m"] / (1 - s["u_product"] * mu_next)
                 + (1 - mu_t) * g / (1 - s["u_product"]))
        v_hat = s["v"] / (1 - b2 ** t)
        return w - m_hat * lr / (np.sqrt(v_hat) + epsilon)
    return init, step


def ftrl(learning_rate_power=-0.5, initial_accumulator_value=0.1,
         l1_regularization_strength=0.0, l2_regularization_strength=0.0,
         l2_shrinkage_regularization_strength=0.0, beta=0.0):
    """McMahan et al.'s FTRL-Proximal with Keras' L2 shrinkage and beta."""
    p, l1 = -learning_rate_power, l1_regularization_strength

    def init(w):
        return {"n": np.full_like(w, f32(initial_accumulator_value)), "z": np.zeros_like(w)}

    def step(w, g, lr, t, s):
        l2 = l2_regularization_strength + beta / (2 * lr)
        shrunk = g + 2 * l2_shrinkage_regularization_strength * w
        n_new = s["n"] + g * g
        s["z"] = s["z"] + shrunk - (n_new ** p - s["n"] ** p) / lr * w
        q = n_new ** p / lr + 2 * l2
        s["n"] = n_new
        return (np.clip(s["z"], -l1, l1) - s["z"]) / q
    return init, step


def lion(beta_1=0.9, beta_2=0.99):
    b1, b2 = f32(beta_1), f32(beta_2)

    def init(w):
        return {"m": np.zeros_like(w)}

    def step(w, g, lr, t, s):
        w = w - lr * np.sign(b1 * s["m"] + (1 - b1) * g)
        s["m"] = b2 * s["m"] + (1 - b2) * g
        return w
    return init, step


RULES = {"SGD": sgd, "Adam": adam, "AdamW": adam, "RMSprop": rmsprop, "Adagrad": adagrad,
         "Adadelta": adadelta, "Adamax": adamax, "Nadam": nadam, "Ftrl": ftrl, "Lion": lion}


def clip_by_norm(g, c):
    return g * c / max(np.sqrt(np.sum(g * g)), c)


def apply_reference(name, hyper, ws, grad_seq, lr, options=None, constraint=None):
    """The variables after each call of ``apply_gradients`` in Keras 3's pipeline.

    ``lr`` is a float or a function of the call count; ``options`` holds the base
    optimizer's keyword arguments. Returns ``(history, averages, accumulators)``.
    """
    o = dict(options or {})
    init, step = RULES[name](**hyper)
    ws = [np.array(w, np.float64) for w in ws]
    states = [init(w) for w in ws]
    n = o.get("gradient_accumulation_steps")
    acc = [np.zeros_like(w) for w in ws]
    avg = [np.zeros_like(w) for w in ws]
    history = []
    for call, grads in enumerate(grad_seq):
        rate = lr(call) if callable(lr) else lr
        grads = [np.array(g, np.float64) for g in grads]
        if o.get("loss_scale_factor"):
            grads = [g / o["loss_scale_factor"] for g in grads]
        updates = True
        it = call
        if n:
            it = call // n
            updates = (call + 1) % n == 0
            if updates:
                grads = [(g + a) / n for g, a in zip(grads, acc)]
                acc = [np.zeros_like(a) for a in acc]
            else:
                acc = [a + g for a, g in zip(acc, grads)]
        if updates:
            if o.get("clipnorm"):
                grads = [clip_by_norm(g, o["clipnorm"]) for g in grads]
            elif o.get("global_clipnorm"):
                c = o["global_clipnorm"]
                norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads))
                grads = [g * c / max(norm, c) for g in grads]
            elif o.get("clipvalue"):
                grads = [np.clip(g, -o["clipvalue"], o["clipvalue"]) for g in grads]
            wd = o.get("weight_decay")
            if wd:
                ws = [w - w * f32(wd) * rate for w in ws]
            ws = [step(w, g, rate, it + 1, s) for w, g, s in zip(ws, grads, states)]
        if o.get("use_ema"):
            m = o.get("ema_momentum", 0.99) if it != 0 else 0.0
            avg = [m * a + (1 - m) * w for a, w in zip(avg, ws)]
            freq = o.get("ema_overwrite_frequency")
            if freq and (it + 1) % freq == 0:
                ws = [a.copy() for a in avg]
        if constraint is not None:
            ws = [constraint(w) for w in ws]
        history.append([w.copy() for w in ws])
    return history, avg, acc
