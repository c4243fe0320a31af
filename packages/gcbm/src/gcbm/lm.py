"""A small transformer trained on graph sentences by masked concept modelling.

Concepts are the words, a graph's breadth-first concept sequence its sentence (see
:mod:`gcbm.concepts`). After training, :meth:`ConceptLM.embed` gives every graph a context-aware
embedding per concept: the mean contextual vector over that concept's positions in the graph's
sentence (its static token embedding where the concept is absent). This tiny in-process
transformer, with the vocabulary as its tokenizer, is GCBM-E's default language model (no download).

:class:`PretrainedConceptLM` is the same interface over any Hugging Face ``transformers`` encoder
(``PretrainedConceptLM.from_pretrained(name_or_path, concepts)``): a graph sentence is the text of
its concept names, a concept's embedding the mean last hidden state over its sub-word tokens, used
frozen.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

__all__ = ["ConceptLM", "PretrainedConceptLM"]


class ConceptLM(nn.Module):
    """BERT-style encoder over concept ids ``0..n_concepts-1`` (plus PAD and MASK).

    ``seed`` fixes the initial weights (drawn in a forked torch RNG, so the global state is left
    as it was): without it they came from torch's process-random initial seed.
    """

    def __init__(
        self,
        n_concepts: int,
        dim: int = 32,
        layers: int = 2,
        heads: int = 4,
        max_len: int = 128,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if n_concepts < 1 or dim % heads:
            raise ValueError(
                f"need n_concepts >= 1 and dim divisible by heads; got {n_concepts}, {dim}, {heads}"
            )
        self.n_concepts, self.dim, self.max_len = n_concepts, dim, max_len
        self.pad, self.mask = n_concepts, n_concepts + 1
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.tokens = nn.Embedding(n_concepts + 2, dim, padding_idx=self.pad)
            self.positions = nn.Embedding(max_len, dim)
            layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.out = nn.Linear(dim, n_concepts)

    def _pad(self, sentences: Sequence[Sequence[int]]) -> torch.Tensor:
        L = max(1, min(self.max_len, max((len(s) for s in sentences), default=1)))
        ids = torch.full((len(sentences), L), self.pad, dtype=torch.long)
        for i, s in enumerate(sentences):
            s = list(s)[:L]
            if s and (min(s) < 0 or max(s) >= self.n_concepts):
                raise ValueError(f"sentence {i} has concept ids outside [0, {self.n_concepts})")
            ids[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
        return ids

    def hidden(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1])[None]
        pad = ids == self.pad
        pad[:, 0] &= ~pad.all(
            dim=1
        )  # an empty sentence attends to its first (PAD) slot, not to nothing
        return self.encoder(self.tokens(ids) + self.positions(pos), src_key_padding_mask=pad)

    def fit(
        self,
        sentences: Sequence[Sequence[int]],
        epochs: int = 20,
        batch_size: int = 64,
        lr: float = 2e-3,
        mask_prob: float = 0.15,
        seed: int = 0,
        progress: bool = False,
    ) -> list[float]:
        """Masked concept modelling; returns the mean loss per epoch."""
        if not sentences:
            raise ValueError("need at least one sentence")
        with torch.random.fork_rng(devices=[]):  # the caller's global RNG is left as it was
            torch.manual_seed(seed)
            return self._fit(sentences, epochs, batch_size, lr, mask_prob, seed, progress)

    def _fit(
        self,
        sentences: Sequence[Sequence[int]],
        epochs: int,
        batch_size: int,
        lr: float,
        mask_prob: float,
        seed: int,
        progress: bool,
    ) -> list[float]:
        gen = torch.Generator().manual_seed(seed)
        ids_all = self._pad(sentences)
        opt = torch.optim.Adam(self.parameters(), lr=lr)
        history = []
        self.train()
        for _ in tqdm(range(epochs), desc="concept LM", disable=not progress, leave=False):
            perm = torch.randperm(len(ids_all), generator=gen)
            losses = []
            for start in range(0, len(perm), batch_size):
                ids = ids_all[perm[start : start + batch_size]]
                real = ids != self.pad
                masked = (torch.rand(ids.shape, generator=gen) < mask_prob) & real
                if not masked.any():  # small batches: mask one real token so every step learns
                    if not real.any():
                        continue
                    flat = torch.nonzero(real.view(-1)).view(-1)
                    masked.view(-1)[flat[torch.randint(len(flat), (1,), generator=gen)]] = True
                inp = ids.masked_fill(masked, self.mask)
                logits = self.out(self.hidden(inp))
                loss = nn.functional.cross_entropy(logits[masked], ids[masked])
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
            history.append(float(np.mean(losses)) if losses else float("nan"))
        self.eval()
        return history

    @torch.no_grad()
    def embed(self, sentences: Sequence[Sequence[int]]) -> torch.Tensor:
        """``(n_graphs, n_concepts, dim)`` context-aware concept embeddings (see the module)."""
        ids = self._pad(sentences)
        h = self.hidden(ids)
        real = (ids != self.pad).float()
        onehot = (
            nn.functional.one_hot(ids.clamp_max(self.n_concepts - 1), self.n_concepts).float()
            * real[..., None]
        )
        count = onehot.sum(1)  # (n, C)
        ctx = torch.einsum("nlc,nld->ncd", onehot, h) / count.clamp_min(1)[..., None]
        static = self.tokens.weight[: self.n_concepts][None].expand_as(ctx)
        return torch.where(count[..., None] > 0, ctx, static)


class PretrainedConceptLM:
    """Concept embeddings from a ``transformers`` encoder (frozen): see the module.

    Args:
        model: a ``transformers`` model whose output has ``last_hidden_state``.
        tokenizer: its fast tokenizer (``word_ids`` are needed to pool sub-word tokens).
        concepts: the vocabulary's concept names (the "graph words"), in column order.
        max_len: longest tokenised sentence (longer ones are truncated).
    """

    def __init__(
        self, model: nn.Module, tokenizer: object, concepts: Sequence[str], max_len: int = 512
    ) -> None:
        if not concepts:
            raise ValueError("need at least one concept name")
        if not getattr(tokenizer, "is_fast", False):
            raise ValueError("need a fast tokenizer (word_ids) to pool sub-word tokens per concept")
        self.model, self.tokenizer = model.eval(), tokenizer
        self.concepts, self.max_len = list(concepts), max_len
        self.n_concepts = len(self.concepts)
        self.dim = int(model.config.hidden_size)
        self._static: torch.Tensor | None = None

    @classmethod
    def from_pretrained(
        cls, name_or_path: str, concepts: Sequence[str], **kw: object
    ) -> PretrainedConceptLM:
        """Load ``AutoModel`` and ``AutoTokenizer`` from a hub name or a local directory."""
        from transformers import AutoModel, AutoTokenizer

        return cls(
            AutoModel.from_pretrained(name_or_path),
            AutoTokenizer.from_pretrained(name_or_path),
            concepts,
            **kw,
        )

    @torch.no_grad()
    def _pool(self, sentences: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Per sentence, the summed hidden state per concept ``(n, C, dim)`` and counts ``(n, C)``."""
        total = torch.zeros(len(sentences), self.n_concepts, self.dim)
        count = torch.zeros(len(sentences), self.n_concepts)
        for i, s in enumerate(sentences):
            s = list(s)
            if not s:
                continue
            if min(s) < 0 or max(s) >= self.n_concepts:
                raise ValueError(f"sentence {i} has concept ids outside [0, {self.n_concepts})")
            enc = self.tokenizer(
                [self.concepts[c] for c in s], is_split_into_words=True, truncation=True,
                max_length=self.max_len, return_tensors="pt",
            )  # fmt: skip
            h = self.model(**enc).last_hidden_state[0]
            for t, w in enumerate(enc.word_ids(0)):
                if w is not None:
                    total[i, s[w]] += h[t]
                    count[i, s[w]] += 1
        return total, count

    def embed(self, sentences: Sequence[Sequence[int]]) -> torch.Tensor:
        """``(n_graphs, n_concepts, dim)``: mean contextual vector of each concept's tokens in the
        graph's sentence; where absent, the concept's vector when it is the whole sentence."""
        if self._static is None:
            tot, cnt = self._pool([[c] for c in range(self.n_concepts)])
            self._static = tot.diagonal(dim1=0, dim2=1).T / cnt.diagonal().clamp_min(1)[:, None]
        tot, cnt = self._pool(sentences)
        ctx = tot / cnt.clamp_min(1)[..., None]
        return torch.where(cnt[..., None] > 0, ctx, self._static[None].expand_as(ctx))
