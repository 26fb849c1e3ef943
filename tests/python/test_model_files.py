"""The model-file commands from Python: quantize, average, export to CTranslate2, import."""
import pathlib
import subprocess
import sys

import pytest

import mtx
from conftest import ROOT, need


def test_quantize_and_average(model, val_lines, tmp_path):
    int8 = tmp_path / "int8.pt"
    mtx.quantize(model, int8)
    assert mtx.load_info(int8)["int8"] is True  # (a path object, as every path argument takes)
    t = mtx.Translator(int8, threads=1)
    assert t.int8 and not mtx.Translator(model, threads=1).int8
    assert len(t.translate(val_lines[:5])) == 5
    steps = sorted(model.parent.glob("step-*.pt"))
    assert len(steps) >= 2, steps
    averaged = tmp_path / "avg.pt"
    mtx.average(steps, averaged)
    assert mtx.load_info(str(averaged))["params"] == mtx.load_info(str(model))["params"]
    with pytest.raises(FileNotFoundError):
        mtx.quantize(tmp_path / "missing.pt", tmp_path / "x.pt")


def test_export_ct2_gives_a_model_ctranslate2_runs(model, val_lines, tmp_path):
    # (the exported model's numbers against mtx's: Export.Ct2ScoresTargetsAsMtxDoes, in C++)
    ctranslate2 = need("ctranslate2")
    out = tmp_path / "ct2"
    mtx.export_ct2(model, out)  # (this interpreter by default, which has ctranslate2)
    assert (out / "model.bin").exists()
    pieces = mtx.Translator(model, threads=1).tokenize(val_lines[:10])
    ct2 = ctranslate2.Translator(str(out), device="cpu", intra_threads=1)
    results = ct2.translate_batch(pieces, beam_size=1, max_decoding_length=20)
    assert len(results) == 10 and all(r.hypotheses[0] for r in results)
    with pytest.raises(ValueError, match="--force replaces it"):
        mtx.export_ct2(model, out, python=sys.executable)  # an existing directory, without force=True


def test_import_model_of_a_marianmt_directory(tmp_path, data_dir):
    need("transformers")
    run = subprocess.run([sys.executable, str(ROOT / "tests" / "oracles" / "hf_marian.py"), "--data", str(data_dir),
                          "--out", str(tmp_path), "--steps", "20"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    notes = mtx.import_model(tmp_path / "hf", tmp_path / "model.pt")
    assert isinstance(notes, list)
    t = mtx.Translator(tmp_path / "model.pt", threads=1)
    assert t.translate(["Ein Hund läuft."])[0].text is not None
    with pytest.raises(FileNotFoundError):
        mtx.import_model(tmp_path / "nowhere", tmp_path / "x.pt")
