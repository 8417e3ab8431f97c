"""Higher derivatives through nested tapes, checked against finite differences
in float64: a WGAN-GP gradient penalty, a MAML second-order step, and
Hessian-vector products."""
import numpy as np

import jittape as jt


def npv(t):
    assert t is not None, "expected a gradient, got None"
    return np.asarray(t.numpy())


def central_fd(f, params, idx, eps=1e-6):
    """Central finite difference of scalar f(params) w.r.t. params[idx]."""
    p = params[idx]
    out = np.zeros_like(p)
    it = np.nditer(p, flags=["multi_index"])
    for _ in it:
        mi = it.multi_index
        plus = [q.copy() for q in params]
        minus = [q.copy() for q in params]
        plus[idx][mi] += eps
        minus[idx][mi] -= eps
        out[mi] = (f(plus) - f(minus)) / (2 * eps)
    return out


# --------------------------------------------------------------------------
# WGAN-GP gradient penalty
# --------------------------------------------------------------------------


def _wgan_setup():
    rng = np.random.default_rng(0)
    B, D, H = 5, 3, 4
    X = rng.normal(size=(B, D))
    W1 = rng.normal(size=(D, H)) * 0.7
    b1 = rng.normal(size=(H,)) * 0.1
    W2 = rng.normal(size=(H, 1)) * 0.7
    return X, [W1, b1, W2]


def _penalty_np(X, params):
    W1, b1, W2 = params
    t = np.tanh(X @ W1 + b1)  # (B, H)
    # critic(x) = tanh(x W1 + b1) W2 ; d critic / d x per sample:
    gx = ((1 - t**2) * W2[:, 0]) @ W1.T  # (B, D)
    norms = np.sqrt(np.sum(gx**2, axis=1))
    return np.mean((norms - 1.0) ** 2)


def test_wgan_gp_penalty_gradient_matches_finite_differences():
    X, params = _wgan_setup()
    W1v, b1v, W2v = (jt.Variable(p.copy()) for p in params)
    assert W1v.dtype == jt.float64
    x = jt.constant(X)
    assert x.dtype == jt.float64

    with jt.GradientTape() as outer:
        with jt.GradientTape() as inner:
            inner.watch(x)
            critic = jt.tanh(x @ W1v + b1v) @ W2v  # (B, 1)
        gx = inner.gradient(critic, x)  # (B, D)
        norms = jt.sqrt(jt.reduce_sum(gx * gx, axis=1))
        penalty = jt.reduce_mean((norms - 1.0) ** 2)
    grads = outer.gradient(penalty, [W1v, b1v, W2v])

    np.testing.assert_allclose(npv(penalty), _penalty_np(X, params), rtol=1e-12)
    for i, g in enumerate(grads):
        fd = central_fd(lambda ps: _penalty_np(X, ps), params, i)
        assert g.shape == params[i].shape
        assert g.dtype == jt.float64
        np.testing.assert_allclose(npv(g), fd, rtol=1e-5, atol=1e-8)


def test_wgan_gp_with_interpolates_and_norm():
    X, params = _wgan_setup()
    rng = np.random.default_rng(1)
    fake = rng.normal(size=X.shape)
    alpha = rng.uniform(size=(X.shape[0], 1))
    x_hat_np = alpha * X + (1 - alpha) * fake
    W1v, b1v, W2v = (jt.Variable(p.copy()) for p in params)

    with jt.GradientTape() as outer:
        x_hat = jt.constant(alpha) * jt.constant(X) + (1.0 - jt.constant(alpha)) * jt.constant(fake)
        with jt.GradientTape() as inner:
            inner.watch(x_hat)
            critic = jt.tanh(x_hat @ W1v + b1v) @ W2v
        gx = inner.gradient(critic, x_hat)
        norms = jt.norm(gx, axis=1)
        penalty = jt.reduce_mean(jt.square(norms - 1.0))
    g = outer.gradient(penalty, W1v)
    fd = central_fd(lambda ps: _penalty_np(x_hat_np, ps), params, 0)
    np.testing.assert_allclose(npv(g), fd, rtol=1e-5, atol=1e-8)


# --------------------------------------------------------------------------
# MAML second-order step
# --------------------------------------------------------------------------


