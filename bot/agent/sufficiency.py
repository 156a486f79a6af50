"""The fitted answer-or-refuse decision: one logistic model over the signals the grading rules measure.

`SufficiencyFeatures` is everything grading.py measures about a question and its best evidence, as numbers
(cosines, shares of the question's terms, answer-type cues, the near-miss flags). `scripts/fit_sufficiency.py`
fits a logistic model on labelled questions of three benchmarks (company dev, SQuAD 2.0, leave-one-out) and
writes its weights and decision threshold to `sufficiency_model.json`; at run time its score is a dot product, no
learning library. It does not decide yet: fitted on the three benchmarks it meets every guard rail but does not
beat the hand-set rules of grading.py in cross-validation over company dev (docs/benchmarks.md, session 8), so
each offline verdict records its score beside the rules' decision, for the next fit to be judged on. The file is
read once; a missing, unreadable or mismatched file is an error at start-up, never a permissive default.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path

MODEL_FILE = Path(__file__).with_name("sufficiency_model.json")
MODEL_FORMAT = 1


@dataclass(frozen=True)
class SufficiencyFeatures:
    """One question against its best evidence (the top chunks and their answer units), as the model reads it."""

    best_cosine: float  # the closest chunk's cosine
    best_chunk_coverage: float  # the share of the question's terms in that chunk
    top_coverage: float  # the most of them any of the best five chunks names
    uncovered_terms: float  # how many of the question's terms that chunk lacks (at most 5)
    unknown_terms: float  # the share of the question's terms the searched KBs never mention at all
    unit_cosine: float  # the closest answer unit (sentence, list item, table row)
    unit_coverage: float  # the most of the question's terms one unit names (with its heading)
    closest_unit_coverage: float  # ... and how many the closest unit names
    unit_support: float  # the best cosine × coverage of one unit: close and on the question's terms at once
    typed_asked: float  # the question asks for a kind of fact (a number, a duration, a date)
    typed_unit_cosine: float  # the closest unit of that kind that names any of the question's terms
    typed_unit_coverage: float  # the most of the question's terms a unit of that kind names
    required_kind: float  # only a fact of one kind answers it (how long / how often / what price …)
    missing_kind: float  # ... and no unit about the question supplies one
    near_miss: float  # the question names a thing (office, plan, tier) the best evidence never names
    names_apart: float  # its coded names are never named together in one unit
    identifiers_named: float  # it names identifiers ("401k", "unroutable_address") and one chunk names them all
    specific_terms: float  # how many names and numbers it carries (at most 3)
    question_terms: float  # log(1 + its content terms): a claim or an abstract is long, a question short
    is_question: float  # it reads as a question (not a claim or a description)
    units_known: float  # the answer units' vectors were saved at ingest
    cjk: float  # a Chinese question (judged by grade_cjk, not by the model)

    @classmethod
    @lru_cache(maxsize=1)  # read for every verdict, and its fields are the class's
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def as_dict(self) -> dict[str, float]:
        # (not dataclasses.asdict: its deep copy of each float was most of a verdict's scoring)
        return {name: round(float(getattr(self, name)), 4) for name in self.names()}


# The model's terms beyond the features themselves: a piecewise-linear basis for the cosines and coverages (a
# rise that is steeper above a knot, fitted rather than cut at one value), and the question-shaped signals
# apart from a claim or an abstract (is_question ×), whose cosines read differently.
_KNOTS = {"best_cosine": (0.3, 0.4, 0.5, 0.6), "unit_cosine": (0.3, 0.4, 0.5, 0.6)}
_KNOTS |= {"unit_coverage": (0.5, 0.75), "top_coverage": (0.5, 0.75)}
_BY_QUESTION = ("best_cosine", "unit_cosine", "unit_coverage", "top_coverage")


def basis_names() -> tuple[str, ...]:
    """The names of the model's terms, in order: the features, then the derived terms of `basis`."""
    hinges = [f"{name}>{knot}" for name, knots in _KNOTS.items() for knot in knots]
    return (*SufficiencyFeatures.names(), *hinges, *(f"is_question*{n}" for n in _BY_QUESTION), "terms*best_cosine")


def basis(values: dict[str, float]) -> list[float]:
    """The model's terms for one question's features (`SufficiencyFeatures.as_dict`, or a dump's copy)."""
    terms = [float(values[name]) for name in SufficiencyFeatures.names()]
    terms += [max(0.0, values[name] - knot) for name, knots in _KNOTS.items() for knot in knots]
    terms += [values["is_question"] * values[name] for name in _BY_QUESTION]
    return [*terms, values["question_terms"] * values["best_cosine"]]


class ModelFileError(RuntimeError):
    """The sufficiency model cannot be used: missing, unreadable, or fitted on other features."""


@dataclass(frozen=True)
class SufficiencyModel:
    features: tuple[str, ...]  # the terms of `basis`, by name
    means: tuple[float, ...]
    scales: tuple[float, ...]
    weights: tuple[float, ...]
    intercept: float
    threshold: float

    def score(self, features: SufficiencyFeatures) -> float:
        """The probability, as fitted, that the evidence answers the question."""
        z = self.intercept + sum(
            w * (value - m) / s
            for value, m, s, w in zip(basis(features.as_dict()), self.means, self.scales, self.weights, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-max(min(z, 60.0), -60.0)))

    def sufficient(self, features: SufficiencyFeatures) -> bool:
        return self.score(features) >= self.threshold


def read_model(path: Path = MODEL_FILE) -> SufficiencyModel:
    """The model in `path`, checked against the features this code computes."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != MODEL_FORMAT:
            raise ModelFileError(f"{path.name}: format {data.get('format')!r}, expected {MODEL_FORMAT}")
        model = SufficiencyModel(
            features=tuple(str(n) for n in data["features"]),
            means=tuple(float(v) for v in data["means"]),
            scales=tuple(float(v) for v in data["scales"]),
            weights=tuple(float(v) for v in data["weights"]),
            intercept=float(data["intercept"]),
            threshold=float(data["threshold"]),
        )
    except ModelFileError:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelFileError(f"the sufficiency model {path} cannot be read: {exc}") from None
    if model.features != basis_names():
        raise ModelFileError(f"{path.name} was fitted on other features than this code computes: refit it")
    if not (len(model.means) == len(model.scales) == len(model.weights) == len(model.features)):
        raise ModelFileError(f"{path.name}: weights, means and scales do not match its features")
    if any(s <= 0 for s in model.scales) or not 0.0 < model.threshold < 1.0:
        raise ModelFileError(f"{path.name}: a scale is not positive or the threshold is not a probability")
    return model


@lru_cache(maxsize=1)
def model() -> SufficiencyModel:
    """The package's model, read once."""
    return read_model()
