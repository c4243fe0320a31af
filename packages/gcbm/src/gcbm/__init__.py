"""Graph concept bottleneck models: a GNN's prediction forced through soft logical rules over mined
graph concepts, with context-aware concept embeddings from a language model over graph sentences."""

from gcbm.concepts import ConceptVocabulary, Occurrence, graph_labels, to_labelled_graph
from gcbm.data import (
    ATOMS,
    GROUPS,
    MOTIFS,
    RULE,
    ba_2motifs,
    ba_motifs,
    from_networkx_labelled,
    load_tu,
    molecule_rules,
)
from gcbm.explain import fidelity, graph_contributions, posthoc_rules, prepare, rules_of
from gcbm.lm import ConceptLM
from gcbm.logic import Rule, SoftLogicLayer, extract_rules, predict_with_rules
from gcbm.model import GCBM, GCBMOutput, TrainConfig, fit, predict

__all__ = [
    "ATOMS",
    "GCBM",
    "GROUPS",
    "MOTIFS",
    "RULE",
    "ConceptLM",
    "ConceptVocabulary",
    "GCBMOutput",
    "Occurrence",
    "Rule",
    "SoftLogicLayer",
    "TrainConfig",
    "ba_2motifs",
    "ba_motifs",
    "extract_rules",
    "fidelity",
    "fit",
    "from_networkx_labelled",
    "graph_contributions",
    "graph_labels",
    "load_tu",
    "molecule_rules",
    "posthoc_rules",
    "predict",
    "predict_with_rules",
    "prepare",
    "rules_of",
    "to_labelled_graph",
]