def _maml_setup():
    rng = np.random.default_rng(2)
    N, D = 6, 3
    Xtr = rng.normal(size=(N, D))
    ytr = rng.normal(size=(N, 1))
    Xval = rng.normal(size=(N, D))
    yval = rng.normal(size=(N, 1))
    w = rng.normal(size=(D, 1)) * 0.5
    return Xtr, ytr, Xval, yval, w


ALPHA = 0.3


def _loss_np(w, X, y):
    p = np.tanh(X @ w)
    return np.mean((p - y) ** 2)


def _grad_loss_np(w, X, y):
    p = np.tanh(X @ w)
    return X.T @ (2 * (p - y) * (1 - p**2)) / X.shape[0]


def _maml_np(w, Xtr, ytr, Xval, yval):
    w2 = w - ALPHA * _grad_loss_np(w, Xtr, ytr)
    return _loss_np(w2, Xval, yval)


def _loss_jt(w, X, y):
    p = jt.tanh(X @ w)
    return jt.reduce_mean((p - y) ** 2)


def test_maml_second_order_step_matches_finite_differences():
    Xtr, ytr, Xval, yval, w0 = _maml_setup()
    w = jt.Variable(w0.copy())
    Xtr_t, ytr_t, Xval_t, yval_t = map(jt.constant, (Xtr, ytr, Xval, yval))

    with jt.GradientTape() as outer:
        with jt.GradientTape() as inner:
            lt = _loss_jt(w, Xtr_t, ytr_t)
        gw = inner.gradient(lt, w)
        w_adapted = w - ALPHA * gw
        lv = _loss_jt(w_adapted, Xval_t, yval_t)
    g = outer.gradient(lv, w)

    np.testing.assert_allclose(npv(gw), _grad_loss_np(w0, Xtr, ytr), rtol=1e-10)
    np.testing.assert_allclose(npv(lv), _maml_np(w0, Xtr, ytr, Xval, yval), rtol=1e-12)
    fd = central_fd(lambda ps: _maml_np(ps[0], Xtr, ytr, Xval, yval), [w0], 0)
    np.testing.assert_allclose(npv(g), fd, rtol=1e-5, atol=1e-8)

    # The second-order term matters: first-order MAML would be different.
    w2 = w0 - ALPHA * _grad_loss_np(w0, Xtr, ytr)
    first_order = _grad_loss_np(w2, Xval, yval)
    assert not np.allclose(npv(g), first_order, rtol=1e-3, atol=1e-6)


