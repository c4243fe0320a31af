"""Graph concept bottleneck models (Niu et al., arXiv 2603.02025): a GNN predicts the scores of
discriminative graph concepts selected with the labels, and a sparse linear layer over them is the
soft logical rule; GCBM-E adds concept embeddings from a language model over graph sentences."""

from gcbm.concepts import (
    ConceptTransform,
    ConceptVocabulary,
    Occurrence,
    graph_labels,
    mutual_information,
    to_labelled_graph,
)
from gcbm.data import (
    ATOMS,
    GROUPS,
    MOTIFS,
    RULE,
    RULES,
    ba_2motifs,
    ba_motifs,
    from_networkx_labelled,
    load_tu,
    molecule_rules,
)
from gcbm.evaluate import Intervention, class_metrics, intervene, presence_logreg
from gcbm.explain import (
    fidelity,
    graph_contributions,
    linear_rules,
    posthoc_rules,
    prepare,
    rule_predictions,
    rules_of,
)
from gcbm.lm import ConceptLM, PretrainedConceptLM
from gcbm.logic import (
    LinearRule,
    Rule,
    TNormRuleLayer,
    extract_rules,
    linear_rules_from,
    predict_with_linear_rules,
    predict_with_rules,
)
from gcbm.model import GCBM, GCBMOutput, TrainConfig, fit, predict

__all__ = [
    "ATOMS",
    "GCBM",
    "GROUPS",
    "MOTIFS",
    "RULE",
    "RULES",
    "ConceptLM",
    "ConceptTransform",
    "ConceptVocabulary",
    "GCBMOutput",
    "Intervention",
    "LinearRule",
    "Occurrence",
    "PretrainedConceptLM",
    "Rule",
    "TNormRuleLayer",
    "TrainConfig",
    "ba_2motifs",
    "ba_motifs",
    "class_metrics",
    "extract_rules",
    "fidelity",
    "fit",
    "from_networkx_labelled",
    "graph_contributions",
    "graph_labels",
    "intervene",
    "linear_rules",
    "linear_rules_from",
    "load_tu",
    "molecule_rules",
    "mutual_information",
    "posthoc_rules",
    "predict",
    "predict_with_linear_rules",
    "predict_with_rules",
    "prepare",
    "presence_logreg",
    "rule_predictions",
    "rules_of",
    "to_labelled_graph",
]
