"""Graph concept bottleneck models and the black-box GNNs they are compared with.

``GCBM`` (the paper's graph concept bottleneck layer on a GNN): GIN encoder -> graph embedding
``h`` -> concept scores ``a = sigmoid(score(h))`` (the bottleneck, supervised by the presence of
the selected concepts) -> a **sparse linear layer** ``logits = W a + b`` (the soft logical rule:
``W[k, c]`` is concept ``c``'s contribution to class ``k``; an L1 penalty on ``W`` keeps it
sparse). With concept embeddings ``E (C, dim)`` (GCBM-E: from a language model over graph
sentences, per graph in ``batch.concept_emb``), the score of concept ``c`` is
``<W_q h, E_c> / sqrt(dim) + b_c``; without, a linear map of ``h``.

``head="tnorm"`` is an ablation of ours: product-t-norm conjunctions joined by a noisy OR
(:class:`~gcbm.logic.TNormRuleLayer`) in place of the linear layer. ``bottleneck=False`` is the
black-box GNN (``encoder="gin"`` or ``"gcn"``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch_geometric.data import Batch, Data
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GCNConv, GINConv, global_add_pool
from tqdm.auto import tqdm

from gcbm.logic import TNormRuleLayer

__all__ = ["GCBM", "GCBMOutput", "TrainConfig", "fit", "predict"]


@dataclass
class GCBMOutput:
    logits: torch.Tensor  # (batch, n_classes)
    concepts: torch.Tensor | None  # (batch, n_concepts) activations in [0, 1], or None


class GCBM(nn.Module):
    """See the module docstring.

    Args:
        in_channels: node feature size; n_concepts: bottleneck width; n_classes: outputs.
        hidden, layers: encoder width and depth. encoder: ``"gin"`` or ``"gcn"``.
        head: ``"linear"`` (the paper's sparse linear layer) or ``"tnorm"`` (the t-norm ablation).
        concept_dim: size of the concept embeddings the batch carries (``None``: none).
        bottleneck: ``False`` for a black-box GNN (linear classifier on ``h``).
    """

    def __init__(
        self,
        in_channels: int,
        n_concepts: int,
        n_classes: int,
        hidden: int = 64,
        layers: int = 3,
        encoder: str = "gin",
        head: str = "linear",
        concept_dim: int | None = None,
        rules_per_class: int = 3,
        bottleneck: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if encoder not in ("gin", "gcn") or head not in ("linear", "tnorm"):
            raise ValueError(
                f"encoder must be 'gin' or 'gcn' and head 'linear' or 'tnorm'; got {encoder!r}, {head!r}"
            )
        with torch.random.fork_rng(devices=[]):  # the caller's global RNG is left as it was
            torch.manual_seed(seed)
            self._build(in_channels, n_concepts, n_classes, hidden, layers, encoder, head,
                        concept_dim, rules_per_class, bottleneck, seed)  # fmt: skip

    def _build(
        self,
        in_channels: int,
        n_concepts: int,
        n_classes: int,
        hidden: int,
        layers: int,
        encoder: str,
        head: str,
        concept_dim: int | None,
        rules_per_class: int,
        bottleneck: bool,
        seed: int,
    ) -> None:
        self.config = {
            "in_channels": in_channels, "n_concepts": n_concepts, "n_classes": n_classes, "hidden": hidden,
            "layers": layers, "encoder": encoder, "head": head, "concept_dim": concept_dim,
            "rules_per_class": rules_per_class, "bottleneck": bottleneck, "seed": seed,
        }  # fmt: skip
        self.convs = nn.ModuleList()
        for i in range(layers):
            d_in = in_channels if i == 0 else hidden
            if encoder == "gin":
                mlp = nn.Sequential(
                    nn.Linear(d_in, hidden),
                    nn.BatchNorm1d(hidden),
                    nn.ReLU(),
                    nn.Linear(hidden, hidden),
                )
                self.convs.append(GINConv(mlp, train_eps=True))
            else:
                self.convs.append(GCNConv(d_in, hidden))
        self.bottleneck, self.head_kind, self.concept_dim = bottleneck, head, concept_dim
        if not bottleneck:
            self.classifier = nn.Sequential(
                nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, n_classes)
            )
            return
        if concept_dim is None:
            self.concept_head = nn.Linear(hidden, n_concepts)
        else:
            self.query = nn.Linear(hidden, concept_dim)
            self.concept_bias = nn.Parameter(torch.zeros(n_concepts))
        self.head = (
            TNormRuleLayer(n_concepts, n_classes, rules_per_class, seed)
            if head == "tnorm"
            else nn.Linear(n_concepts, n_classes)
        )

    def embed(self, batch: Data | Batch) -> torch.Tensor:
        """``(n_graphs, hidden)`` graph embeddings (sum pooling of node states)."""
        if getattr(batch, "x", None) is None:
            raise ValueError(
                "graphs need node features x (e.g. one-hot atom types or a constant column)"
            )
        if batch.num_nodes == 0:
            raise ValueError("empty graph: no nodes")
        h = batch.x.float()
        for conv in self.convs:
            h = torch.relu(conv(h, batch.edge_index))
        index = (
            batch.batch
            if getattr(batch, "batch", None) is not None
            else torch.zeros(len(h), dtype=torch.long)
        )
        return global_add_pool(h, index)

    def concept_scores(self, h: torch.Tensor, batch: Data | Batch) -> torch.Tensor:
        if self.concept_dim is None:
            return self.concept_head(h)
        E = getattr(batch, "concept_emb", None)
        if E is None:
            raise ValueError(
                "this model uses concept embeddings: annotate graphs with concept_emb (see gcbm.prepare)"
            )
        E = E.view(h.shape[0], -1, self.concept_dim)
        return (self.query(h)[:, None, :] * E).sum(-1) / self.concept_dim**0.5 + self.concept_bias

    def forward(self, batch: Data | Batch) -> GCBMOutput:
        h = self.embed(batch)
        if not self.bottleneck:
            return GCBMOutput(self.classifier(h), None)
        a = torch.sigmoid(self.concept_scores(h, batch))
        return GCBMOutput(self.class_logits(a), a)

    def class_logits(self, a: torch.Tensor) -> torch.Tensor:
        """Class logits from concept scores ``a (batch, C)``: ``W a + b`` (or the t-norm rules)."""
        if not self.bottleneck:
            raise ValueError("a black-box GNN has no concept layer")
        return self.head.logits(a) if self.head_kind == "tnorm" else self.head(a)

    def sparsity(self) -> torch.Tensor:
        """The head's sparsity penalty: ``sum |W|`` of the linear layer (L1), or the t-norm
        layer's mean relevance."""
        if self.head_kind == "tnorm":
            return self.head.sparsity()
        return self.head.weight.abs().sum()

    def save(self, path: str | os.PathLike[str]) -> None:
        torch.save({"config": self.config, "state": self.state_dict()}, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> GCBM:
        blob = torch.load(path, weights_only=True)
        model = cls(**blob["config"])
        model.load_state_dict(blob["state"])
        return model.eval()


@dataclass
class TrainConfig:
    epochs: int = 60
    batch_size: int = 32
    lr: float = 3e-3
    concept_weight: float = 5.0  # weight of the concept-presence loss (ours)
    sparsity: float = 0.05  # weight of the head's L1 penalty (see GCBM.sparsity; ours)
    head_lr: float = 3e-2  # the t-norm ablation's rule parameters learn faster than the encoder
    seed: int = 0
    history: list[float] = field(default_factory=list, repr=False)


def fit(
    model: GCBM, graphs: Sequence[Data], config: TrainConfig | None = None, progress: bool = False
) -> GCBM:
    """Train on labelled graphs (``y``; ``concepts`` presence for bottleneck models). Returns the model."""
    cfg = config or TrainConfig()
    if len(graphs) == 0:
        raise ValueError("need at least one training graph")
    if model.bottleneck and getattr(graphs[0], "concepts", None) is None:
        raise ValueError(
            "bottleneck models need concept presence: annotate graphs with ConceptVocabulary.annotate"
        )
    with torch.random.fork_rng(devices=[]):  # the caller's global RNG is left as it was
        torch.manual_seed(cfg.seed)
        return _fit(model, graphs, cfg, progress)


def _fit(model: GCBM, graphs: Sequence[Data], cfg: TrainConfig, progress: bool) -> GCBM:
    loader = DataLoader(
        list(graphs),
        batch_size=cfg.batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(cfg.seed),
    )
    head = list(model.head.parameters()) if model.bottleneck and model.head_kind == "tnorm" else []
    ids = {id(p) for p in head}
    rest = [p for p in model.parameters() if id(p) not in ids]
    opt = torch.optim.Adam([{"params": rest, "lr": cfg.lr}, {"params": head, "lr": cfg.head_lr}])
    model.train()
    for _ in tqdm(range(cfg.epochs), desc="train", disable=not progress, leave=False):
        total = 0.0
        for batch in loader:
            out = model(batch)
            loss = nn.functional.cross_entropy(out.logits, batch.y.view(-1))
            if out.concepts is not None:
                loss = loss + cfg.concept_weight * nn.functional.binary_cross_entropy(
                    out.concepts, batch.concepts
                )
                loss = loss + cfg.sparsity * model.sparsity()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * batch.num_graphs
        cfg.history.append(total / len(graphs))
    return model.eval()


@torch.no_grad()
def predict(
    model: GCBM, graphs: Sequence[Data], batch_size: int = 256
) -> tuple[np.ndarray, np.ndarray | None]:
    """Predicted classes ``(n,)`` and concept activations ``(n, C)`` (``None`` for black boxes)."""
    model.eval()
    preds, concepts = [], []
    for batch in DataLoader(list(graphs), batch_size=batch_size):
        out = model(batch)
        preds.append(out.logits.argmax(1).numpy())
        if out.concepts is not None:
            concepts.append(out.concepts.numpy())
    return np.concatenate(preds), (np.concatenate(concepts) if concepts else None)
