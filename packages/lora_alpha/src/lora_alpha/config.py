"""LoRA-alpha: set the LoRA scaling factor from the square-root law ``alpha = c * sqrt(r)``.

peft's LoRA layer computes ``W x + (alpha / r) * B A x`` (``use_rslora=True``: ``alpha / sqrt(r)``).
LoRA-alpha keeps peft's standard parametrisation and sets ``alpha = c * sqrt(r)``, so the applied
scale is ``c / sqrt(r)``. **LoRA-alpha with coefficient c is rsLoRA with alpha = c**: the same
scale at every rank, so the same forward pass and the same training. What the paper adds is the
size of ``c``: far larger than the ``alpha`` people pass today (8, 16, 2r), so that the standard
small learning rates leave LoRA in its fast regime. The config returned is a plain
``peft.LoraConfig``; everything peft does with it (saving, merging, ``PeftModel.from_pretrained``)
works unchanged.

Two recipes (see ``seeds/lora_alpha.md``):

* the paper's, as descriptions of it give it: ``alpha = 256 sqrt(r)`` (:data:`PAPER_C`) with AdamW
  at a learning rate around 2e-5 (:data:`PAPER_LR`). :data:`DEFAULT_C` is the paper's coefficient.
* ours, a variant: ``c = 128`` (:data:`OURS_C`) at lr 1e-4 (:data:`OURS_LR`), fitted by this
  package's own CPU sweep.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torch import nn

#: The paper's coefficient of ``alpha* ~ c * sqrt(r)`` (under AdamW, lr around :data:`PAPER_LR`).
PAPER_C = 256.0
#: The paper's learning rate for LoRA-alpha (AdamW), as descriptions of the paper give it.
PAPER_LR = 2e-5
#: Our coefficient (a variant, "ours"). Fitted by this package's own sweep, the one
#: ``reproduce --scale quick`` ran before issue 44: the regression task (MLP 32-128-128-16, planted
#: rank-16 shift), AdamW at lr 1e-4, 200 steps of batch 32, alpha in 16..2048 (x2 steps) at
#: r = 1, 4, 16, 64, 3 seeds; the loss-minimising alpha per rank fitted as ``alpha* = c * r**b``
#: gave b = 0.49 and c = 108, rounded to the nearest power of two. Tied to lr :data:`OURS_LR`.
OURS_C = 128.0
#: The learning rate our coefficient was fitted at.
OURS_LR = 1e-4
#: Default coefficient of ``alpha = c * sqrt(r)``: the paper's (:data:`PAPER_C`).
DEFAULT_C = PAPER_C

#: ``peft.LoraConfig`` fields that LoRA-alpha sets itself: passing them would break the law.
_SET_BY_LAW = ("r", "lora_alpha", "use_rslora")


def _lora_fields() -> set[str]:
    from peft import LoraConfig

    return {f.name for f in dataclasses.fields(LoraConfig)}


def check_lora_kwargs(lora_kwargs: Mapping[str, Any], owner: str = "LoraAlphaConfig") -> None:
    """Reject what would break a scaling rule, accept every other ``peft.LoraConfig`` field.

    Rejected with a ``ValueError``: ``r``, ``lora_alpha`` and ``use_rslora`` (set by the rule), names
    that are no ``LoraConfig`` field, a ``rank_pattern`` whose ranks are not ints >= 1, and EVA
    initialisation that redistributes ranks (``rho != 1``: peft then rescales alpha to keep
    ``alpha / r``). ``alpha_pattern`` is checked where the rule is known (:func:`law_patterns`).
    """
    if not lora_kwargs:
        return
    for key in _SET_BY_LAW:
        if key in lora_kwargs:
            raise ValueError(f"{key} is set by {owner}'s rule; do not pass it in lora_kwargs")
    unknown = set(lora_kwargs) - _lora_fields()
    if unknown:
        raise ValueError(
            f"lora_kwargs has unknown keys {sorted(unknown)}: peft.LoraConfig has no such field"
        )
    ranks = lora_kwargs.get("rank_pattern") or {}
    if not isinstance(ranks, Mapping):
        raise ValueError(f"rank_pattern must be a mapping of module pattern to rank; got {ranks!r}")
    for key, rk in ranks.items():
        if isinstance(rk, bool) or not isinstance(rk, int) or rk < 1:
            raise ValueError(f"rank_pattern[{key!r}] must be an int >= 1; got {rk!r}")
    if lora_kwargs.get("init_lora_weights") == "eva":
        rho = getattr(lora_kwargs.get("eva_config"), "rho", 2.0)  # peft's EvaConfig default
        if rho != 1.0:
            raise ValueError(
                f"init_lora_weights='eva' with rho={rho:g}: EVA moves ranks between layers and "
                "rescales alpha to keep alpha / r, which breaks the scaling rule; pass "
                "eva_config=peft.EvaConfig(rho=1.0)"
            )


def law_patterns(
    lora_kwargs: Mapping[str, Any], r: int, alpha_of_rank: Any, rule: str
) -> dict[str, Any]:
    """``lora_kwargs`` with an ``alpha_pattern`` that keeps every module on the rule.

    Each ``rank_pattern`` entry gets ``alpha_of_rank(its rank)``; an ``alpha_pattern`` the caller
    passes must agree with the rule (within 1e-9 relative) at the rank of every module it reaches.
    peft matches both patterns' keys as regexes, the first match winning, so the rank-derived keys
    go first; a caller's key is checked here when its rank is known (a ``rank_pattern`` key, or no
    ``rank_pattern``) and otherwise by :func:`check_scaling` once the model is wrapped.
    """
    ranks = dict(lora_kwargs.get("rank_pattern") or {})
    given = dict(lora_kwargs.get("alpha_pattern") or {})
    for key, a in given.items():
        if not (isinstance(a, int | float) and math.isfinite(a) and a > 0):
            raise ValueError(f"alpha_pattern[{key!r}] must be a finite number > 0; got {a!r}")
        # known before wrapping: a key of rank_pattern itself, or any key when every module has
        # rank r; a regex key that may reach a rank_pattern module is checked after wrapping
        if key in ranks or not ranks:
            rk = ranks.get(key, r)
            if not math.isclose(a, alpha_of_rank(rk), rel_tol=1e-9):
                raise ValueError(
                    f"alpha_pattern[{key!r}] = {a!r} breaks the rule {rule} (expected "
                    f"{alpha_of_rank(rk):g} at rank {rk}); leave alpha_pattern out: it is set "
                    "from rank_pattern"
                )
    if not ranks and not given:
        return dict(lora_kwargs)
    # peft matches pattern keys as regexes, the first match winning: the rank-derived keys go
    # first; whatever module a caller's key reaches is checked after wrapping (check_scaling)
    pattern = {**{key: alpha_of_rank(rk) for key, rk in ranks.items()}, **given}
    return {**lora_kwargs, "alpha_pattern": pattern}


def check_scaling(model: Any, alpha_of_rank: Callable[[int], float], rule: str = "") -> None:
    """Check every LoRA layer of a wrapped ``model`` against the rule at its own rank: its
    ``scaling`` must be ``alpha_of_rank(r) / r`` (``/ sqrt(r)`` under rsLoRA), however peft
    resolved ``rank_pattern`` and ``alpha_pattern`` (regex keys, first match wins). A layer off
    the rule raises a ``ValueError`` naming it."""
    for name, module in model.named_modules():
        ranks, scales = getattr(module, "r", None), getattr(module, "scaling", None)
        if not (isinstance(ranks, dict) and isinstance(scales, dict)):
            continue
        rslora = getattr(module, "use_rslora", {})
        for adapter, rk in ranks.items():
            if adapter not in scales:
                continue
            denom = math.sqrt(rk) if rslora.get(adapter, False) else rk
            want = alpha_of_rank(rk) / denom
            if not math.isclose(scales[adapter], want, rel_tol=1e-6):
                raise ValueError(
                    f"LoRA layer {name!r} (adapter {adapter!r}, rank {rk}) has scaling "
                    f"{scales[adapter]:g}, off the rule {rule or 'of the config'} (expected "
                    f"{want:g}): an alpha_pattern key reaches it"
                )


def alpha_from_law(r: int, c: float = DEFAULT_C, exponent: float = 0.5) -> float:
    """``alpha = c * r**exponent`` (the square-root law at ``exponent=0.5``)."""
    _check_rank(r)
    if not (isinstance(c, int | float) and math.isfinite(c) and c > 0):
        raise ValueError(f"c must be a finite number > 0; got {c!r}")
    if not math.isfinite(exponent):
        raise ValueError(f"exponent must be finite; got {exponent!r}")
    return float(c) * float(r) ** float(exponent)


def _check_rank(r: Any) -> None:
    if isinstance(r, bool) or not isinstance(r, int) or r < 1:
        raise ValueError(f"r must be an int >= 1; got {r!r}")


@dataclass(frozen=True)
class LoraAlphaConfig:
    """LoRA with ``alpha = c * sqrt(r)`` (applied scale ``c / sqrt(r)``): rsLoRA with ``alpha = c``.

    Args:
        r: adapter rank (>= 1).
        c: coefficient of the square-root law (> 0); :data:`DEFAULT_C` by default.
        target_modules: module names or a regex, as in ``peft.LoraConfig`` (None: peft's defaults
            for known architectures).
        exponent: the rank exponent (0.5 is the law; other values for ablations).
        lora_kwargs: any other ``peft.LoraConfig`` field (``lora_dropout``, ``task_type``,
            ``modules_to_save``, ``target_parameters``, ``rank_pattern``, ...). Rejected: ``r``,
            ``lora_alpha``, ``use_rslora`` (set here), unknown names, and what would take a module
            off the law (see :func:`check_lora_kwargs`). A ``rank_pattern`` module of rank ``k``
            gets ``alpha = c * k**exponent`` through ``alpha_pattern``.
    """

    r: int = 8
    c: float = DEFAULT_C
    target_modules: Sequence[str] | str | None = None
    exponent: float = 0.5
    lora_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        alpha_from_law(self.r, self.c, self.exponent)
        if isinstance(self.target_modules, Sequence) and not isinstance(self.target_modules, str):
            if not self.target_modules:
                raise ValueError("target_modules must be None, a regex or a non-empty list")
            object.__setattr__(self, "target_modules", tuple(self.target_modules))
        check_lora_kwargs(self.lora_kwargs)
        self._peft_kwargs()  # an alpha_pattern off the law raises here, not at to_peft()

    def _peft_kwargs(self) -> dict[str, Any]:
        return law_patterns(
            self.lora_kwargs,
            self.r,
            lambda k: alpha_from_law(k, self.c, self.exponent),
            f"alpha = c * sqrt(r) with c = {self.c:g}",
        )

    @property
    def alpha(self) -> float:
        """The ``lora_alpha`` handed to peft: ``c * r**exponent``."""
        return alpha_from_law(self.r, self.c, self.exponent)

    @property
    def scaling(self) -> float:
        """The factor peft applies to ``B @ A``: ``alpha / r``."""
        return self.alpha / self.r

    def to_peft(self) -> Any:
        """The equivalent ``peft.LoraConfig`` (standard ``alpha / r`` scaling, no rsLoRA)."""
        from peft import LoraConfig

        targets = list(self.target_modules) if isinstance(self.target_modules, tuple) else None
        return LoraConfig(
            r=self.r,
            lora_alpha=self.alpha,
            target_modules=targets if targets is not None else self.target_modules,
            use_rslora=False,
            **{"lora_dropout": 0.0, **self._peft_kwargs()},
        )


def lora_alpha_config(
    r: int,
    target_modules: Sequence[str] | str | None = None,
    c: float = DEFAULT_C,
    **lora_kwargs: Any,
) -> Any:
    """A ``peft.LoraConfig`` whose ``lora_alpha`` follows ``alpha = c * sqrt(r)``.

    The same adapters as ``LoraConfig(r, lora_alpha=c, use_rslora=True)`` (rsLoRA with alpha = c),
    written in peft's standard ``alpha / r`` parametrisation.

    >>> cfg = lora_alpha_config(16, ["q_proj", "v_proj"], c=64)
    >>> cfg.lora_alpha, cfg.r
    (256.0, 16)
    """
    return LoraAlphaConfig(r, c, target_modules, lora_kwargs=lora_kwargs).to_peft()


def linear_module_names(model: nn.Module) -> list[str]:
    """Leaf names of the ``nn.Linear`` (and GPT-2 ``Conv1D``) modules peft can adapt."""
    names = set()
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) or type(module).__name__ == "Conv1D":
            names.add(name.rsplit(".", 1)[-1])
    return sorted(names)


def _check_targets(model: nn.Module, targets: Sequence[str] | str | None) -> None:
    if targets is None or isinstance(targets, str):
        return  # peft's defaults / a regex: peft checks these
    leaves = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    full = {name for name, _ in model.named_modules()}
    missing = [t for t in targets if t not in leaves and t not in full and t != "all-linear"]
    if missing:
        raise ValueError(
            f"target_modules {missing} not found in {type(model).__name__}; "
            f"its linear layers are {linear_module_names(model)}"
        )


def get_lora_alpha_model(
    model: nn.Module,
    config: LoraAlphaConfig | Any,
    alpha_of_rank: Callable[[int], float] | None = None,
) -> Any:
    """Wrap ``model`` with peft LoRA adapters from a :class:`LoraAlphaConfig` or a ``LoraConfig``.

    Returns a ``peft.PeftModel`` whose only trainable parameters are the adapters (and
    ``modules_to_save``). Unknown ``target_modules`` raise a ``ValueError`` that lists the linear
    layers the model has. Every LoRA layer is checked against the scaling rule at its own rank
    (:func:`check_scaling`): a :class:`LoraAlphaConfig`'s law, or ``alpha_of_rank`` when given.
    """
    from peft import LoraConfig, get_peft_model

    rule = ""
    if isinstance(config, LoraAlphaConfig):
        law = config
        alpha_of_rank = lambda k: alpha_from_law(k, law.c, law.exponent)  # noqa: E731
        rule = f"alpha = c * sqrt(r) with c = {law.c:g}"
        config = config.to_peft()
    if not isinstance(config, LoraConfig):
        raise TypeError(
            f"config must be a LoraAlphaConfig or peft.LoraConfig; got {type(config).__name__}"
        )
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    _check_rank(config.r)
    if not config.lora_alpha > 0:
        raise ValueError(f"lora_alpha must be > 0; got {config.lora_alpha}")
    targets = config.target_modules
    _check_targets(model, sorted(targets) if isinstance(targets, set) else targets)
    with warnings.catch_warnings():
        # peft asks transformers >= 5 a deprecated question on every wrap; nothing for users to do
        warnings.filterwarnings(
            "ignore", message=".*is_gradient_checkpointing", category=FutureWarning
        )
        wrapped = get_peft_model(model, config)
    if alpha_of_rank is not None:
        check_scaling(wrapped, alpha_of_rank, rule)
    return wrapped
