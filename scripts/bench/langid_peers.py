#!/usr/bin/env python3
"""Language-identification accuracy of peer libraries (langdetect, lingua) on a corpus from langid_corpus.py,
side by side with other detectors' answers (mtx's CLD2), as markdown tables.

    .venv/bin/python scripts/bench/langid_peers.py --in data/cache/langid/corpus.tsv
        [--answers cld2=FILE[@MS]]... [--peers langdetect,lingua[,lingua-low]] [--min-chars 20]
        [--save-answers DIR] [--limit N]

--in: `lang<TAB>sentence` lines. Only sentences of at least --min-chars characters are scored.
--answers NAME=FILE: another detector's answers, one per line in corpus order (all lines of --in, the short ones
  included); the first field of each line is the code ("en", "iw", "zh-Hant", "deu_Latn", "" for none). @MS gives
  its time per sentence in milliseconds, for the table.
--peers: the libraries to run (installed into the running Python; pip install langdetect lingua-language-detector);
  lingua-low is lingua's low accuracy mode. cld2 calls Debian's libcld2 through ctypes as mtx does (its full
  tables, the first of its top three), cld2-summary takes CLD2's summary language instead, cld2-best passes
  kCLDFlagBestEffort (an answer even for short text, where CLD2 otherwise says unknown), cld2-small uses
  libcld2.so's own smaller tables (not in the same run as the other cld2 peers). "" runs none.
--save-answers DIR: writes DIR/NAME.txt for each library run, in the --answers format.

Codes are compared as ISO 639-1 (639-3 where a language has none): langdetect's zh-cn/zh-tw -> zh, lingua's
enum -> its ISO 639-1 code, CLD2's iw -> he, jw -> jv, zh-Hant -> zh, no -> nb, and NLLB or ISO 639-3 codes through
src/text/languages.tsv; a script or region suffix (sr-Latn, pt-BR) is dropped. Accuracy is reported over all scored
sentences and over the languages every library run here supports; per language, a library's cell is "n/s" for a
language it does not know, and shows its most frequent wrong answer.
"""
import argparse
import platform
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALIASES = {"iw": "he", "jw": "jv", "in": "id", "ji": "yi", "mo": "ro", "no": "nb", "fil": "tl", "zh-cn": "zh",
           "zh-tw": "zh", "zh-hans": "zh", "zh-hant": "zh"}


def load_table(path):
    """code (lower case, '-' for '_') -> ISO 639-1 (else 639-3) from the language table's code columns."""
    out = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return out
    header = lines[0].lstrip("#").split("\t") if lines else []
    for line in lines[1:]:
        if not line or line.startswith("#"):
            continue
        row = dict(zip(header, line.split("\t")))
        iso = row.get("iso639_1") or row.get("iso639_3", "")
        for column in ("nllb", "cld2", "iso639_3", "iso639_1", "m2m100", "mbart50"):
            code = row.get(column, "").lower().replace("_", "-")
            if code and iso:
                out.setdefault(code, iso)
    return out


class Normalizer:
    def __init__(self, table):
        self.table = table

    def __call__(self, code):
        c = (code or "").strip().lower().replace("_", "-")
        if not c or c in ("un", "unknown", "und", "xxx"):
            return ""
        for _ in range(2):
            if c in ALIASES:
                return ALIASES[c]
            if c in self.table:
                return ALIASES.get(self.table[c], self.table[c])
            if "-" not in c:
                return c
            c = c.split("-")[0]
        return c


def run_langdetect():
    from langdetect import DetectorFactory, detect
    from langdetect.lang_detect_exception import LangDetectException
    from langdetect import detector_factory

    DetectorFactory.seed = 0
    start = time.perf_counter()
    detector_factory.init_factory()
    load = time.perf_counter() - start

    def answer(text):
        try:
            return detect(text)
        except LangDetectException:
            return ""

    import langdetect
    version = getattr(langdetect, "__version__", None) or package_version("langdetect")
    return answer, set(detector_factory._factory.get_lang_list()), load, f"langdetect {version}"


def run_lingua(low=False):
    from lingua import Language, LanguageDetectorBuilder

    start = time.perf_counter()
    builder = LanguageDetectorBuilder.from_all_languages()
    builder = builder.with_low_accuracy_mode() if low else builder.with_preloaded_language_models()
    detector = builder.build()
    load = time.perf_counter() - start

    def answer(text):
        language = detector.detect_language_of(text)
        return language.iso_code_639_1.name.lower() if language is not None else ""

    supported = {language.iso_code_639_1.name.lower() for language in Language.all()}
    mode = " (low accuracy mode)" if low else ""
    return answer, supported, load, f"lingua-language-detector {package_version('lingua-language-detector')}{mode}"


