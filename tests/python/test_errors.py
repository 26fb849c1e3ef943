"""Bad inputs raise the documented exceptions with the CLI's one-line messages, never crash the interpreter."""
import pytest

import mtx


def one_line(e) -> str:
    text = str(e.value)
    assert "\n" not in text, text
    return text


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        mtx.Translator(tmp_path / "nowhere.pt")
    assert "nowhere.pt" in one_line(e)
    with pytest.raises(FileNotFoundError):
        mtx.load_info(str(tmp_path / "nowhere.pt"))


def test_damaged_checkpoint(tmp_path, model):
    bad = tmp_path / "bad.pt"
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    with pytest.raises(mtx.CheckpointError) as e:
        mtx.Translator(bad)
    assert "bad.pt" in one_line(e)
    (tmp_path / "text.pt").write_text("not a model")
    with pytest.raises(mtx.CheckpointError):
        mtx.load_info(str(tmp_path / "text.pt"))
    assert issubclass(mtx.CheckpointError, mtx.Error)


def test_unknown_option_and_wrong_types(model, val_lines):
    t = mtx.Translator(model, threads=1)
    with pytest.raises(ValueError, match="unknown decoding option 'beem'") as e:
        t.translate(val_lines[:2], beem=4)
    one_line(e)
    with pytest.raises(ValueError, match="beam: expected an integer"):
        t.translate(val_lines[:2], beam="4")
    with pytest.raises(ValueError, match="beam"):
        t.translate(val_lines[:2], beam=0)
    with pytest.raises(ValueError, match="not one string"):
        t.translate("ein Hund")
    with pytest.raises(ValueError, match="list of pieces"):
        t.translate([5])
    with pytest.raises(ValueError, match="device"):
        mtx.Translator(model, device="tpu")
    with pytest.raises(ValueError, match="quantize"):
        mtx.Translator(model, quantize="int4")
    with pytest.raises(ValueError, match="no language codes"):
        t.translate(val_lines[:2], source_lang="deu_Latn", target_lang="eng_Latn")
    with pytest.raises(ValueError, match="sampling_seed: .* is out of range"):
        t.translate(val_lines[:2], beam=1, sampling_topk=5, sampling_seed=2**70)
    with pytest.raises(ValueError, match="2 sources but 1 targets"):
        t.score(val_lines[:2], val_lines[:1])
    src = model.parent / "src.de"
    src.write_text("ein Hund\n", encoding="utf-8")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        t.translate_file(src, model.parent / "no" / "such" / "dir" / "out.en")
    # Still usable after every error.
    assert len(t.translate(val_lines[:2])) == 2


def test_training_errors(tmp_path):
    with pytest.raises(ValueError, match="give a config"):
        mtx.train()
    with pytest.raises((FileNotFoundError, ValueError)):
        mtx.train(str(tmp_path / "missing.json"), out=str(tmp_path / "run"))


def test_help_and_stubs():
    assert "Translate ``sources``" in mtx.Translator.translate.__doc__
    assert "KeyboardInterrupt" in mtx.train.__doc__
    import pathlib
    stubs = pathlib.Path(mtx.__file__).with_name("_mtx.pyi")
    assert stubs.exists() and "class Translator" in stubs.read_text()
    names = {o["name"] for o in mtx.decode_options()}
    assert {"beam", "nbest", "alpha", "sampling_topk"} <= names
