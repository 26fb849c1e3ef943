"""mtx: Transformer translation models in C++ (LibTorch), from Python.

The same library as the ``mtx`` command line, in this process: translate with beam search or sampling, score
given translations, compute sacreBLEU's metrics, train and resume::

    import mtx
    t = mtx.Translator("runs/base/best.pt")
    [r.text for r in t.translate(["Ein Hund läuft."])]
    mtx.corpus_bleu(hypotheses, [references]).score
    mtx.train("configs/tiny.json", out="runs/tiny")

Calls release the GIL while they run. Errors arrive as Python exceptions carrying the CLI's one-line messages:
``FileNotFoundError`` (a file that is not there), ``ValueError`` (a bad option or input), ``mtx.CheckpointError``
(a damaged or foreign model file), ``mtx.Error`` (anything else that fails).
"""
from __future__ import annotations

import os as _os
import sys as _sys
from typing import Iterable, Iterator, List, Optional, Sequence, Union

import torch as _torch  # loads the LibTorch this package was built against, before the extension needs it

from . import _mtx
from ._mtx import CheckpointError, Error, Glossary, Hypothesis, ScoreResult, TranslationResult, Score
from ._mtx import corpus_bleu, corpus_chrf, corpus_ter, sentence_bleu, decode_options

__version__ = _mtx.__version__
__all__ = ["Translator", "Glossary", "TranslationResult", "Hypothesis", "ScoreResult", "Score", "Error",
           "CheckpointError", "corpus_bleu", "corpus_chrf", "corpus_ter", "sentence_bleu", "train", "load_info", "decode_options",
           "import_model", "quantize", "export_ct2", "average"]

_PathLike = Union[str, "_os.PathLike[str]"]


def _torch_release(version: str) -> str:
    return version.split("+")[0]


if _torch_release(_torch.__version__) != _torch_release(_mtx.torch_version):
    raise ImportError(f"mtx was built against torch {_mtx.torch_version}, but this environment has torch "
                      f"{_torch.__version__}: reinstall mtx here (pip install --no-build-isolation .) or install "
                      f"torch=={_torch_release(_mtx.torch_version)}")

Source = Union[str, Sequence[str]]


def _sentences(sources, what: str) -> list:
    if isinstance(sources, (str, bytes)):
        raise ValueError(f"{what}: expected a list of sentences, not one string (wrap it in a list)")
    return list(sources)


