"""Last-layer marginal likelihood (Schwöbel et al. 2021): a CNN feature extractor, a sparse variational
GP classifier on its last-layer features with a kernel averaged over augmentation orbits, and the
augmentation parameters learned by maximising the variational ELBO (a marginal-likelihood bound)
jointly with the CNN weights, the kernel hyperparameters and the variational parameters.

The model (van der Wilk et al. 2018's invariant GP, put on a network's features by Schwöbel et al.):

    g ~ GP(0, k)  on features,   f(x) = mean_s g(phi(a_s x)),   a_s ~ p_psi(a)  (the augmentation)
    k_inv(x, x') = mean_{s, s'} k(phi(a_s x), phi(a_s' x'))         (estimated with S orbit samples)

one latent f per class (independent outputs), softmax likelihood. Inducing variables are values of
g (not f) at M points Z in feature space ("inter-domain": an inducing point is an orbit of size one),
shared by the classes, so

    K_uu = k(Z, Z),   K_uf[m, n] = mean_s k(z_m, phi(a_s x_n)),   K_ff[n, n] = mean_{s,s'} k(phi(a_s x_n), phi(a_s' x_n)).

All three come from the same sampled orbit (every pair s, s', including s = s'), so each step's bound
is the exact ELBO of the GP averaged over that finite orbit: the predictive variance is never
negative and the orbit kernel matrix is PSD. q(v) = N(m_c, L_c L_c^T) per class on the whitened
inducing values v = L_uu^{-1} u. The ELBO's expected log-likelihood is a Monte Carlo average over
draws of the latent marginals (from a seeded generator, so resumption is bit-identical); its KL is
closed form. Only the marginals q(f(x_n)) are computed (all a factorised likelihood and per-point
predictions need), never the joint over a batch.

gpytorch parts: ``ApproximateGP``, ``CholeskyVariationalDistribution`` (batch of one per class),
``IndependentMultitaskVariationalStrategy`` around :class:`OrbitVariationalStrategy` (a
``_VariationalStrategy`` with the orbit kernel), a ``ScaleKernel(RBFKernel)`` base kernel and the
``SoftmaxLikelihood``. Settings (Schwöbel on MNIST, via the partitioned-networks paper): CNN Adam 1e-3,
batch 200, 1200 inducing points, orbit size 120; everything is configurable in
:class:`LastLayerGPConfig`.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

import gpytorch
import torch
from gpytorch.distributions import MultivariateNormal
from gpytorch.variational import CholeskyVariationalDistribution, IndependentMultitaskVariationalStrategy
from gpytorch.variational._variational_strategy import _VariationalStrategy
from linear_operator.operators import DiagLinearOperator
from torch import nn

from .. import seeds
from ..augment.affine import AffineAugmentation
from ..data.task import TaskData
from .augmented import ranges_metrics
from .common import EpochSampler, classification_metrics
from .standard import OptimConfig, make_optimizer


def mnist_cnn_features(cnn: nn.Sequential) -> nn.Sequential:
    """The MNIST CNN (models/mnist_cnn.py) without its last layer: features of the FC-50 ReLU (shared modules)."""
    children = list(cnn.named_children())
    if not children or not isinstance(children[-1][1], nn.Linear):
        raise ValueError("expected a network whose last child is its output nn.Linear")
    return nn.Sequential(OrderedDict(children[:-1]))


# --------------------------------------------------------------------------------------------------
# the orbit-averaged kernel and the variational strategy that uses it
# --------------------------------------------------------------------------------------------------


class OrbitKernel(gpytorch.Module):
    """k_inv between sampled orbits of features: inputs (N, S, D); an orbit of size one is a plain point."""

    def __init__(self, base_kernel: gpytorch.kernels.Kernel | None = None):
        super().__init__()
        self.base_kernel = (
            base_kernel if base_kernel is not None else gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())
        )

    def forward(self, orbits1: torch.Tensor, orbits2: torch.Tensor) -> torch.Tensor:
        """Dense (N1, N2): mean over all S1 x S2 pairs of the base kernel."""
        (n1, s1, d), (n2, s2, _) = orbits1.shape, orbits2.shape
        k = self.base_kernel(orbits1.reshape(n1 * s1, d), orbits2.reshape(n2 * s2, d)).to_dense()
        return k.reshape(n1, s1, n2, s2).mean(dim=(1, 3))

    def diag(self, orbits: torch.Tensor) -> torch.Tensor:
        """(N,): k_inv(x_n, x_n), every pair of the orbit's S samples (S^2 base evaluations per point)."""
        return self.base_kernel(orbits, orbits).to_dense().mean(dim=(-2, -1))

    def hyper_metrics(self) -> dict[str, float]:
        out = {}
        base = self.base_kernel
        if isinstance(base, gpytorch.kernels.ScaleKernel):
            out["gp_outputscale"] = float(base.outputscale.detach())
            base = base.base_kernel
        if getattr(base, "lengthscale", None) is not None:
            out["gp_lengthscale"] = float(base.lengthscale.detach().mean())
        return out