def run_cld2(tables="full", summary=False, flags=0):
    """CLD2 through ctypes, called as src/text/language_id.cpp calls it (ExtDetectLanguageSummaryCheckUTF8, plain
    text, no hints): the first of its top three languages that is known and has a share of the text; with
    `summary`, the language CLD2 returns as its summary instead; flags 0x4000 is kCLDFlagBestEffort.
    tables="full" loads libcld2_full.so's tables ahead of libcld2.so's own, as a program linked with cld2_full
    before cld2 gets them (libcld2_full.so holds only tables; the code is libcld2.so's)."""
    import ctypes

    if getattr(run_cld2, "tables", tables) != tables:
        raise SystemExit("langid_peers: cld2-small and cld2/cld2-best/cld2-summary need separate runs "
                         "(one process binds libcld2 to one set of tables)")
    run_cld2.tables = tables
    start = time.perf_counter()
    if tables == "full":
        full = ctypes.CDLL("libcld2_full.so.0", mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL("libcld2.so.0", mode=ctypes.RTLD_GLOBAL)
    data = full if tables == "full" else lib
    code = lib._ZN4CLD212LanguageCodeENS_8LanguageE
    code.restype, code.argtypes = ctypes.c_char_p, [ctypes.c_int]
    from_name = lib._ZN4CLD219GetLanguageFromNameEPKc
    from_name.restype, from_name.argtypes = ctypes.c_int, [ctypes.c_char_p]
    default = lib._ZN4CLD215DefaultLanguageENS_8ULScriptE
    default.restype, default.argtypes = ctypes.c_int, [ctypes.c_int]

    class Hints(ctypes.Structure):
        _fields_ = [("content_language", ctypes.c_char_p), ("tld", ctypes.c_char_p), ("encoding", ctypes.c_int),
                    ("language", ctypes.c_int)]

    class TableSummary(ctypes.Structure):
        _fields_ = [("table", ctypes.c_void_p), ("ind", ctypes.c_void_p), ("a", ctypes.c_uint32),
                    ("b", ctypes.c_uint32), ("c", ctypes.c_uint32), ("date", ctypes.c_uint32),
                    ("lang_scripts", ctypes.c_char_p)]

    Int3, Double3 = ctypes.c_int * 3, ctypes.c_double * 3
    detect = getattr(lib, "_ZN4CLD233ExtDetectLanguageSummaryCheckUTF8EPKcibPKNS_8CLDHintsEiPNS_8LanguageEPiPd"
                          "PSt6vectorINS_11ResultChunkESaISA_EES7_PbS7_")
    detect.restype = ctypes.c_int
    detect.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_bool, ctypes.POINTER(Hints), ctypes.c_int,
                       ctypes.POINTER(Int3), ctypes.POINTER(Int3), ctypes.POINTER(Double3), ctypes.c_void_p,
                       ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_bool), ctypes.POINTER(ctypes.c_int)]
    unknown = from_name(b"un")
    hints = Hints(None, None, 23, unknown)  # UNKNOWN_ENCODING
    load = time.perf_counter() - start

    def answer(text):
        b = text.encode("utf-8")
        top, share, scores = Int3(), Int3(), Double3()
        nbytes, reliable, valid = ctypes.c_int(), ctypes.c_bool(), ctypes.c_int()
        summary_lang = detect(b, len(b), True, ctypes.byref(hints), flags, ctypes.byref(top), ctypes.byref(share),
                              ctypes.byref(scores), None, ctypes.byref(nbytes), ctypes.byref(reliable),
                              ctypes.byref(valid))
        if summary:
            return "" if summary_lang == unknown else code(summary_lang).decode()
        for lang, pct in zip(top, share):
            if lang != unknown and pct > 0:
                return code(lang).decode()
        return ""

    supported = {code(default(s)).decode() for s in range(ctypes.c_int.in_dll(
        lib, "_ZN4CLD226kULScriptToDefaultLangSizeE").value)} | {"zh-Hant"}
    for sym in ["_ZN4CLD29kQuad_objE", "_ZN4CLD210kQuad_obj2E", "_ZN4CLD214kDeltaOcta_objE",
                "_ZN4CLD215kDeltaOcta_obj2E", "_ZN4CLD217kDistinctOcta_objE", "_ZN4CLD218kDistinctOcta_obj2E",
                "_ZN4CLD214kCjkCompat_objE", "_ZN4CLD215kCjkDeltaBi_objE"]:
        for lang_script in (TableSummary.in_dll(data, sym).lang_scripts or b"").decode().split():
            supported.add(code(from_name(lang_script.rsplit("-", 1)[0].encode())).decode())
    supported = {c for c in supported if not c.startswith("xx-")} - {"un"}
    about = (f"CLD2 via ctypes ({'libcld2_full.so tables' if tables == 'full' else 'libcld2.so tables'}, "
             f"{'summary language' if summary else 'first of its top three, as mtx'}"
             f"{', kCLDFlagBestEffort' if flags & 0x4000 else ''})")
    return answer, supported, load, about


def package_version(name):
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:
        return "?"


PEERS = {"langdetect": run_langdetect, "lingua": run_lingua, "lingua-low": lambda: run_lingua(low=True),
         "cld2": run_cld2, "cld2-summary": lambda: run_cld2(summary=True),
         "cld2-best": lambda: run_cld2(flags=0x4000), "cld2-small": lambda: run_cld2(tables="small")}


