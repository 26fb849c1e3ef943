"""mtx's metrics against sacreBLEU on the repository's parity fixtures (tests/fixtures/eval*): the same scores,
string forms and signatures (the version field aside: mtx's own)."""
import json
import pathlib

import pytest

import mtx

ROOT = pathlib.Path(__file__).resolve().parents[2]
from conftest import need  # noqa: E402

sacrebleu = need("sacrebleu")
from sacrebleu.metrics import BLEU, CHRF, TER  # noqa: E402


def fixture_dirs():
    return [d for d in sorted((ROOT / "tests" / "fixtures").glob("eval*")) if (d / "expected.json").exists()]


def lines(path):
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def without_version(signature: str) -> str:
    return signature[: signature.rfind("|version:")]


MTX = {"bleu": mtx.corpus_bleu, "chrf": mtx.corpus_chrf, "ter": mtx.corpus_ter}
THEIRS = {"bleu": BLEU, "chrf": CHRF, "ter": TER}


def test_every_fixture_case_equals_sacrebleu():
    cases = 0
    for d in fixture_dirs():
        expected = json.loads((d / "expected.json").read_text(encoding="utf-8"))
        for c in expected["cases"]:
            hyps = c["hyp_lines"] if "hyp_lines" in c else lines(d / c["hyp"])
            refs = c["refs_lines"] if "refs_lines" in c else [lines(d / r) for r in c["refs"]]
            ours = MTX[c["metric"]](hyps, refs, **c["options"])
            # (the fixtures use sacreBLEU's functions' name, use_effective_order; mtx takes its classes', effective_order)
            options = {("effective_order" if k == "use_effective_order" else k): v for k, v in c["options"].items()}
            metric = THEIRS[c["metric"]](**options)
            theirs = metric.corpus_score(hyps, refs)
            what = f"{d.name}: {c}"
            assert str(ours) == str(theirs), what
            assert ours.score == pytest.approx(theirs.score, abs=1e-9), what
            assert without_version(ours.signature) == without_version(str(metric.get_signature())), what
            cases += 1
    assert cases >= 100


def test_sentence_bleu_equals_sacrebleu():
    d = ROOT / "tests" / "fixtures" / "eval"
    hyps, refs = lines(d / "sysA.en"), lines(d / "ref.en")
    for h, r in list(zip(hyps, refs))[:50]:
        ours = mtx.sentence_bleu(h, [r])
        theirs = sacrebleu.sentence_bleu(h, [r])
        assert str(ours) == str(theirs)
        assert ours.score == pytest.approx(theirs.score, abs=1e-9)


def test_argument_shapes_are_sacrebleus():
    hyps = ["a dog runs over the green grass", "two men play football in the park"]
    with pytest.raises(ValueError, match="reference sets"):
        mtx.corpus_bleu(hyps, "a dog runs")
    with pytest.raises(ValueError, match=r"\[refs\], not refs"):
        mtx.corpus_bleu(hyps, ["a dog runs", "two men"])
    with pytest.raises(ValueError, match="has 1 lines for 2 hypotheses"):
        mtx.corpus_bleu(hyps, [["a dog runs"]])
    with pytest.raises(ValueError, match="13a"):
        mtx.corpus_bleu(hyps, [hyps], tokenize="nonsense")
    assert float(mtx.corpus_bleu(hyps, [hyps])) == pytest.approx(100.0)