class OrbitVariationalStrategy(_VariationalStrategy):
    """Whitened SVGP marginals with inter-domain inducing points Z (on g) and the orbit kernel.

    Inputs are orbits flattened to (N, S * D) (gpytorch's strategies expect (..., N, dim)); the
    output's covariance is diagonal: the marginal variances of q(f(x_n)), per class.
    """

    def __init__(
        self,
        model: InvariantGP,
        inducing_points: torch.Tensor,
        variational_distribution: CholeskyVariationalDistribution,
        jitter_val: float | None = None,
    ):
        super().__init__(
            model, inducing_points, variational_distribution, learn_inducing_locations=True, jitter_val=jitter_val
        )
        self.feature_dim = int(inducing_points.shape[-1])
        # whitened q(v) starts at the prior N(0, I), explicitly (gpytorch would add global-RNG noise on first use)
        with torch.no_grad():
            variational_distribution.variational_mean.zero_()
        self.variational_params_initialized.fill_(1)

    @property
    def prior_distribution(self) -> MultivariateNormal:
        mean = self._variational_distribution.variational_mean
        zeros = torch.zeros_like(mean)
        return MultivariateNormal(zeros, DiagLinearOperator(torch.ones_like(mean)))

    def __call__(self, x: torch.Tensor, prior: bool = False, diag: bool = True, **kwargs) -> MultivariateNormal:
        self._clear_cache()  # never reuse a q(u) cached before the last update (eval mode keeps gpytorch's cache)
        return super().__call__(x, prior=prior, diag=diag, **kwargs)

    def inducing_cholesky(self) -> torch.Tensor:
        z = self.inducing_points
        kuu = self.model.kernel.base_kernel(z, z).to_dense()
        eye = torch.eye(z.shape[-2], dtype=kuu.dtype, device=kuu.device)
        return torch.linalg.cholesky(kuu + self.jitter_val * eye)

    def forward(self, x, inducing_points, inducing_values, variational_inducing_covar=None, diag=True, **kwargs):
        orbits = x.reshape(*x.shape[:-1], -1, self.feature_dim)  # (N, S, D)
        kernel = self.model.kernel
        chol = self.inducing_cholesky()
        kuf = kernel(inducing_points.unsqueeze(-2), orbits)  # (M, N)
        a = torch.linalg.solve_triangular(chol, kuf, upper=False)  # L_uu^{-1} K_uf
        mean = (inducing_values.unsqueeze(-2) @ a).squeeze(-2)  # (C, N)
        var = kernel.diag(orbits) - a.pow(2).sum(-2)
        if variational_inducing_covar is not None:
            var = var + (a * variational_inducing_covar.matmul(a)).sum(-2)  # diag(A^T S A), (C, N)
        var = var.clamp_min(1e-10)
        return MultivariateNormal(mean, DiagLinearOperator(var))

    def kl_divergence(self) -> torch.Tensor:
        """KL(q(v) || N(0, I)) per class, closed form."""
        m = self._variational_distribution.variational_mean
        chol = self._variational_distribution.chol_variational_covar.tril()
        logdet = 2 * chol.diagonal(dim1=-2, dim2=-1).abs().clamp_min(1e-30).log().sum(-1)
        return 0.5 * (chol.pow(2).sum((-2, -1)) + m.pow(2).sum(-1) - m.shape[-1] - logdet)


