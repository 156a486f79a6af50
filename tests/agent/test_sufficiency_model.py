"""The fitted answer-or-refuse model (bot/agent/sufficiency.py, issue #13 Build 2).

- The package's model file loads and names exactly the features grading computes; a missing, unreadable or
  mismatched file is an error, never a permissive default.
- On a small real KB (real engine parts): a question one sentence answers is answered, an unrelated one is
  refused, the model's score agrees with both, and every round's trace carries the features and the score.
- scripts/fit_sufficiency.py fits and writes a loadable model from a tiny fixture of the three dumps.
"""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

from bot.agent import sufficiency
from bot.agent.engine import AnswerEngine
from bot.config import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "sufficiency"

CARE_GUIDE = """# Road bike care

## Tyres

Road bike tyres are usually run between 80 and 100 psi, and wider tyres take less. Use a track pump with a
gauge, because small frame pumps rarely reach 60 psi. Check pressure before every ride. Replace a tyre when the
tread flattens or the casing shows through, and always carry a spare tube and two levers.

## Chain

Clean the chain with a degreaser and a brush, rinse it, let it dry, and apply one drop of lube per roller.
"""


def test_the_package_model_names_exactly_the_terms_grading_computes():
    model = sufficiency.read_model()

    assert model.features == sufficiency.basis_names()
    assert model.features[: len(sufficiency.SufficiencyFeatures.names())] == sufficiency.SufficiencyFeatures.names()
    assert len(model.weights) == len(model.features) == len(model.means) == len(model.scales)
    assert 0.0 < model.threshold < 1.0
    data = json.loads(sufficiency.MODEL_FILE.read_text(encoding="utf-8"))
    assert "fit_sufficiency.py" in data["command"]
    assert set(data["data"]) >= {"company", "squad", "routing"}


@pytest.mark.parametrize(
    "broken",
    [
        None,  # missing
        "not json {",
        json.dumps(
            {
                "format": 1,
                "features": ["best_cosine"],
                "means": [0],
                "scales": [1],
                "weights": [1],
                "intercept": 0,
                "threshold": 0.5,
            }
        ),
    ],
    ids=["missing", "unreadable", "other-features"],
)
def test_a_missing_or_mismatched_model_file_is_an_error(tmp_path: Path, broken: str | None):
    path = tmp_path / "sufficiency_model.json"
    if broken is not None:
        path.write_text(broken, encoding="utf-8")

    with pytest.raises(sufficiency.ModelFileError):
        sufficiency.read_model(path)


def test_the_score_rises_with_the_evidence():
    model = sufficiency.read_model()
    names = sufficiency.SufficiencyFeatures.names()
    weak = dict.fromkeys(names, 0.0) | {"best_cosine": 0.2, "unit_cosine": 0.2, "question_terms": 1.6}
    weak |= {"is_question": 1.0, "units_known": 1.0}
    strong = weak | {"best_cosine": 0.7, "unit_cosine": 0.75, "unit_coverage": 1.0, "top_coverage": 1.0}
    strong |= {"best_chunk_coverage": 1.0, "closest_unit_coverage": 1.0, "unit_support": 0.75}

    assert not model.sufficient(sufficiency.SufficiencyFeatures(**weak))
    assert model.sufficient(sufficiency.SufficiencyFeatures(**strong))


@pytest.fixture
def care_engine(sample_service):
    sample_service.create_kb("cycling", "Looking after a road bike: tyres, chain, brakes.")
    sample_service.ingest_bytes("cycling", "road-bike-care.md", CARE_GUIDE.encode())
    return AnswerEngine(sample_service)


def test_a_documented_sentence_answers_and_an_unrelated_question_is_refused(care_engine):
    answered = care_engine.answer("how often should I check my tyre pressure?", kb="cycling")
    refused = care_engine.answer("what temperature should I bake sourdough bread at?", kb="cycling")

    assert answered.status == "answered", answered.answer
    assert "before every ride" in answered.answer
    assert refused.status == "insufficient_context", refused.answer
    for answer in (answered, refused):
        assert set(answer.rounds[0].features) == set(sufficiency.SufficiencyFeatures.names())
    assert answered.rounds[0].features["unit_coverage"] > refused.rounds[0].features["unit_coverage"]
    threshold = sufficiency.model().threshold
    assert answered.rounds[-1].sufficiency >= threshold
    assert all(r.sufficiency < threshold for r in refused.rounds)


def test_the_fit_script_writes_a_model_the_engine_reads(tmp_path: Path):
    out = tmp_path / "model.json"
    script = runpy.run_path(str(REPO_ROOT / "scripts" / "fit_sufficiency.py"), run_name="fit_sufficiency")

    status = script["main"](
        [
            *("--company", str(FIXTURES / "company.jsonl")),
            *("--squad", str(FIXTURES / "abstention-cases.jsonl")),
            *("--routing", str(FIXTURES / "routing-cases.jsonl")),
            *("--out", str(out), "--folds", "2", "--c", "1.0"),
        ]
    )

    assert status == 0
    model = sufficiency.read_model(out)
    assert model.features == sufficiency.basis_names()
    # fitted, not a copy: the closest unit's cosine counts for answering
    assert model.weights[model.features.index("unit_cosine")] > 0
