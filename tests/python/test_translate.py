"""mtx.Translator against the CLI on the same model and options: the same bytes, from any number of threads."""
import concurrent.futures
import pathlib

import pytest

import mtx
from conftest import run_cli


@pytest.mark.parametrize("beam", [1, 4])
def test_translations_equal_the_cli(model, cli, val_lines, tmp_path, beam):
    src = tmp_path / "src.de"
    src.write_text("\n".join(val_lines) + "\n", encoding="utf-8")
    expected = run_cli(cli, "translate", "--ckpt", model, "--beam", beam, "--threads", 1, "--input", src)
    t = mtx.Translator(model, threads=1)
    got = [r.text for r in t.translate(val_lines, beam=beam)]
    assert "".join(line + "\n" for line in got) == expected
    # translate_file writes mtx translate's bytes; translate_iter streams the same results.
    out = tmp_path / "out.en"
    figures = t.translate_file(src, out, beam=beam)
    assert out.read_text(encoding="utf-8") == expected
    assert figures["lines"] == len(val_lines)
    with open(src, encoding="utf-8") as f:
        assert [r.text for r in t.translate_iter(f, batch_lines=7, beam=beam)] == got


def test_an_ssru_student_translates_as_the_cli_from_any_thread(ssru_model, cli, val_lines, tmp_path):
    src = tmp_path / "src.de"
    src.write_text("\n".join(val_lines) + "\n", encoding="utf-8")
    t = mtx.Translator(ssru_model, threads=2)
    for beam in (1, 4):
        expected = run_cli(cli, "translate", "--ckpt", ssru_model, "--beam", beam, "--threads", 1, "--input", src)
        got = [r.text for r in t.translate(val_lines, beam=beam)]
        assert "".join(line + "\n" for line in got) == expected
    chunks = [val_lines[i::4] for i in range(4)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda c: [r.text for r in t.translate(c, beam=4)], chunks))
    for i, chunk in enumerate(together):
        assert chunk == got[i::4]
    forced = t.score(val_lines[:10], got[:10])  # teacher-forced through the SSRU's loop over time
    assert all(f.log_prob < 0 and len(f.token_log_probs) == len(f.tokens) for f in forced)


def test_nbest_and_scores_equal_the_cli(model, cli, val_lines, tmp_path):
    src = tmp_path / "src.de"
    src.write_text("\n".join(val_lines[:20]) + "\n", encoding="utf-8")
    expected = run_cli(cli, "translate", "--ckpt", model, "--beam", 4, "--nbest", 3, "--threads", 1, "--input", src)
    out = tmp_path / "nbest.en"
    t = mtx.Translator(model, threads=1)
    t.translate_file(src, out, beam=4, nbest=3)
    assert out.read_text(encoding="utf-8") == expected
    results = t.translate(val_lines[:20], beam=4, nbest=3)
    lines = [f"{i} ||| {h.text} ||| {h.score:.6f}" for i, r in enumerate(results) for h in r.nbest]
    assert [" ||| ".join(l.split(" ||| ")[:2]) for l in expected.splitlines()] == \
        [" ||| ".join(l.split(" ||| ")[:2]) for l in lines]
    assert all(len(r.nbest) == 3 for r in results)
    # Greedy with scores=True: mtx translate --scores's bytes (and NaN-free scores); without it, mtx translate's.
    expected = run_cli(cli, "translate", "--ckpt", model, "--beam", 1, "--scores", "--threads", 1, "--input", src)
    t.translate_file(src, out, beam=1, scores=True)
    assert out.read_text(encoding="utf-8") == expected
    scored = t.translate(val_lines[:20], beam=1, scores=True)
    assert all(r.score == r.score for r in scored)


def test_scores_equal_mtx_score(model, cli, val_lines, tmp_path):
    t = mtx.Translator(model, threads=1)
    hyps = [r.text for r in t.translate(val_lines[:30])]
    (tmp_path / "s").write_text("\n".join(val_lines[:30]) + "\n", encoding="utf-8")
    (tmp_path / "t").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    expected = run_cli(cli, "score", "--ckpt", model, "--threads", 1, "--src", tmp_path / "s", "--tgt", tmp_path / "t")
    got = t.score(val_lines[:30], hyps)
    assert "".join(f"{s.log_prob:.6f}\n" for s in got) == expected
    assert all(s.tokens and len(s.tokens) == len(s.token_log_probs) for s in got)
    assert all(abs(sum(s.token_log_probs) - s.log_prob) < 1e-6 for s in got)


def test_pieces_translate_as_their_text(model, val_lines):
    t = mtx.Translator(model, threads=1)
    pieces = t.tokenize(val_lines[:10])
    assert all(isinstance(p, list) and p for p in pieces)
    assert [r.text for r in t.translate(pieces)] == [r.text for r in t.translate(val_lines[:10])]
    assert [s.log_prob for s in t.score(pieces, val_lines[:10])] == \
        [s.log_prob for s in t.score(val_lines[:10], val_lines[:10])]
    # A source longer than the model takes is cut, and says so, whether given as text or as pieces.
    long_text = " ".join([val_lines[0]] * 200)
    assert t.translate([long_text], beam=1)[0].truncated
    assert t.translate(t.tokenize([long_text]), beam=1)[0].truncated
    assert not t.translate(pieces[:1], beam=1)[0].truncated


def test_eight_threads_give_the_same_translations_as_one(model, val_lines):
    t = mtx.Translator(model, threads=2)
    alone = [r.text for r in t.translate(val_lines, beam=3)]
    chunks = [val_lines[i::8] for i in range(8)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda c: [r.text for r in t.translate(c, beam=3)], chunks))
    for i, chunk in enumerate(together):
        assert chunk == alone[i::8]
    # Different options at once (each its own search settings), and scoring beside translating.
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        a = pool.submit(lambda: [r.text for r in t.translate(val_lines, beam=1)])
        b = pool.submit(lambda: [r.text for r in t.translate(val_lines, beam=3)])
        c = pool.submit(lambda: t.score(val_lines, val_lines))
        assert b.result() == alone
        assert len(a.result()) == len(val_lines) and len(c.result()) == len(val_lines)


def test_sampling_and_prefix_and_alignment(model, val_lines):
    t = mtx.Translator(model, threads=1)
    s1 = [r.text for r in t.translate(val_lines[:10], beam=1, sampling_topk=10, sampling_seed=7)]
    s2 = [r.text for r in t.translate(val_lines[:10], beam=1, sampling_topk=10, sampling_seed=7)]
    assert s1 == s2
    prefixed = t.translate(val_lines[:3], target_prefix=["A dog", None, ""])
    assert prefixed[0].text.startswith("A dog")
    aligned = t.translate(val_lines[:3], alignment=True)
    assert all(r.alignment is not None for r in aligned)


def test_suppressed_words_are_never_written(model, val_lines):
    # suppress= (decode.suppress): each translation's own words, suppressed, are gone from its new translation.
    t = mtx.Translator(model, threads=1)
    plain = [r.text for r in t.translate(val_lines[:8])]
    words = sorted({w for line in plain for w in line.split() if w.isalpha()})
    assert words, plain
    again = [r.text for r in t.translate(val_lines[:8], suppress=words)]
    for line in again:
        assert not set(line.split()) & set(words), (line, words)
    with pytest.raises(ValueError, match="suppress: expected a list of strings"):
        t.translate(val_lines[:1], suppress="dog")
