"""BALI layer posterior: Eq. 16 against independent closed forms, EMA / bias correction, App. G mean
updates, weight sampling (Eq. 22) and local reparametrisation (App. F) by Monte Carlo."""

import math

import pytest
import torch

from reprokit.bali import BaliConfig, BaliLinear, BaliMLP, bali_step

D = torch.float64


def _layer(dx, dy, *, sigma_r2=2.0, sigma_u2=0.5, u0=None, n_eff=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return BaliLinear(
        dx - 1, dy, prior_var_r=sigma_r2, prior_var_u=sigma_u2, u0=u0, n_eff=n_eff, n_wishart=n_eff, generator=g
    )


def _data(n, dx, dy, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dx, generator=g, dtype=D)
    w = torch.randn(dx, dy, generator=g, dtype=D)
    y = x @ w + 0.3 * torch.randn(n, dy, generator=g, dtype=D)
    return x, y


def test_full_batch_beta_one_equals_eq16_closed_form():
    n, dx, dy, sr2, su2, u0 = 12, 5, 3, 2.0, 0.5, 4.0
    x, y = _data(n, dx, dy)
    layer = _layer(dx, dy, sigma_r2=sr2, sigma_u2=su2, u0=u0, n_eff=n)
    layer.update(x, y, beta=1.0, b=1.0)  # N_eff / B = 1, beta = 1: the EMA is the batch statistic

    # Eq. 16 with plain inverses (M_0 = 0, R_0 = sr2 I, U_0 = su2 I).
    r0_inv = torch.eye(dx, dtype=D) / sr2
    r = torch.linalg.inv(r0_inv + x.T @ x)
    m = r @ (x.T @ y)
    u_mat = su2 * torch.eye(dy, dtype=D) - m.T @ torch.linalg.inv(r) @ m + y.T @ y
    u = u0 + n
    sigma = u_mat / (u + dy + 1)  # Eq. 21

    torch.testing.assert_close(layer.row_cov(), r, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(layer.mean, m, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(layer.scale_u, u_mat, rtol=1e-9, atol=1e-10)
    assert layer.u == u
    torch.testing.assert_close(layer.noise_cov(), sigma, rtol=1e-9, atol=1e-12)

    # Independent form of the inverse-Wishart scale: U = U_0 + E^T E + M^T R_0^{-1} M, E = Y - X M.
    e = y - x @ m
    torch.testing.assert_close(layer.scale_u, su2 * torch.eye(dy, dtype=D) + e.T @ e + m.T @ r0_inv @ m)


def test_posterior_matches_vectorised_bayesian_linear_regression():
    """Given Sigma, vec(W) | Sigma is the Gaussian of Eq. 2 with X_bar_n = I (x) x_n^T: mean vec(M), cov Sigma (x) R."""
    n, dx, dy = 9, 4, 3
    x, y = _data(n, dx, dy, seed=3)
    layer = _layer(dx, dy, sigma_r2=3.0, n_eff=n)
    layer.update(x, y, beta=1.0, b=1.0)
    sigma = layer.noise_cov()
    sig_inv = torch.linalg.inv(sigma).contiguous()  # torch.kron rejects some non-contiguous inputs
    prec = torch.kron(sig_inv, torch.eye(dx, dtype=D) / 3.0)  # V_0^{-1} = Sigma^{-1} (x) R_0^{-1}
    eta = torch.zeros(dx * dy, dtype=D)
    for i in range(n):
        xbar = torch.kron(torch.eye(dy, dtype=D), x[i : i + 1])  # [D_y, D_y D_x]
        prec = prec + xbar.T @ sig_inv @ xbar
        eta = eta + xbar.T @ sig_inv @ y[i]
    cov = torch.linalg.inv(prec)
    vec_m = cov @ eta
    torch.testing.assert_close(layer.mean.T.reshape(-1), vec_m, rtol=1e-8, atol=1e-10)  # vec stacks columns
    torch.testing.assert_close(torch.kron(sigma, layer.row_cov()), cov, rtol=1e-8, atol=1e-10)


def test_ema_scaling_and_bias_correction_first_step():
    """One step with any beta and the bias correction b_1 = beta equals the batch statistic scaled by N_eff / B."""
    n, dx, dy, n_eff = 8, 4, 2, 40.0
    x, y = _data(n, dx, dy, seed=5)
    a = _layer(dx, dy, n_eff=n_eff)
    a.update(x, y, beta=0.1, b=0.1)
    torch.testing.assert_close(a.psi_xx / 0.1, n_eff / n * x.T @ x)
    torch.testing.assert_close(a.psi_xy / 0.1, n_eff / n * x.T @ y)
    torch.testing.assert_close(a.psi_yy / 0.1, n_eff / n * y.T @ y)
    ref = _layer(dx, dy, n_eff=n_eff)
    ref.update(x, y, beta=1.0, b=1.0)
    for name in ("mean", "chol_prec", "scale_u", "sigma"):
        torch.testing.assert_close(getattr(a, name), getattr(ref, name))
    # Without the correction the first posterior is a weaker (beta-shrunk) likelihood: it must differ.
    c = _layer(dx, dy, n_eff=n_eff)
    c.update(x, y, beta=0.1, b=1.0)
    assert not torch.allclose(c.mean, ref.mean, rtol=1e-3)
    # The gradient EMA: first corrected estimate equals the batch mean of g^2 (Eq. 19).
    g = torch.randn(n, dy, dtype=D)
    gn = a.normalised_grad(g, beta=0.1, b=0.1)
    torch.testing.assert_close(gn, g / g.square().mean(0).sqrt())


def test_model_first_step_independent_of_beta_with_bias_correction():
    x = torch.randn(16, 3)
    y = torch.randint(0, 3, (16,))
    posts = []
    for beta in (0.05, 1.0):
        cfg = BaliConfig(wishart_n="n", beta=beta, n_eff=64, sigma_r2=10.0, n_iterations=100)
        m = BaliMLP(3, [6], 3, "tanh", "classification", cfg, generator=torch.Generator().manual_seed(0))
        bali_step(m, x, y)
        posts.append([(ly.mean.clone(), ly.sigma.clone()) for ly in m.layers])
    for (ma, sa), (mb, sb) in zip(*posts):
        torch.testing.assert_close(ma, mb)
        torch.testing.assert_close(sa, sb)


@pytest.mark.parametrize("bias_correction", [False, True])
def test_ema_form_matches_mean_update_form_eq74(bias_correction):
    """App. G: M_t = M_{t-1} + beta R_t (R_0^{-1}(M_0 - M_{t-1}) + N/B X_t^T dY_t) with Y_t = X_t M_{t-1} + dY_t.

    With the bias correction the same recursion holds with beta replaced by beta / b_t, because
    b_t = beta + (1 - beta) b_{t-1}.
    """
    n_eff, bsz, dx, dy, beta, sr2 = 50.0, 6, 4, 3, 0.3, 2.0
    layer = _layer(dx, dy, sigma_r2=sr2, n_eff=n_eff)
    g = torch.Generator().manual_seed(7)
    r0_inv = torch.eye(dx, dtype=D) / sr2
    m_prev = torch.zeros(dx, dy, dtype=D)  # M_0
    prec_prev = r0_inv.clone()  # R_0^{-1}: the "posterior" before any data
    decay = 1.0
    for _t in range(1, 7):
        x = torch.randn(bsz, dx, generator=g, dtype=D)
        dy_t = torch.randn(bsz, dy, generator=g, dtype=D)
        y = x @ m_prev + dy_t
        decay *= 1.0 - beta
        b = 1.0 - decay if bias_correction else 1.0
        layer.update(x, y, beta, b)

        bt = beta / b
        s = n_eff / bsz
        prec = (1 - bt) * prec_prev + bt * (s * x.T @ x + r0_inv)
        r_t = torch.linalg.inv(prec)
        m_t = m_prev + bt * r_t @ (r0_inv @ (0.0 - m_prev) + s * x.T @ dy_t)  # Eq. 74
        torch.testing.assert_close(layer.row_cov(), r_t, rtol=1e-8, atol=1e-11)
        torch.testing.assert_close(layer.mean, m_t, rtol=1e-8, atol=1e-11)
        m_prev, prec_prev = layer.mean.clone(), prec


def _trained_layer(dx=4, dy=3, seed=11):
    x, y = _data(7, dx, dy, seed=seed)
    layer = _layer(dx, dy, sigma_r2=1.5, sigma_u2=2.0, n_eff=7)
    layer.update(x, y, beta=1.0, b=1.0)
    return layer


def test_weight_samples_have_posterior_mean_and_kronecker_covariance():
    layer = _trained_layer()
    n = 8000
    g = torch.Generator().manual_seed(0)
    w = torch.stack([layer.sample_weight(g).T.reshape(-1) for _ in range(n)])  # vec(W), columns stacked
    cov = torch.kron(layer.noise_cov(), layer.row_cov())  # Sigma (x) R (Sec. 2.2)
    mean = layer.mean.T.reshape(-1)
    se_mean = (cov.diagonal() / n).sqrt()
    assert ((w.mean(0) - mean).abs() <= 5 * se_mean).all()
    emp = torch.cov(w.T)
    se_cov = ((cov.square() + torch.outer(cov.diagonal(), cov.diagonal())) / n).sqrt()
    assert ((emp - cov).abs() <= 5 * se_cov).all()
    # The structure is not trivially satisfied: the swapped Kronecker order would be rejected.
    wrong = torch.kron(layer.row_cov(), layer.noise_cov())
    assert ((emp - wrong).abs() > 5 * se_cov).any()


def test_local_reparam_matches_weight_reparam_in_distribution():
    """BALI-L and BALI-W give the same per-example pre-activation mean and covariance (x^T R x) Sigma (Eq. 67);
    BALI-W additionally correlates examples ((x_1^T R x_2) Sigma), BALI-L does not."""
    layer = _trained_layer(seed=13)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, layer.dx, generator=g, dtype=D)
    x[1] = 0.9 * x[0] + 0.2 * x[1]  # strongly correlated pair, so the cross term is clearly non-zero
    n = 6000
    zw = torch.stack([layer.linear(x, "weight", g) for _ in range(n)])  # [n, 3, dy]
    zl = layer.linear(x.repeat(n, 1), "local", g).reshape(n, 3, layer.dy)
    r, sigma = layer.row_cov(), layer.noise_cov()
    mean = x @ layer.mean
    var = torch.einsum("bi,ij,bj->b", x, r, x)[:, None] * sigma.diagonal()[None, :]
    for z in (zw, zl):
        assert ((z.mean(0) - mean).abs() <= 5 * (var / n).sqrt()).all()
        assert ((z.var(0) - var).abs() <= 5 * var * math.sqrt(2.0 / n)).all()
        # Full output covariance of example 0: (x_0^T R x_0) Sigma.
        c0 = torch.cov(z[:, 0, :].T)
        ref = (x[0] @ r @ x[0]) * sigma
        se = ((ref.square() + torch.outer(ref.diagonal(), ref.diagonal())) / n).sqrt()
        assert ((c0 - ref).abs() <= 5 * se).all()
    # Cross-example covariance of output 0 between examples 0 and 1.
    cross = (x[0] @ r @ x[1]) * sigma[0, 0]
    se = math.sqrt((cross**2 + var[0, 0] * var[1, 0]) / n)
    cw = torch.cov(torch.stack([zw[:, 0, 0], zw[:, 1, 0]]))[0, 1]
    cl = torch.cov(torch.stack([zl[:, 0, 0], zl[:, 1, 0]]))[0, 1]
    assert abs(cw - cross) <= 5 * se
    assert abs(cl) <= 5 * math.sqrt(var[0, 0] * var[1, 0] / n)
    assert abs(cross) > 10 * se  # the two checks above can tell the schemes apart


def test_mean_mode_and_initial_weights():
    layer = _layer(4, 2)
    x = torch.randn(5, 4, dtype=D)
    # Before the first update every mode uses the fixed initial weights.
    for mode in ("weight", "local", "mean"):
        torch.testing.assert_close(layer.linear(x, mode), x @ layer.weight_init.to(D))
    xd, yd = _data(6, 4, 2)
    layer.update(xd, yd, 1.0, 1.0)
    torch.testing.assert_close(layer.linear(x, "mean"), x @ layer.mean)
    assert not torch.allclose(layer.linear(x, "weight"), x @ layer.mean)


def test_features_scale_and_bias_column():
    layer = BaliLinear(3, 2, n_wishart=1.0)
    h = torch.randn(4, 3)
    f = layer.features(h)
    torch.testing.assert_close(f, torch.cat([h, torch.ones(4, 1)], 1) / 2.0)  # 1 / sqrt(3 + 1)
    assert BaliLinear(3, 2, n_wishart=1.0, scale_input=False).features(h)[:, -1].eq(1).all()


def test_model_scales_hidden_features_and_first_layer_only_on_request():
    h = torch.randn(4, 3)
    default = BaliMLP(3, [5], 2, config=BaliConfig(wishart_n="n"))
    assert torch.equal(default.layers[0].features(h), torch.cat([h, torch.ones(4, 1)], 1))  # x_1 = (x, 1)
    hid = torch.randn(4, 5)
    torch.testing.assert_close(default.layers[1].features(hid), torch.cat([hid, torch.ones(4, 1)], 1) / math.sqrt(6))
    scaled = BaliMLP(3, [5], 2, config=BaliConfig(wishart_n="n", scale_input_layer=True))
    torch.testing.assert_close(scaled.layers[0].features(h), torch.cat([h, torch.ones(4, 1)], 1) / 2.0)


@pytest.mark.parametrize("n_data", [100.0, 25.0])
def test_wishart_n_scales_sigma_by_the_closed_form_factor(n_data):
    """`wishart_n` (2026-11-23, commit 015830c) picks the N in u = u_0 + N (Eq. 16d). With the same EMA
    statistics, M, R and U are identical and Sigma_n / Sigma_neff = (u_0 + N_eff + D_y + 1) / (u_0 + N + D_y + 1)
    exactly, in every layer
    (here after one bali_step from the same initial weights); the two choices agree when N_eff = N."""
    n_eff, dims = 25.0, (3, [6], 2)
    x, y = _data(40, 3, 2)
    models = {}
    for choice in ("n", "n_eff"):
        cfg = BaliConfig(n_eff=n_eff, n_data=n_data, wishart_n=choice, sigma_r2=4.0, n_iterations=10)
        assert cfg.wishart_count == (n_data if choice == "n" else n_eff)
        model = BaliMLP(*dims, "tanh", "regression", cfg, generator=torch.Generator().manual_seed(3))
        bali_step(model, x.float(), y.float(), generator=torch.Generator().manual_seed(4))
        models[choice] = model
    for ln, le in zip(models["n"].layers, models["n_eff"].layers):
        factor = (le.u0 + n_eff + le.dy + 1) / (ln.u0 + n_data + ln.dy + 1)
        assert ln.u == ln.u0 + n_data and le.u == le.u0 + n_eff
        torch.testing.assert_close(ln.scale_u, le.scale_u, rtol=0, atol=0)
        torch.testing.assert_close(ln.mean, le.mean, rtol=0, atol=0)
        torch.testing.assert_close(ln.sigma, le.sigma * factor, rtol=1e-14, atol=0)
        if n_data == n_eff:
            assert factor == 1.0 and torch.equal(ln.sigma, le.sigma)
        else:
            assert factor < 0.4  # N / N_eff = 4: Sigma is ~3-4x smaller with the actual N
    with pytest.raises(ValueError, match="wishart_n"):
        BaliConfig(wishart_n="N")
    # the library has no default of its own: the caller states its reading (the pipeline's is BaliPriors')
    with pytest.raises(TypeError, match="wishart_n"):
        BaliConfig(n_eff=7.0)
    # without n_data both choices count N_eff (the library's callers that know only N_eff)
    assert (
        BaliConfig(wishart_n="n", n_eff=7.0).wishart_count
        == BaliConfig(n_eff=7.0, wishart_n="n_eff").wishart_count
        == 7.0
    )


def test_float32_gram_products_feed_float64_emas_and_stay_close_to_float64():
    """gram_dtype float32: the batch products are formed in float32 and accumulated into float64 EMAs; the
    posterior then agrees with the float64 one to float32 round-off, and differs from it (the option acts).
    Sigma's tolerance is wider: U = Psi_yy - S^T S cancels (here |Psi_yy| / |U| ~ 300), which multiplies the
    products' ~1e-7 relative round-off."""
    n, dx, dy = 256, 30, 4
    x, y = _data(n, dx, dy)
    x, y = x.float(), y.float()  # the same float32 inputs for both: only the products' precision differs
    ref, f32 = _layer(dx, dy, n_eff=n), _layer(dx, dy, n_eff=n)
    f32.gram_dtype = torch.float32
    for beta, b in ((1.0, 1.0), (0.3, 0.51), (0.3, 0.657)):
        ref.update(x, y, beta=beta, b=b)
        f32.update(x, y, beta=beta, b=b)
    assert f32.psi_xx.dtype == torch.float64 and f32.mean.dtype == torch.float64
    tolerance = {"psi_xx": 1e-6, "psi_xy": 1e-6, "psi_yy": 1e-6, "mean": 1e-5, "sigma": 3e-4}
    for name, tol in tolerance.items():
        a, c = getattr(ref, name), getattr(f32, name)
        rel = float((a - c).norm() / a.norm())
        assert 0.0 < rel < tol, (name, rel)


def test_bali_config_gram_dtype_reaches_every_layer_and_rejects_unknown():
    cfg = BaliConfig(wishart_n="n", n_eff=100.0, gram_dtype="float32")
    model = BaliMLP(3, [8], 2, "tanh", "regression", cfg)
    assert all(layer.gram_dtype == torch.float32 and layer.stats_dtype == torch.float64 for layer in model.layers)
    assert all(
        layer.gram_dtype == torch.float64 for layer in BaliMLP(3, [8], 2, config=BaliConfig(wishart_n="n")).layers
    )
    with pytest.raises(ValueError, match="gram_dtype 'float16'"):
        BaliConfig(wishart_n="n", gram_dtype="float16")