def test_maml_two_inner_steps_persistent_outer():
    Xtr, ytr, Xval, yval, w0 = _maml_setup()
    w = jt.Variable(w0.copy())
    Xtr_t, ytr_t, Xval_t, yval_t = map(jt.constant, (Xtr, ytr, Xval, yval))

    def procedure_np(wv):
        for _ in range(2):
            wv = wv - ALPHA * _grad_loss_np(wv, Xtr, ytr)
        return _loss_np(wv, Xval, yval)

    with jt.GradientTape(persistent=True) as outer:
        w_cur = w * 1.0
        for _ in range(2):
            with jt.GradientTape() as inner:
                inner.watch(w_cur)
                lt = _loss_jt(w_cur, Xtr_t, ytr_t)
            w_cur = w_cur - ALPHA * inner.gradient(lt, w_cur)
        lv = _loss_jt(w_cur, Xval_t, yval_t)
    g = outer.gradient(lv, w)
    fd = central_fd(lambda ps: procedure_np(ps[0]), [w0], 0)
    np.testing.assert_allclose(npv(g), fd, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(npv(outer.gradient(lv, w)), fd, rtol=1e-5, atol=1e-8)


# --------------------------------------------------------------------------
# Hessian-vector products and higher orders
# --------------------------------------------------------------------------


def _hvp_setup():
    rng = np.random.default_rng(3)
    n = 4
    A = rng.normal(size=(n, n))
    x0 = rng.normal(size=(n,)) * 0.5
    v0 = rng.normal(size=(n,))
    return A, x0, v0


def _f_jt(x, A):
    n = x.shape[0]
    xm = jt.reshape(x, (n, 1))
    quad = 0.5 * jt.reduce_sum(xm * jt.matmul(jt.constant(A), xm))
    return quad + jt.reduce_sum(jt.exp(x))


def test_hessian_vector_product_nested_tapes():
    A, x0, v0 = _hvp_setup()
    x = jt.Variable(x0.copy())
    v = jt.constant(v0)
    with jt.GradientTape() as t2:
        with jt.GradientTape() as t1:
            f = _f_jt(x, A)
        g = t1.gradient(f, x)
        gv = jt.reduce_sum(g * v)
    hv = t2.gradient(gv, x)
    H = 0.5 * (A + A.T) + np.diag(np.exp(x0))
    np.testing.assert_allclose(npv(g), 0.5 * (A + A.T) @ x0 + np.exp(x0), rtol=1e-12)
    np.testing.assert_allclose(npv(hv), H @ v0, rtol=1e-12, atol=1e-12)


def test_full_hessian_via_jacobian_of_gradient():
    A, x0, _ = _hvp_setup()
    x = jt.Variable(x0.copy())
    with jt.GradientTape() as t2:
        with jt.GradientTape() as t1:
            f = _f_jt(x, A)
        g = t1.gradient(f, x)
    H = t2.jacobian(g, x)
    assert H.shape == (4, 4)
    np.testing.assert_allclose(npv(H), 0.5 * (A + A.T) + np.diag(np.exp(x0)), rtol=1e-12, atol=1e-12)


def test_third_derivative():
    x = jt.Variable(2.0, dtype=jt.float64)
    with jt.GradientTape() as t3:
        with jt.GradientTape() as t2:
            with jt.GradientTape() as t1:
                y = x**4
            d1 = t1.gradient(y, x)
        d2 = t2.gradient(d1, x)
    d3 = t3.gradient(d2, x)
    np.testing.assert_allclose(npv(d1), 32.0)  # 4 x^3
    np.testing.assert_allclose(npv(d2), 48.0)  # 12 x^2
    np.testing.assert_allclose(npv(d3), 48.0)  # 24 x


def test_second_derivative_of_composite_functions():
    xs = np.array([0.3, -0.7, 1.1])
    x = jt.constant(xs)
    with jt.GradientTape() as t2:
        t2.watch(x)
        with jt.GradientTape() as t1:
            t1.watch(x)
            y = jt.reduce_sum(jt.sin(x) * jt.exp(x) + jt.sigmoid(x) + jt.tanh(x) * x)
        d1 = t1.gradient(y, x)
    d2 = t2.gradient(d1, x)
    s = 1 / (1 + np.exp(-xs))
    t = np.tanh(xs)
    d1_exp = np.exp(xs) * (np.sin(xs) + np.cos(xs)) + s * (1 - s) + (1 - t**2) * xs + t
    d2_exp = (
        2 * np.exp(xs) * np.cos(xs)
        + s * (1 - s) * (1 - 2 * s)
        + (-2 * t * (1 - t**2)) * xs
        + 2 * (1 - t**2)
    )
    np.testing.assert_allclose(npv(d1), d1_exp, rtol=1e-12)
    np.testing.assert_allclose(npv(d2), d2_exp, rtol=1e-10)


def test_gradient_of_a_jacobian():
    xs = np.array([0.5, -1.0, 2.0])
    x = jt.Variable(xs)
    with jt.GradientTape() as outer:
        with jt.GradientTape() as inner:
            y = x**3
        J = inner.jacobian(y, x)  # diag(3 x^2)
        s = jt.reduce_sum(J * J)  # sum 9 x^4
    np.testing.assert_allclose(npv(J), np.diag(3 * xs**2), rtol=1e-12)
    np.testing.assert_allclose(npv(outer.gradient(s, x)), 36 * xs**3, rtol=1e-12)


def test_softmax_cross_entropy_hessian():
    rng = np.random.default_rng(4)
    B, C = 3, 4
    logits_np = rng.standard_normal((B, C))
    labels_np = np.array([0, 3, 1], np.int32)
    logits = jt.constant(logits_np)
    labels = jt.constant(labels_np)
    with jt.GradientTape() as outer:
        outer.watch(logits)
        with jt.GradientTape() as inner:
            inner.watch(logits)
            loss = jt.reduce_mean(
                jt.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
            )
        g = inner.gradient(loss, logits)
    H = outer.batch_jacobian(g, logits)
    p = np.exp(logits_np) / np.exp(logits_np).sum(1, keepdims=True)
    np.testing.assert_allclose(npv(g), (p - np.eye(C)[labels_np]) / B, rtol=1e-12, atol=1e-15)
    expected = np.stack([(np.diag(pb) - np.outer(pb, pb)) / B for pb in p])
    assert H.shape == (B, C, C)
    np.testing.assert_allclose(npv(H), expected, rtol=1e-10, atol=1e-14)


def test_logsumexp_and_log_softmax_hvp():
    rng = np.random.default_rng(5)
    xs = rng.standard_normal(5)
    v0 = rng.standard_normal(5)
    p = np.exp(xs) / np.exp(xs).sum()
    H = np.diag(p) - np.outer(p, p)
    for f in (
        lambda x: jt.reduce_logsumexp(x),
        lambda x: -jt.nn.log_softmax(x)[2] + x[2],  # = logsumexp(x)
    ):
        x = jt.Variable(xs.copy())
        with jt.GradientTape() as t2:
            with jt.GradientTape() as t1:
                y = f(x)
            g = t1.gradient(y, x)
            gv = jt.reduce_sum(g * jt.constant(v0))
        np.testing.assert_allclose(npv(g), p, rtol=1e-12)
        np.testing.assert_allclose(npv(t2.gradient(gv, x)), H @ v0, rtol=1e-10, atol=1e-14)


def test_second_derivatives_of_piecewise_ops():
    xs = np.array([-1.5, -0.5, 0.5, 1.5])
    cases = [
        (lambda x: x * jt.nn.relu(x), np.where(xs > 0, 2.0, 0.0)),
        (lambda x: jt.square(jt.maximum(x, 0.0)), np.where(xs > 0, 2.0, 0.0)),
        (lambda x: x * jt.abs(x), 2 * np.sign(xs)),
        (lambda x: jt.where(x > 0.0, x**3, -x), np.where(xs > 0, 6 * xs, 0.0)),
        (lambda x: jt.square(jt.clip_by_value(x, -1.0, 1.0)), np.where(np.abs(xs) < 1, 2.0, 0.0)),
    ]
    for f, d2 in cases:
        x = jt.Variable(xs.copy())
        with jt.GradientTape() as t2:
            with jt.GradientTape() as t1:
                y = jt.reduce_sum(f(x))
            g = t1.gradient(y, x)
        np.testing.assert_allclose(npv(t2.gradient(g, x, unconnected_gradients="zero")), d2,
                                   rtol=1e-12, atol=1e-14)


def test_norm_hessian():
    xs = np.array([1.0, -2.0, 2.0])
    x = jt.Variable(xs)
    with jt.GradientTape() as t2:
        with jt.GradientTape() as t1:
            n = jt.norm(x)
        g = t1.gradient(n, x)
    H = t2.jacobian(g, x)
    r = np.linalg.norm(xs)
    u = xs / r
    np.testing.assert_allclose(npv(g), u, rtol=1e-12)
    np.testing.assert_allclose(npv(H), (np.eye(3) - np.outer(u, u)) / r, rtol=1e-10, atol=1e-14)


def test_inner_gradient_called_inside_inner_context():
    # a common way to write it: the inner non-persistent tape stops itself,
    # the outer tape records the backward ops
    x = jt.Variable(3.0)
    with jt.GradientTape() as t2:
        with jt.GradientTape() as t1:
            y = x**3
            dy = t1.gradient(y, x)
    np.testing.assert_allclose(npv(dy), 27.0)
    np.testing.assert_allclose(npv(t2.gradient(dy, x)), 18.0)


def test_persistent_inner_tape_reused_for_two_second_order_quantities():
    x = jt.Variable(np.array([1.0, 2.0]))
    with jt.GradientTape(persistent=True) as t2:
        with jt.GradientTape(persistent=True) as t1:
            y = jt.reduce_sum(x**3)
            z = jt.reduce_sum(jt.sin(x))
        gy = t1.gradient(y, x)
        gz = t1.gradient(z, x)
    xs = np.array([1.0, 2.0])
    np.testing.assert_allclose(npv(t2.gradient(gy, x)), 6 * xs, rtol=1e-12)
    np.testing.assert_allclose(npv(t2.gradient(gz, x)), -np.sin(xs), rtol=1e-12)
    np.testing.assert_allclose(npv(t2.gradient([gy, gz], x)), 6 * xs - np.sin(xs), rtol=1e-12)