def cpu_name():
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def percent(right, n):
    return f"{100.0 * right / n:.1f}" if n else "–"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--in", dest="corpus", required=True)
    p.add_argument("--answers", action="append", default=[], metavar="NAME=FILE[@MS]")
    p.add_argument("--peers", default="langdetect,lingua")
    p.add_argument("--min-chars", type=int, default=20)
    p.add_argument("--table", default=str(ROOT / "src/text/languages.tsv"))
    p.add_argument("--save-answers", metavar="DIR")
    p.add_argument("--limit", type=int, help="score only the first N lines (a quick try)")
    a = p.parse_args()

    norm = Normalizer(load_table(a.table))
    corpus = []
    for line in open(a.corpus, encoding="utf-8"):
        line = line.rstrip("\n")
        if line:
            lang, _, text = line.partition("\t")
            corpus.append((lang, text))
    total_lines = len(corpus)
    if a.limit:
        corpus = corpus[:a.limit]
    scored = [i for i, (_, text) in enumerate(corpus) if len(text) >= a.min_chars]
    gold = [norm(lang) for lang, _ in corpus]
    groups = sorted({corpus[i][0] for i in scored})

    columns = []  # (name, answers per corpus line, supported set or None, ms per sentence or None, load s, about)
    for name in [x for x in a.peers.split(",") if x]:
        if name not in PEERS:
            raise SystemExit(f"langid_peers: unknown peer {name!r} (have {', '.join(PEERS)})")
        try:
            answer, supported, load, about = PEERS[name]()
        except ImportError as e:
            raise SystemExit(f"langid_peers: {name} is not installed ({e}); "
                             f"{sys.executable} -m pip install langdetect lingua-language-detector")
        answers = [""] * len(corpus)
        spent = 0.0
        for i in scored:
            start = time.perf_counter()
            answers[i] = answer(corpus[i][1])
            spent += time.perf_counter() - start
        ms = 1000.0 * spent / max(1, len(scored))
        columns.append((name, answers, {norm(c) for c in supported}, ms, load, about))
        print(f"langid_peers: {name}: {len(scored)} sentences, {ms:.3f} ms each", file=sys.stderr)
        if a.save_answers:
            Path(a.save_answers).mkdir(parents=True, exist_ok=True)
            Path(a.save_answers, f"{name}.txt").write_text("".join(x + "\n" for x in answers), encoding="utf-8")
    for spec in a.answers:
        name, _, path = spec.partition("=")
        ms = None
        if "@" in path:
            path, _, ms_text = path.rpartition("@")
            ms = float(ms_text)
        lines = Path(path).read_text(encoding="utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) not in (total_lines, len(corpus)):
            raise SystemExit(f"langid_peers: {path} has {len(lines)} lines, the corpus {total_lines}")
        answers = [(line.split() or [""])[0] for line in lines[:len(corpus)]]
        columns.append((name, answers, None, ms, None, f"{name}: answers from {path}"))
    if not columns:
        raise SystemExit("langid_peers: nothing to score (no --peers, no --answers)")

    known = [c[2] for c in columns if c[2] is not None]
    shared = set.intersection(*known) if known else {gold[i] for i in scored}
    shared_scored = [i for i in scored if gold[i] in shared]

    print(f"## Language identification: {len(scored)} sentences of {a.min_chars}+ characters, "
          f"{len(groups)} languages ({Path(a.corpus).name})\n")
    print(f"CPU: {cpu_name()}, one thread; Python {platform.python_version()}. "
          + "; ".join(c[5] for c in columns) + ".\n")
    print(f"| detector | accuracy, all {len(scored)} | accuracy, {len(shared_scored)} in the {len(shared)} "
          "languages every library run here knows | ms / sentence | load s |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, answers, _, ms, load, _ in columns:
        right = sum(1 for i in scored if norm(answers[i]) == gold[i])
        right_shared = sum(1 for i in shared_scored if norm(answers[i]) == gold[i])
        print(f"| {name} | {percent(right, len(scored))}% ({right}) | "
              f"{percent(right_shared, len(shared_scored))}% ({right_shared}) | "
              f"{'–' if ms is None else f'{ms:.3f}'} | {'–' if load is None else f'{load:.1f}'} |")
    print("\nPer language: accuracy %, and the most frequent wrong answer; n/s: the library does not know the "
          "language.\n")
    print("| lang | n | " + " | ".join(c[0] for c in columns) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in columns) + " |")
    by_group = defaultdict(list)
    for i in scored:
        by_group[corpus[i][0]].append(i)
    for group in groups:
        idx = by_group[group]
        cells = []
        for _, answers, supported, _, _, _ in columns:
            if supported is not None and gold[idx[0]] not in supported:
                cells.append("n/s")
                continue
            right = sum(1 for i in idx if norm(answers[i]) == gold[i])
            wrong = Counter(norm(answers[i]) or "none" for i in idx if norm(answers[i]) != gold[i])
            top = f" ({wrong.most_common(1)[0][0]})" if wrong else ""
            cells.append(percent(right, len(idx)) + top)
        print(f"| {group} | {len(idx)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
