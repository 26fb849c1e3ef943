#!/usr/bin/env python3
"""Language-identification accuracy of peer libraries (langdetect, lingua) on a corpus from langid_corpus.py,
side by side with other detectors' answers (mtx's CLD2), as markdown tables.

    .venv/bin/python scripts/bench/langid_peers.py --in data/cache/langid/corpus.tsv
        [--answers cld2=FILE[@MS[@LOAD_S]]]... [--about NAME=TEXT]... [--supported NAME=SPEC]...
        [--peers langdetect,lingua[,lingua-low]] [--min-chars 20] [--focus de,en,fr,...]
        [--save-answers DIR] [--limit N]

--in: `lang<TAB>sentence` lines. Only sentences of at least --min-chars characters are scored.
--answers NAME=FILE: another detector's answers, one per line in corpus order (all lines of --in, the short ones
  included); the first field of each line is the code ("en", "iw", "zh-Hant", "deu_Latn", "" or "und" for none).
  @MS gives its time per sentence in milliseconds, for the table, and a further @LOAD_S its load (start) seconds.
--about NAME=TEXT: how the answers of NAME were made, for the table's heading (default: the file they came from).
--supported NAME=SPEC: the languages the detector NAME of --answers knows (else it counts as knowing every
  language): "mtx" for those mtx detect can answer (CLD2 with libcld2.so's own tables, which mtx links, that
  src/text/languages.tsv names; no cld2 peer other than cld2-small in the same run), or a comma-separated code list.
--focus: corpus languages (as in its first column) for a third table: each one's accuracy per detector, their
  accuracy together and per language on average, and the detectors' time per sentence.
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
    p.add_argument("--answers", action="append", default=[], metavar="NAME=FILE[@MS[@LOAD_S]]")
    p.add_argument("--about", action="append", default=[], metavar="NAME=TEXT")
    p.add_argument("--supported", action="append", default=[], metavar="NAME=SPEC")
    p.add_argument("--focus", default="", help="comma-separated corpus languages for a table of their own")
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
    abouts = dict(pair("--about", x) for x in a.about)
    supported_specs = dict(pair("--supported", x) for x in a.supported)
    answer_names = [pair("--answers", x)[0] for x in a.answers]
    for name in list(abouts) + list(supported_specs):
        if name not in answer_names:
            raise SystemExit(f"langid_peers: --about/--supported name {name!r} is none of --answers' ({answer_names})")
    for spec in a.answers:
        name, path = pair("--answers", spec)
        numbers = []  # trailing @MS[@LOAD_S]
        while "@" in path and len(numbers) < 2:
            head, _, tail = path.rpartition("@")
            try:
                numbers.insert(0, float(tail))
            except ValueError:
                break
            path = head
        ms = numbers[0] if numbers else None
        load = numbers[1] if len(numbers) > 1 else None
        lines = Path(path).read_text(encoding="utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) not in (total_lines, len(corpus)):
            raise SystemExit(f"langid_peers: {path} has {len(lines)} lines, the corpus {total_lines}")
        answers = [(line.split() or [""])[0] for line in lines[:len(corpus)]]
        supported = None
        if name in supported_specs:
            supported = {norm(c) for c in supported_languages(supported_specs[name], a.table)} - {""}
        columns.append((name, answers, supported, ms, load, abouts.get(name, f"{name}: answers from {path}")))
    if not columns:
        raise SystemExit("langid_peers: nothing to score (no --peers, no --answers)")

    known = [c[2] for c in columns if c[2] is not None]
    shared = set.intersection(*known) if known else {gold[i] for i in scored}
    shared_scored = [i for i in scored if gold[i] in shared]

    print(f"## Language identification: {len(scored)} sentences of {a.min_chars}+ characters, "
          f"{len(groups)} languages ({Path(a.corpus).name})\n")
    print(f"CPU: {cpu_name()}, one thread; Python {platform.python_version()}. "
          + "; ".join(c[5] for c in columns) + ".\n")
    known_groups = [g for g in groups if norm(g) in shared]
    print(f"The corpus's languages every detector here knows ({len(known_groups)} of {len(groups)}): "
          + " ".join(known_groups) + "\n")
    print(f"| detector | accuracy, all {len(scored)} | accuracy, {len(shared_scored)} in the {len(known_groups)} "
          "corpus languages every detector here knows | ms / sentence | load s |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, answers, _, ms, load, _ in columns:
        right = sum(1 for i in scored if norm(answers[i]) == gold[i])
        right_shared = sum(1 for i in shared_scored if norm(answers[i]) == gold[i])
        print(f"| {name} | {percent(right, len(scored))}% ({right}) | "
              f"{percent(right_shared, len(shared_scored))}% ({right_shared}) | "
              f"{'–' if ms is None else ms_text(ms)} | {'–' if load is None else f'{load:.1f}'} |")
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
    if a.focus:
        focus_table([x for x in a.focus.split(",") if x], by_group, columns, gold, norm, a.min_chars)


def focus_table(focus, by_group, columns, gold, norm, min_chars):
    """Per language of `focus`: each detector's accuracy; then all of them together (micro), their mean (macro)
    and the time per sentence."""
    missing = [g for g in focus if not by_group.get(g)]
    if missing:
        raise SystemExit(f"langid_peers: --focus languages not in the corpus (or no sentence of {min_chars}+ "
                         f"characters): {' '.join(missing)}")
    print(f"\n{len(focus)} focus languages: accuracy % on their sentences of {min_chars}+ characters, and the most "
          "frequent wrong answer; n/s: the detector does not know the language.\n")
    print("| lang | n | " + " | ".join(c[0] for c in columns) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in columns) + " |")
    totals = [[0, 0, []] for _ in columns]  # right, n, per-language shares
    for group in focus:
        idx = by_group[group]
        cells = []
        for k, (_, answers, supported, _, _, _) in enumerate(columns):
            right = sum(1 for i in idx if norm(answers[i]) == gold[i])
            totals[k][0] += right
            totals[k][1] += len(idx)
            totals[k][2].append(right / len(idx))
            if supported is not None and gold[idx[0]] not in supported:
                cells.append("n/s")
                continue
            wrong = Counter(norm(answers[i]) or "none" for i in idx if norm(answers[i]) != gold[i])
            top = f" ({wrong.most_common(1)[0][0]})" if wrong else ""
            cells.append(percent(right, len(idx)) + top)
        print(f"| {group} | {len(idx)} | " + " | ".join(cells) + " |")
    n = sum(len(by_group[g]) for g in focus)
    print(f"| all {len(focus)}, together | {n} | " +
          " | ".join(f"{percent(r, m)}% ({r})" for r, m, _ in totals) + " |")
    print(f"| all {len(focus)}, mean of languages | {n} | " +
          " | ".join(f"{100.0 * sum(s) / len(s):.1f}%" for _, _, s in totals) + " |")
    print("| ms / sentence (whole corpus) | | " +
          " | ".join("–" if c[3] is None else ms_text(c[3]) for c in columns) + " |")


def ms_text(ms):
    return f"{ms:.3f}" if ms >= 0.1 else f"{ms:.4f}"


def pair(option, text):
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise SystemExit(f"langid_peers: {option} {text!r}: expected NAME=VALUE")
    return name, value


def supported_languages(spec, table_path):
    """The codes of a --supported SPEC (see the usage)."""
    if spec != "mtx":
        return {c.strip() for c in spec.split(",") if c.strip()}
    _, cld2, _, _ = run_cld2(tables="small")
    named = load_table(table_path)
    if not named:
        raise SystemExit(f"langid_peers: --supported mtx needs the language table {table_path}")
    return {c for c in cld2 if c.lower().replace("_", "-") in named}


if __name__ == "__main__":
    main()
