"""Released SAE checkpoints from local paths: Gemma Scope ``params.npz`` and SAELens folders.

* Gemma Scope: ``<release>/layer_<i>/width_<w>/average_l0_<n>/params.npz`` with ``W_enc (d_model,
  d_sae)``, ``W_dec (d_sae, d_model)``, ``b_enc``, ``b_dec``, ``threshold`` (JumpReLU);
  widths are written ``16k`` (16 x 1024), ``1m`` (1024^2) or plainly.
* SAELens: a folder with ``cfg.json`` (``architecture`` ``jumprelu`` / ``topk`` / ``standard``,
  ``d_in``, ``d_sae``, ``k`` or ``activation_fn_kwargs.k`` for TopK; older configs write a TopK SAE
  as ``standard`` with ``activation_fn_str: topk``) and ``sae_weights.safetensors`` (the same tensor
  names; ``threshold`` for JumpReLU). ``standard`` (ReLU) loads as JumpReLU with a zero threshold.
  ``apply_b_dec_to_input`` is read from the config; when it is missing it defaults to SAELens's
  ``True`` for standard and TopK SAEs and to Gemma Scope's ``False`` for JumpReLU.

:func:`scan_release` lists every checkpoint under a root as :class:`Checkpoint` records;
:func:`load_sae` builds the module (:func:`save_sae` writes one as a SAELens folder). A missing key
or a wrong shape raises ``ValueError`` naming it. :func:`evaluate_release` measures FVU and L0 of
every checkpoint on a model's residual stream.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sae_geometry.sae import JumpReLUSAE, TopKSAE

__all__ = [
    "Checkpoint",
    "evaluate_release",
    "load_sae",
    "parse_width",
    "release_activations",
    "save_sae",
    "scan_release",
]

KEYS = ("W_enc", "W_dec", "b_enc", "b_dec")
_LAYOUT = re.compile(r"layer_(\d+)/width_([0-9]+[km]?)/average_l0_(\d+)$")


def parse_width(text: str) -> int:
    """``"16k"`` -> 16384, ``"1m"`` -> 1048576, ``"512"`` -> 512."""
    m = re.fullmatch(r"(\d+)([km]?)", text.strip().lower())
    if not m:
        raise ValueError(f"cannot read a width from {text!r}; expected e.g. '16k', '1m' or '512'")
    return int(m.group(1)) * {"": 1, "k": 1024, "m": 1024**2}[m.group(2)]


@dataclass(frozen=True)
class Checkpoint:
    """One released SAE: its layer, width, nominal L0 (from the folder name) and folder."""

    layer: int
    width: int
    l0: int
    path: Path


def scan_release(root: str | os.PathLike[str]) -> list[Checkpoint]:
    """Every ``layer_<i>/width_<w>/average_l0_<n>`` folder under ``root`` holding ``params.npz`` or
    ``cfg.json`` + ``sae_weights.safetensors``, sorted by (layer, width, L0)."""
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"release root {str(root)!r} is not a directory")
    found = []
    for d in root.rglob("average_l0_*"):
        m = _LAYOUT.search(d.relative_to(root).as_posix())
        has = (d / "params.npz").exists() or (d / "cfg.json").exists()
        if m and d.is_dir() and has:
            found.append(Checkpoint(int(m.group(1)), parse_width(m.group(2)), int(m.group(3)), d))
    if not found:
        raise ValueError(
            f"no checkpoints under {str(root)!r}: expected "
            "layer_<i>/width_<w>/average_l0_<n>/params.npz (Gemma Scope) or SAELens folders"
        )
    return sorted(found, key=lambda c: (c.layer, c.width, c.l0))


def _require(tensors: dict[str, Any], keys: tuple[str, ...], where: Path) -> None:
    missing = [k for k in keys if k not in tensors]
    if missing:
        raise ValueError(f"{where}: missing key(s) {missing}; found {sorted(tensors)}")


def _load_npz(path: Path) -> JumpReLUSAE:
    with np.load(path) as z:
        tensors = {k: z[k] for k in z.files}
    _require(tensors, (*KEYS, "threshold"), path)
    return _jumprelu(tensors, path)


def _jumprelu(t: dict[str, Any], where: Path, apply_b_dec_to_input: bool = False) -> JumpReLUSAE:
    try:
        return JumpReLUSAE(
            t["W_enc"], t["W_dec"], t["b_enc"], t["b_dec"], t["threshold"], apply_b_dec_to_input
        )
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


def _load_saelens(folder: Path) -> JumpReLUSAE | TopKSAE:
    from safetensors.numpy import load_file

    cfg_path, weights = folder / "cfg.json", folder / "sae_weights.safetensors"
    if not weights.exists():
        raise ValueError(f"{folder}: cfg.json without sae_weights.safetensors")
    cfg = json.loads(cfg_path.read_text())
    t = load_file(str(weights))
    _require(t, KEYS, weights)
    arch = str(cfg.get("architecture", "standard")).lower()
    norm = str(cfg.get("normalize_activations") or "none").lower()
    if norm != "none":
        warnings.warn(
            f"{folder}: cfg.json asks for normalize_activations={norm!r}, which this loader does "
            "not apply; the SAE sees raw activations (rescale them yourself if its FVU looks wrong)",
            stacklevel=3,
        )
    if arch == "standard" and str(cfg.get("activation_fn_str", "relu")).lower() == "topk":
        arch = "topk"  # older SAELens configs: a standard SAE with a TopK activation
    d_in, d_sae = np.shape(t["W_enc"]) if np.ndim(t["W_enc"]) == 2 else (None, None)
    for key, want in (("d_in", d_in), ("d_sae", d_sae)):
        if key in cfg and want is not None and int(cfg[key]) != want:
            raise ValueError(
                f"{folder}: cfg.json says {key}={cfg[key]} but W_enc is {d_in}x{d_sae}"
            )
    if arch == "jumprelu":
        _require(t, ("threshold",), weights)
        return _jumprelu(t, weights, bool(cfg.get("apply_b_dec_to_input", False)))
    if arch in ("standard", "relu"):
        zero = {"threshold": np.zeros(np.shape(t["b_enc"]))}
        return _jumprelu(t | zero, weights, bool(cfg.get("apply_b_dec_to_input", True)))
    if arch == "topk":
        k = cfg.get("k", (cfg.get("activation_fn_kwargs") or {}).get("k"))
        if k is None:
            raise ValueError(f"{folder}: a topk cfg.json needs 'k' (or activation_fn_kwargs.k)")
        expected = {
            "W_enc": (d_in, d_sae),
            "W_dec": (d_sae, d_in),
            "b_enc": (d_sae,),
            "b_dec": (d_in,),
        }
        for name, shape in expected.items():
            if d_in is None or tuple(np.shape(t[name])) != shape:
                raise ValueError(
                    f"{weights}: {name} has shape {np.shape(t[name])}; expected {shape}"
                )
        sae = TopKSAE(int(d_in), int(d_sae), int(k), apply_b_dec_to_input=bool(
            cfg.get("apply_b_dec_to_input", True)))  # fmt: skip
        with torch.no_grad():
            for name in KEYS:
                getattr(sae, name).copy_(torch.as_tensor(np.asarray(t[name]))[None])
        return sae
    raise ValueError(f"{folder}: unsupported architecture {arch!r} (jumprelu, topk or standard)")


def load_sae(path: str | os.PathLike[str] | Checkpoint) -> JumpReLUSAE | TopKSAE:
    """The SAE in ``path``: a ``params.npz`` file, a folder holding one, or a SAELens folder."""
    p = Path(path.path if isinstance(path, Checkpoint) else path)
    if p.is_file() and p.suffix == ".npz":
        return _load_npz(p)
    if p.is_dir() and (p / "params.npz").exists():
        return _load_npz(p / "params.npz")
    if p.is_dir() and (p / "cfg.json").exists():
        return _load_saelens(p)
    raise ValueError(
        f"{str(p)!r} is neither a params.npz file nor a folder with params.npz or "
        "cfg.json + sae_weights.safetensors"
    )


def save_sae(sae: JumpReLUSAE | TopKSAE, folder: str | os.PathLike[str], member: int = 0) -> Path:
    """Write ``sae`` as a SAELens folder (``cfg.json`` + ``sae_weights.safetensors``) that
    :func:`load_sae` reads back; for a stacked :class:`TopKSAE`, its member ``member``."""
    from safetensors.numpy import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(sae, TopKSAE):
        one = sae.member(member)
        tensors = {name: getattr(one, name)[0].detach().float().numpy() for name in KEYS}
        cfg = {"architecture": "topk", "k": int(one.k[0]),
               "apply_b_dec_to_input": one.apply_b_dec_to_input}  # fmt: skip
    elif isinstance(sae, JumpReLUSAE):
        tensors = {
            name: getattr(sae, name).detach().float().numpy() for name in (*KEYS, "threshold")
        }
        cfg = {"architecture": "jumprelu", "apply_b_dec_to_input": sae.apply_b_dec_to_input}
    else:
        raise ValueError(f"save_sae takes a TopKSAE or a JumpReLUSAE; got {type(sae).__name__}")
    d_in, d_sae = tensors["W_enc"].shape
    cfg |= {"d_in": int(d_in), "d_sae": int(d_sae)}
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()},
              str(folder / "sae_weights.safetensors"))  # fmt: skip
    (folder / "cfg.json").write_text(json.dumps(cfg, indent=1))
    return folder


def release_activations(
    model: Any,
    tok: Any,
    texts: list[str],
    root: str | os.PathLike[str],
    n_tokens: int = 50_000,
    layer_offset: int = 1,
) -> dict[int, np.ndarray]:
    """``{release layer: (n_tokens, d_model)}`` for every layer under ``root``, collected once.

    A release's ``layer_<i>`` is the output of block ``i`` (Gemma Scope's residual SAEs), which is
    ``paper_common.lm`` residual layer ``i + layer_offset``.
    """
    from sae_geometry.lms import layer_activations

    layers = sorted({c.layer for c in scan_release(root)})
    acts = layer_activations(model, tok, texts, [i + layer_offset for i in layers], n_tokens)
    return {i: acts[i + layer_offset] for i in layers}


def evaluate_release(
    model: Any,
    tok: Any,
    texts: list[str],
    root: str | os.PathLike[str],
    n_tokens: int = 50_000,
    layer_offset: int = 1,
    activations: dict[int, np.ndarray] | None = None,
) -> list[dict[str, Any]]:
    """FVU and measured L0 of every checkpoint under ``root`` on ``model``'s residual stream.

    Activations come from :func:`release_activations` (``layer_offset`` maps a release layer to a
    residual layer), or pass them as ``activations`` (``{release layer: (N, d_model)}``) to reuse
    them. Returns rows ``{layer, width, l0_nominal, l0, fvu}``.
    """
    checkpoints = scan_release(root)
    if activations is None:
        activations = release_activations(model, tok, texts, root, n_tokens, layer_offset)
    missing = sorted({c.layer for c in checkpoints} - set(activations))
    if missing:
        raise ValueError(f"activations lack release layer(s) {missing}")
    rows = []
    for c in checkpoints:
        sae = load_sae(c)
        x = torch.from_numpy(np.asarray(activations[c.layer], dtype=np.float32))
        if x.shape[1] != sae.d_in:
            raise ValueError(f"{c.path}: SAE d_in {sae.d_in} but the model's width is {x.shape[1]}")
        fvu, l0 = sae.evaluate(x)
        rows.append(
            {
                "layer": c.layer,
                "width": c.width,
                "l0_nominal": c.l0,
                "l0": float(np.ravel(l0)[0]),
                "fvu": float(np.ravel(fvu)[0]),
            }
        )
    return rows