class Translator:
    """A model file (or an ensemble of them) loaded for translation and scoring.

    ``Translator(path, device="cpu", quantize=None, threads=0, workers=0)``: ``path`` is a model file written by
    ``mtx train``, ``mtx import`` or ``mtx quantize`` (a list of them: an ensemble). ``quantize="int8"`` quantizes a
    float model on loading (``"int8_float_output"`` keeps the output projection in float). ``threads`` sets
    LibTorch's CPU threads for the process (0: leave them); ``workers`` how many searches run at once (0: one per
    thread). The model holds one copy of its weights (packed for mtx's kernels).

    Calls from several Python threads run at once; each returns what it would alone.
    """

    def __init__(self, path: Union[str, "_os.PathLike[str]", Sequence[str]], device: str = "cpu",
                 quantize: Optional[str] = None, threads: int = 0, workers: int = 0) -> None:
        if isinstance(path, _os.PathLike):
            path = _os.fspath(path)
        self._impl = _mtx.Translator(path, device=device, quantize=quantize, threads=threads, workers=workers)

    def translate(self, sources: Sequence[Source], *, beam: Optional[int] = None, nbest: Optional[int] = None,
                  alpha: Optional[float] = None, scores: bool = False, alignment: bool = False,
                  source_lang: Optional[str] = None, target_lang: Optional[str] = None,
                  target_prefix: Optional[Sequence[Optional[str]]] = None, **options) -> List[TranslationResult]:
        """Translate ``sources`` (strings, or lists of source pieces); one result per source, in order.

        Every decoding option of ``mtx.decode_options()`` (``mtx translate``'s flags without the dashes, ``_`` for
        ``-``) is a keyword: ``beam``, ``nbest``, ``alpha``, ``max_len_a``, ``max_len_b``, ``min_len``,
        ``sampling_topk``, ``sampling_topp``, ``sampling_temperature``, ``sampling_seed``,
        ``repetition_penalty``, ``no_repeat_ngram_size``, ... Unset options take the model file's decode section.
        Sampling (``sampling_topk`` ...) takes ``beam=1``. ``source_lang``/``target_lang``: a multilingual model's
        languages (``deu_Latn``), for sources given as text. ``target_prefix``: a prefix per source that its
        translation starts with. ``alignment=True`` adds each best hypothesis' word alignment (Pharaoh pairs).
        ``glossary=mtx.Glossary(...)``: where a source holds a glossary's source term as whole words, its target
        term takes the place of the model's words for it (``mtx translate --glossary``); every method that
        translates text takes it.
        Results carry ``.text``, ``.score``, ``.nbest``, ``.alignment`` and ``.truncated`` (the source was cut to
        the model's length). Scores are computed by beam search (beam > 1), with ``nbest`` > 1, or with
        ``scores=True``; a greedy or sampled translation without ``scores=True`` has NaN scores (as ``mtx
        translate`` prints none without ``--scores``).
        """
        for key, value in (("beam", beam), ("nbest", nbest), ("alpha", alpha)):
            if value is not None:
                options[key] = value
        if scores:
            options["scores"] = True
        return self._impl.translate(_sentences(sources, "sources"), source_lang=source_lang, target_lang=target_lang,
                                    target_prefix=None if target_prefix is None else list(target_prefix),
                                    alignment=alignment, **options)

    def translate_text(self, texts: Union[str, Sequence[str]], *, format: str = "text",
                       source_lang: Optional[str] = None, target_lang: Optional[str] = None,
                       **options) -> Union[str, List[str]]:
        """Translate text as people write it: each text (a paragraph, a document, or with ``format="html"`` an HTML
        fragment) is split into sentences, translated, and put back with its spaces, line breaks and blank lines,
        and its inline markup placed on the aligned words (``mtx translate --format text|html``). A string gives a
        string, a list a list. Decoding options as ``translate``'s. Ctrl-C stops the call within a second."""
        one = isinstance(texts, str)
        out = self._impl.translate_text([texts] if one else list(texts), format=format, source_lang=source_lang,
                                        target_lang=target_lang, **options)
        return out[0] if one else out

    def translate_html(self, texts: Union[str, Sequence[str]], *, source_lang: Optional[str] = None,
                       target_lang: Optional[str] = None, **options) -> Union[str, List[str]]:
        """``translate_text(texts, format="html")``: tags, attributes, entities and comments kept, inline elements
        on the aligned target words; code, pre, script, style and ``translate="no"`` left untouched."""
        return self.translate_text(texts, format="html", source_lang=source_lang, target_lang=target_lang, **options)

    def translate_iter(self, lines: Iterable[str], *, batch_lines: int = 256, **options) -> Iterator[TranslationResult]:
        """Translate a stream of lines (e.g. an open file), ``batch_lines`` at a time; yields results in order."""
        if batch_lines < 1:
            raise ValueError("batch_lines: must be >= 1")
        batch: List[str] = []
        for line in lines:
            batch.append(line.rstrip("\r\n"))
            if len(batch) == batch_lines:
                yield from self.translate(batch, **options)
                batch = []
        if batch:
            yield from self.translate(batch, **options)

    def translate_file(self, src: Union[str, "_os.PathLike[str]"], out: Union[str, "_os.PathLike[str]"], *,
                       format: Optional[str] = None, source_lang: Optional[str] = None,
                       target_lang: Optional[str] = None, **options) -> dict:
        """Translate the file ``src`` into ``out``: ``mtx translate --input src --output out``'s bytes.

        A document (.docx, .pptx, .odt, .odp, .srt, .vtt, .html; ``format="docx"`` etc. whatever its name) is
        translated with its formatting, and the figures are its format, paragraphs and seconds. Any other file
        (.txt too, or ``format="lines"``) is translated line by line (``scores=True``: with ``--scores``), and the
        figures are lines, seconds, generated tokens and truncated lines."""
        return self._impl.translate_file(_os.fspath(src), _os.fspath(out), format=format, source_lang=source_lang,
                                         target_lang=target_lang, **options)

    def score(self, sources: Sequence[Source], targets: Sequence[Source], *, batch_tokens: int = 4096
              ) -> List[ScoreResult]:
        """The teacher-forced log-probability of each target given its source (``mtx score``), per pair and per
        token; a pair's numbers do not depend on the other pairs."""
        return self._impl.score(_sentences(sources, "sources"), _sentences(targets, "targets"),
                                batch_tokens=batch_tokens)

    def tokenize(self, lines: Sequence[str]) -> List[List[str]]:
        """The source pieces of each line, as the model cuts it (what ``translate`` takes as lists of pieces)."""
        return self._impl.tokenize(_sentences(lines, "lines"))

    @property
    def languages(self) -> List[str]:
        """A multilingual model's language codes (empty for a model of one pair)."""
        return self._impl.languages

    @property
    def int8(self) -> bool:
        """Whether the model runs its linear layers in int8 (an int8 file, or ``quantize=`` on loading)."""
        return self._impl.int8

    @property
    def device(self) -> str:
        return self._impl.device

    @property
    def defaults(self) -> dict:
        """The decoding options the model file's decode section gives (what unset keywords take)."""
        return self._impl.defaults

    def __repr__(self) -> str:
        return f"mtx.Translator(device={self.device!r}, int8={self._impl.int8})"