class InvariantGP(gpytorch.models.ApproximateGP):
    """One latent GP per class on orbit features, shared inducing points (M, D)."""

    def __init__(
        self, inducing_points: torch.Tensor, n_classes: int, base_kernel=None, jitter_val: float | None = None
    ):
        q_u = CholeskyVariationalDistribution(inducing_points.shape[-2], batch_shape=torch.Size([n_classes]))
        base = OrbitVariationalStrategy(self, inducing_points, q_u, jitter_val=jitter_val)
        super().__init__(IndependentMultitaskVariationalStrategy(base, num_tasks=n_classes))
        self.kernel = OrbitKernel(base_kernel)
        self.n_classes = int(n_classes)

    @property
    def orbit_strategy(self) -> OrbitVariationalStrategy:
        return self.variational_strategy.base_variational_strategy

    def forward(self, x: torch.Tensor) -> MultivariateNormal:
        """The prior of f on flattened orbits (N, S * D): N(0, K_inv)."""
        orbits = x.reshape(x.shape[0], -1, self.orbit_strategy.feature_dim)
        k = self.kernel(orbits, orbits)
        return MultivariateNormal(k.new_zeros(k.shape[-1]), k)

    def kl_divergence(self) -> torch.Tensor:
        return self.orbit_strategy.kl_divergence().sum()


class LastLayerGPModel(nn.Module):
    """features -> orbit (augmentation samples) -> invariant GP; `latent` gives the class marginals."""

    def __init__(self, features: nn.Module, augmentation: AffineAugmentation | None, gp: InvariantGP):
        super().__init__()
        self.features, self.augmentation, self.gp = features, augmentation, gp

    def orbit_features(self, x: torch.Tensor, n_samples: int, generator: torch.Generator | None) -> torch.Tensor:
        """(N, C, H, W) -> (N, S, D) features of S augmentation samples of every image (S = 1 without one)."""
        if self.augmentation is None:
            return self.features(x).unsqueeze(1)
        n = x.shape[0]
        xa = self.augmentation(x, n_samples, generator=generator)  # (S, N, C, H, W)
        feats = self.features(xa.reshape(n_samples * n, *x.shape[1:]))
        return feats.reshape(n_samples, n, -1).transpose(0, 1)

    def latent(self, x: torch.Tensor, n_samples: int, generator: torch.Generator | None):
        """Marginal means and variances (N, classes) of q(f(x))."""
        orbits = self.orbit_features(x, n_samples, generator)
        with torch.autocast(device_type=orbits.device.type, enabled=False):  # the GP in float32 even under bf16
            dist = self.gp(orbits.float().reshape(orbits.shape[0], -1))
            return dist.mean, dist.variance


# --------------------------------------------------------------------------------------------------
# the method
# --------------------------------------------------------------------------------------------------


@dataclass
class LastLayerGPConfig:
    n_inducing: int = 1200  # at most n_train: initialised at the features of distinct training images
    orbit_size: int = 120  # S, augmentation samples per image in training
    eval_orbit_size: int | None = None  # S in evaluations (None: orbit_size)
    likelihood_samples: int = 8  # draws of the latent marginals for the ELBO's expected log-likelihood
    eval_likelihood_samples: int = 32  # draws for the predictive log mean_k softmax(f_k)
    gp_lr: float = 1e-2  # Adam on variational parameters, inducing points and kernel hyperparameters
    aug_lr: float = 1e-3  # Adam on the augmentation parameters
    eval_batch_size: int = 200  # images per evaluation batch (x orbit size feature-extractor passes)
    curve_test_size: int | None = None  # test images of the per-step curve (None: all); final uses all
    jitter: float | None = None  # K_uu jitter (None: gpytorch's default for the dtype)
    lengthscale_init: float | None = None  # default RBF kernel only; None: median distance of the inducing features
    pretrain_steps: int = 0  # stage 1: the CNN with its softmax output layer (`head`), cross-entropy, no augmentation
    gp_warmup_steps: int = 0  # stage 2: GP only (features and augmentation fixed); stage 3 is joint


class LastLayerGPTraining:
    """ELBO training of CNN, augmentation, kernel and variational parameters (see the module docstring).

    Three stages over the run's steps (Schwöbel et al. describe a custom optimisation routine because joint
    training from scratch fails; our reading of it, CHOICE where their text is not at hand):

    1. ``pretrain_steps``: the CNN with its own softmax output layer ``head``, plain cross-entropy, no
       augmentation (the network's Adam). Without it, the ELBO's first gradients (q(v) at its zero-mean
       prior, so only the predictive variance matters) push orbit features apart until K_uf vanishes and
       every prediction is one class: measured here on MNIST 1k, 9.4 % test accuracy after 200 steps.
    2. ``gp_warmup_steps``: inducing points re-initialised at the pretrained features of distinct training
       images (stream "inducing_init"), lengthscale at their median distance, then the GP alone.
    3. the rest: joint ELBO of everything (three Adams: network ``optim``, GP ``gp_lr``, augmentation
       ``aug_lr``; no network optimiser when ``features`` has no trainable weights).

    With both counts 0 it is plain joint training from the start (inducing points at the initial features).
    q(v) starts at N(0, I). Loss = -ELBO / n_train (stage 1: cross-entropy); a K_uu that is no longer
    positive definite ends the step with a NaN loss (the loop records "diverged").
    Metrics: test_acc, test_ll (predictive with the invariant kernel), aug_* ranges, gp_* hyperparameters.
    """

    def __init__(
        self,
        features: nn.Module,
        augmentation: AffineAugmentation | None,
        data: TaskData,
        optim: OptimConfig | None = None,
        config: LastLayerGPConfig | None = None,
        seed: int = 0,
        base_kernel: gpytorch.kernels.Kernel | None = None,
        head: nn.Module | None = None,
    ):
        if data.task != "classification":
            raise ValueError("the last-layer GP is a classifier")
        self.data, self.cfg, self.optim_cfg = data, config or LastLayerGPConfig(), optim or OptimConfig(batch_size=200)
        self.seed, device = int(seed), data.device
        n_classes = int(data.n_classes or int(data.y_train.max()) + 1)
        features = features.to(device)

        if int(self.cfg.pretrain_steps) > 0 and head is None:
            raise ValueError("LastLayerGPConfig.pretrain_steps > 0 needs the network's output layer (head)")
        self.head = head.to(device) if head is not None and int(self.cfg.pretrain_steps) > 0 else None
        self.base_kernel_given = base_kernel is not None
        z = self._inducing_features(features)
        gp = InvariantGP(z, n_classes, base_kernel, jitter_val=self.cfg.jitter)
        self.model = LastLayerGPModel(features, augmentation, gp).to(device)
        self._set_lengthscale(z)
        self.likelihood = gpytorch.likelihoods.SoftmaxLikelihood(
            num_features=n_classes, num_classes=n_classes, mixing_weights=False
        ).to(device)

        aug_params = list(augmentation.parameters()) if augmentation is not None else []
        aug_ids = {id(p) for p in aug_params}
        gp_params = list(gp.parameters())
        net_params = [p for p in features.parameters() if p.requires_grad and id(p) not in aug_ids]
        if self.head is not None:
            net_params += [p for p in self.head.parameters() if p.requires_grad]
        self.opt = make_optimizer(net_params, self.optim_cfg) if net_params else None  # None: fixed features
        self.gp_opt = torch.optim.Adam(gp_params, lr=self.cfg.gp_lr)
        trainable_aug = [p for p in aug_params if p.requires_grad]
        self.aug_opt = torch.optim.Adam(trainable_aug, lr=self.cfg.aug_lr) if trainable_aug else None

        self.sampler = EpochSampler(
            data.n_train, self.optim_cfg.batch_size, seeds.generator(seed, "minibatches", device)
        )
        self.aug_gen = seeds.generator(seed, "augment", device)
        self.latent_gen = seeds.generator(seed, "latent_samples", device)
        self.curve_idx = None
        if self.cfg.curve_test_size is not None and int(self.cfg.curve_test_size) < data.x_test.shape[0]:
            gen = seeds.generator(seed, "test_eval_subset")
            idx = torch.randperm(data.x_test.shape[0], generator=gen)[: int(self.cfg.curve_test_size)].sort().values
            self.curve_idx = idx.to(device)

    @property
    def augmentation(self) -> AffineAugmentation | None:
        return self.model.augmentation

    @torch.no_grad()
    def _inducing_features(self, features: nn.Module) -> torch.Tensor:
        """Features of min(n_inducing, n_train) distinct training images (identity transformation)."""
        m = min(int(self.cfg.n_inducing), self.data.n_train)
        pick = torch.randperm(self.data.n_train, generator=seeds.generator(self.seed, "inducing_init"), device="cpu")[
            :m
        ]
        pick = pick.to(self.data.device)
        return torch.cat([features(self.data.x_train[pick[i : i + 500]]) for i in range(0, m, 500)])

    def _set_lengthscale(self, z: torch.Tensor) -> None:
        if self.base_kernel_given:
            return
        ls = self.cfg.lengthscale_init
        if ls is None:
            ls = float(torch.pdist(z[:500]).median().clamp_min(1e-3)) if z.shape[0] > 1 else 1.0
        # a tensor on z's device: gpytorch would make a Python float a tensor on the default device
        self.model.gp.kernel.base_kernel.base_kernel.lengthscale = torch.tensor(
            float(ls), dtype=z.dtype, device=z.device
        )

    def stage(self, step: int) -> str:
        p, w = int(self.cfg.pretrain_steps), int(self.cfg.gp_warmup_steps)
        return "pretrain" if step < p else "gp_warmup" if step < p + w else "joint"

    def _pretrain_step(self, idx: torch.Tensor) -> dict[str, float]:
        self.model.train()
        logits = self.head(self.model.features(self.data.x_train[idx]))
        loss = torch.nn.functional.cross_entropy(logits, self.data.y_train[idx])
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return {"loss": loss.item()}

    def _reinit_inducing(self) -> None:
        """Start of stage 2: inducing points at the pretrained features, lengthscale at their median distance."""
        z = self._inducing_features(self.model.features)
        with torch.no_grad():
            self.model.gp.orbit_strategy.inducing_points.copy_(z)
        self._set_lengthscale(z)

    def _draws(self, mean: torch.Tensor, var: torch.Tensor, k: int, generator: torch.Generator) -> torch.Tensor:
        eps = torch.randn((k, *mean.shape), generator=generator, dtype=mean.dtype, device=generator.device)
        return mean + var.sqrt() * eps.to(mean.device)

    def elbo(
        self, x: torch.Tensor, y: torch.Tensor, aug_gen: torch.Generator | None, latent_gen: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(ELBO / N, expected log-likelihood per example, KL / N) on a minibatch (unbiased for the full ELBO)."""
        mean, var = self.model.latent(x, int(self.cfg.orbit_size), aug_gen)
        f = self._draws(mean, var, int(self.cfg.likelihood_samples), latent_gen)  # (K, B, C)
        exp_ll = self.likelihood(f).log_prob(y).mean()
        kl = self.model.gp.kl_divergence() / self.data.n_train
        return exp_ll - kl, exp_ll, kl

    def train_step(self, step: int) -> dict[str, float]:
        idx = self.sampler.next()
        stage = self.stage(step)
        if stage == "pretrain":
            return self._pretrain_step(idx)
        if self.head is not None and step == int(self.cfg.pretrain_steps):
            self._reinit_inducing()  # once, at the first stage-2 step (a resumed run past it loads the points)
        self.model.train()
        try:
            elbo, exp_ll, kl = self.elbo(self.data.x_train[idx], self.data.y_train[idx], self.aug_gen, self.latent_gen)
        except torch.linalg.LinAlgError:  # K_uu lost positive definiteness: the run diverged (NaN), not a crash
            return {"loss": float("nan")}
        loss = -elbo
        opts = [self.gp_opt] if stage == "gp_warmup" else [self.opt, self.gp_opt, self.aug_opt]
        opts = [o for o in opts if o is not None]
        for o in opts:
            o.zero_grad(set_to_none=True)
        loss.backward()
        for o in opts:
            o.step()
        return {"loss": loss.item(), "nll": -exp_ll.item(), "kl": kl.item()}

    @torch.no_grad()
    def predict_log_proba(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """log p(y | x) = log mean_k softmax(f_k), f_k from q(f(x)) with the invariant kernel (eval orbit size)."""
        was_training = self.model.training
        self.model.eval()
        s = int(self.cfg.eval_orbit_size or self.cfg.orbit_size)
        k = int(self.cfg.eval_likelihood_samples)
        try:
            out = []
            for i in range(0, x.shape[0], int(self.cfg.eval_batch_size)):
                mean, var = self.model.latent(x[i : i + int(self.cfg.eval_batch_size)], s, generator)
                logp = torch.log_softmax(self._draws(mean, var, k, generator), dim=-1)
                out.append(torch.logsumexp(logp, dim=0) - math.log(k))
            return torch.cat(out)
        finally:
            self.model.train(was_training)

    def _metrics(self, x: torch.Tensor, y: torch.Tensor, stream: str) -> dict[str, float]:
        logp = self.predict_log_proba(x, seeds.generator(self.seed, stream, x.device))  # same draws every call
        out = {f"test_{k}": v for k, v in classification_metrics(logp, y).items()}
        out.update(ranges_metrics(self.augmentation))
        out.update(self.model.gp.kernel.hyper_metrics())
        return out

    def evaluate(self, step: int) -> dict[str, float]:
        x, y = self.data.x_test, self.data.y_test
        if self.curve_idx is not None:
            x, y = x[self.curve_idx], y[self.curve_idx]
        return self._metrics(x, y, "eval")

    def final_metrics(self) -> dict[str, float]:
        out = self._metrics(self.data.x_test, self.data.y_test, "final")
        out["n_inducing"] = float(self.model.gp.orbit_strategy.inducing_points.shape[-2])
        return out

    def state_dict(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "head": self.head.state_dict() if self.head is not None else None,
            "likelihood": self.likelihood.state_dict(),
            "opt": self.opt.state_dict() if self.opt is not None else None,
            "gp_opt": self.gp_opt.state_dict(),
            "aug_opt": self.aug_opt.state_dict() if self.aug_opt is not None else None,
            "sampler": self.sampler.state_dict(),
            "aug_gen": self.aug_gen.get_state(),
            "latent_gen": self.latent_gen.get_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        if self.head is not None:
            self.head.load_state_dict(state["head"])
        self.likelihood.load_state_dict(state["likelihood"])
        if self.opt is not None:
            self.opt.load_state_dict(state["opt"])
        self.gp_opt.load_state_dict(state["gp_opt"])
        if self.aug_opt is not None:
            self.aug_opt.load_state_dict(state["aug_opt"])
        self.sampler.load_state_dict(state["sampler"])
        self.aug_gen.set_state(state["aug_gen"])
        self.latent_gen.set_state(state["latent_gen"])