def train(config: Optional[Union[str, "_os.PathLike[str]"]] = None, *, overrides: Sequence[str] = (),
          out: Optional[Union[str, "_os.PathLike[str]"]] = None, resume: Optional[Union[str, "_os.PathLike[str]"]] = None,
          init: Optional[Union[str, "_os.PathLike[str]"]] = None, callback=None) -> dict:
    """Train as ``mtx train`` does, in this process: ``train(config, overrides=["train.max_steps=100"], out=dir)``
    starts a run, ``train(resume=dir)`` continues one exactly, ``init=model.pt`` fine-tunes a model file.

    Progress goes to the ``logging`` logger ``"mtx"`` and, if given, to ``callback({"level": ..., "message": ...})``.
    Ctrl-C (KeyboardInterrupt) stops the run at an update boundary with a resumable checkpoint, then raises
    KeyboardInterrupt; ``train(resume=dir)`` continues it bit for bit. Returns the run's summary (steps, epoch,
    validation losses, why it stopped).
    """
    fs = lambda p: None if p is None else _os.fspath(p)  # noqa: E731
    return _mtx.train(fs(config), overrides=list(overrides), out=fs(out), resume=fs(resume), init=fs(init),
                      callback=callback)


def _python(python: Optional[str]) -> str:
    """The interpreter a conversion runs: as given, else $MTX_PYTHON (as ``mtx export`` reads it), else this one."""
    return python or _os.environ.get("MTX_PYTHON") or _sys.executable


def load_info(path: _PathLike) -> dict:
    """``mtx info --ckpt path``'s JSON as a dict: the model's shapes, vocabularies, run and weights' sha256."""
    return _mtx.load_info(_os.fspath(path))


def import_model(input: _PathLike, out: _PathLike, *, source: str = "hf", config: Optional[_PathLike] = None,
                 python: Optional[str] = None) -> List[str]:
    """Write an mtx model file of a model trained elsewhere (``mtx import``): ``source="hf"`` a Hugging Face
    directory (MarianMT, NLLB-200, M2M100, mBART-50), ``"marian"`` a Marian ``.npz`` with ``config`` its
    ``decoder.yml``. ``python``: an interpreter with torch for a ``pytorch_model.bin`` (default: $MTX_PYTHON, else
    this one). Returns the importer's notes."""
    return _mtx.import_model(_os.fspath(input), _os.fspath(out), source=source,
                             config=None if config is None else _os.fspath(config), python=_python(python))


def quantize(path: _PathLike, out: _PathLike, *, output: bool = True) -> None:
    """Write an int8 model file of ``path`` (``mtx quantize``); ``output=False`` keeps the output projection float."""
    _mtx.quantize(_os.fspath(path), _os.fspath(out), output=output)


def export_ct2(path: _PathLike, out: _PathLike, *, quantization: Optional[str] = None, python: Optional[str] = None,
               force: bool = False) -> None:
    """Write a CTranslate2 model directory of ``path`` (``mtx export --format ct2``); ``python`` names an
    interpreter with ctranslate2, safetensors and numpy (default: $MTX_PYTHON, else this one)."""
    _mtx.export_ct2(_os.fspath(path), _os.fspath(out), quantization=quantization, python=_python(python), force=force)


def average(inputs: Sequence[_PathLike], out: _PathLike) -> None:
    """Write the average of several checkpoints of one run (``mtx average``)."""
    _mtx.average([_os.fspath(p) for p in inputs], _os.fspath(out))

