#!/usr/bin/env python3
"""Checks src/text/languages.tsv, the language-code table behind `source: "auto"`, /detect and /languages: every
NLLB-200, M2M100 and mBART-50 language code of transformers' tokenizers maps to exactly one row, and every language
code that CLD2 can report (read from Debian's libcld2 through ctypes, else from the list below) maps to one row.
Prints a summary and exits 1 on any problem (2 when transformers is missing).

    .venv/bin/python scripts/checks/languages_table.py [TABLE] [--quiet]

The table is tab-separated, UTF-8, one header line starting with '#', then one row per (language, script):
  iso639_1  two letters or empty
  iso639_3  three letters; for a macrolanguage the individual language NLLB uses (arb, zho, pes, zsm, est, lvs, ...)
  script    ISO 15924 (Latn, Cyrl, Hans, Hant, Arab, ...)
  nllb      NLLB-200 code (= iso639_3 + '_' + script) or empty
  cld2      the code CLD2's LanguageCode() gives (en, iw, jw, zh-Hant, no, ...) or empty
  name      English name, unique (LibreTranslate style: "Chinese (traditional)")
  m2m100    M2M100 code or empty: iso639_1 if present else iso639_3, except "no" (row nob, whose ISO 639-1 code
            is nb) and "ns" (row nso, Northern Sotho, which has no ISO 639-1 code)
  mbart50   mBART-50 code or empty (its part before '_' is iso639_1)
Several rows may share iso639_1 (zh: zho_Hans, zho_Hant; ks: kas_Arab, kas_Deva): the first one in file order is
that code's default, and it is the one that carries the M2M100/mBART code; this script checks that too.
CLD2 codes that are not languages ("un", "xxx", "xx-Xxxx" scripts, "zzb", "zze", "zzh", "zzp") have no row.
It also replays the lookup of src/text/languages.cpp (model and CLD2 codes exactly, then iso_script, then the first
row with that ISO code, then language_REGION) and fails when a code would find another row than its own; "ns"
(M2M100's Northern Sotho) is found only when the lookup reads the m2m100 column.
"""
import argparse
import ctypes
import re
import sys
from pathlib import Path

COLUMNS = ["iso639_1", "iso639_3", "script", "nllb", "cld2", "name", "m2m100", "mbart50"]
M2M_EXCEPTIONS = {"no": "nob", "ns": "nso"}  # M2M100 code -> iso639_3 of its row, where the rule does not give it
NOT_LANGUAGES = {"un", "xxx", "zzb", "zze", "zzh", "zzp", ""}

# What libcld2 (Debian 0.0.0-git20150806, tables V2.0 20141016) reports, for machines without it: the languages of
# its scoring tables plus those that a script alone decides (DefaultLanguage(ULScript)), and zh-Hant.
CLD2_SMALL = (
    "af am ar az be bg bh bn bo bs ca ceb chr cs cy da de dv el en es et eu fa fi fr ga gd gl gu hi hmn hr ht hu hy "
    "id is it iu iw ja jw ka kk km kn ko ku ky lg lif lo lt lv mg mk ml mn mr ms mt my ne nl no ny or pa pl pt ro ru "
    "rw si sk sl sq sr st su sv sw syr ta te tg th tl tr uk ur uz vi yi za zh zh-Hant").split()
# libcld2_full adds these.
CLD2_FULL_EXTRA = (
    "aa ab ak as ay ba bi br co crs dz eo fj fo fy gn gv ha haw ia ie ig ik kha kl ks la lb ln mfe mi na nn nr nso oc "
    "om ps qu rm rn sa sco sd sg sm sn so ss ti tk tlh tn to ts tt ug ve vo war wo xh yo zu").split()
# Codes LanguageCode() knows that neither library's tables report.
CLD2_UNREPORTED = "ee gaa kri loz lua luo new os pam raj sr-ME tum tw un xxx zzb zze zzh zzp".split()

TABLE_SYMBOLS = ["_ZN4CLD29kQuad_objE", "_ZN4CLD210kQuad_obj2E", "_ZN4CLD214kDeltaOcta_objE",
                 "_ZN4CLD215kDeltaOcta_obj2E", "_ZN4CLD217kDistinctOcta_objE", "_ZN4CLD218kDistinctOcta_obj2E",
                 "_ZN4CLD214kCjkCompat_objE", "_ZN4CLD215kCjkDeltaBi_objE"]


class TableSummary(ctypes.Structure):  # CLD2::CLD2TableSummary (cld2/internal/cld2tablesummary.h)
    _fields_ = [("table", ctypes.c_void_p), ("ind", ctypes.c_void_p), ("size_one", ctypes.c_uint32),
                ("size", ctypes.c_uint32), ("key_mask", ctypes.c_uint32), ("build_date", ctypes.c_uint32),
                ("lang_scripts", ctypes.c_char_p)]


def cld2_from_library():
    """{library: (reportable codes, all codes LanguageCode() knows)} read from the installed libcld2, or {}."""
    try:
        small = ctypes.CDLL("libcld2.so.0", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return {}
    code = small._ZN4CLD212LanguageCodeENS_8LanguageE
    code.restype, code.argtypes = ctypes.c_char_p, [ctypes.c_int]
    from_name = small._ZN4CLD219GetLanguageFromNameEPKc
    from_name.restype, from_name.argtypes = ctypes.c_int, [ctypes.c_char_p]
    default = small._ZN4CLD215DefaultLanguageENS_8ULScriptE
    default.restype, default.argtypes = ctypes.c_int, [ctypes.c_int]
    n_lang = ctypes.c_int.in_dll(small, "_ZN4CLD220kLanguageToPLangSizeE").value
    n_script = ctypes.c_int.in_dll(small, "_ZN4CLD226kULScriptToDefaultLangSizeE").value
    known = {code(i).decode() for i in range(n_lang)} - {""}
    by_script = {code(default(s)).decode() for s in range(n_script)}
    out = {}
    for name in ["libcld2.so.0", "libcld2_full.so.0"]:
        try:
            lib = small if name == "libcld2.so.0" else ctypes.CDLL(name)
        except OSError:
            continue
        codes = set(by_script) | {"zh-Hant"}  # the CJK tables score Chinese_T as "zh-Hant"
        for sym in TABLE_SYMBOLS:
            for lang_script in (TableSummary.in_dll(lib, sym).lang_scripts or b"").decode().split():
                codes.add(code(from_name(lang_script.rsplit("-", 1)[0].encode())).decode())
        out[name] = ({c for c in codes if not c.startswith("xx-")}, known)
    return out


def transformers_codes():
    from transformers.models.m2m_100 import tokenization_m2m_100 as m2m
    from transformers.models.mbart50 import tokenization_mbart50 as mbart50
    try:
        from transformers.models.nllb import tokenization_nllb as nllb
        nllb_codes = nllb.FAIRSEQ_LANGUAGE_CODES
    except (ImportError, AttributeError):
        from transformers.models.nllb import tokenization_nllb_fast as nllb
        nllb_codes = nllb.FAIRSEQ_LANGUAGE_CODES
    m2m_codes = m2m.FAIRSEQ_LANGUAGE_CODES
    if isinstance(m2m_codes, dict):
        m2m_codes = sorted({c for v in m2m_codes.values() for c in v})
    return list(nllb_codes), list(m2m_codes), list(mbart50.FAIRSEQ_LANGUAGE_CODES)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("table", nargs="?", default=str(Path(__file__).resolve().parents[2] / "src/text/languages.tsv"))
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args()
    problems = []
    bad = problems.append

    lines = Path(a.table).read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or lines[0] != "#" + "\t".join(COLUMNS):
        bad(f"header is {lines[0]!r}, want {'#' + chr(9).join(COLUMNS)!r}")
    rows = []
    for n, line in enumerate(lines[1:], 2):
        f = line.split("\t")
        if len(f) != len(COLUMNS):
            bad(f"line {n}: {len(f)} fields, want {len(COLUMNS)}: {line!r}")
            continue
        row = dict(zip(COLUMNS, f), line=n)
        if any(v != v.strip() for v in f):
            bad(f"line {n}: a field has surrounding blanks")
        if row["iso639_1"] and not re.fullmatch(r"[a-z]{2}", row["iso639_1"]):
            bad(f"line {n}: iso639_1 {row['iso639_1']!r}")
        if not re.fullmatch(r"[a-z]{3}", row["iso639_3"]):
            bad(f"line {n}: iso639_3 {row['iso639_3']!r}")
        if not re.fullmatch(r"[A-Z][a-z]{3}", row["script"]):
            bad(f"line {n}: script {row['script']!r}")
        if row["nllb"] and row["nllb"] != f"{row['iso639_3']}_{row['script']}":
            bad(f"line {n}: nllb {row['nllb']!r} is not iso639_3_script ({row['iso639_3']}_{row['script']})")
        if not row["name"]:
            bad(f"line {n}: no name")
        m = row["m2m100"]
        if m and m != (row["iso639_1"] or row["iso639_3"]) and M2M_EXCEPTIONS.get(m) != row["iso639_3"]:
            bad(f"line {n}: m2m100 {m!r} is neither iso639_1 nor iso639_3 and not a listed exception")
        if row["mbart50"] and row["mbart50"].split("_")[0] != row["iso639_1"]:
            bad(f"line {n}: mbart50 {row['mbart50']!r} does not start with iso639_1 {row['iso639_1']!r}")
        rows.append(row)

    def unique(column, skip_empty=True):
        seen = {}
        for row in rows:
            v = row[column]
            if skip_empty and not v:
                continue
            if v in seen:
                bad(f"{column} {v!r} on lines {seen[v]} and {row['line']}")
            seen.setdefault(v, row["line"])
        return seen

    unique("name")
    pairs = {}
    for row in rows:
        k = (row["iso639_3"], row["script"])
        if k in pairs:
            bad(f"(iso639_3, script) {k} on lines {pairs[k]} and {row['line']}")
        pairs.setdefault(k, row["line"])
    first_by_iso1 = {}
    for row in rows:
        if row["iso639_1"]:
            first_by_iso1.setdefault(row["iso639_1"], row)
    first_by_code = {}  # iso639_1 else iso639_3, as C++ derives a model's code
    for row in rows:
        first_by_code.setdefault(row["iso639_1"] or row["iso639_3"], row)

    try:
        nllb_codes, m2m_codes, mbart_codes = transformers_codes()
    except ImportError as e:
        print(f"languages_table: transformers is needed ({e})", file=sys.stderr)
        return 2

    for column, want, name in [("nllb", nllb_codes, "NLLB-200"), ("m2m100", m2m_codes, "M2M100"),
                               ("mbart50", mbart_codes, "mBART-50")]:
        if len(set(want)) != len(want):
            bad(f"{name}: transformers lists a code twice")
        have = unique(column)
        for c in sorted(set(want) - set(have)):
            bad(f"{name} code {c!r} has no row")
        for c in sorted(set(have) - set(want)):
            bad(f"{column} {c!r} (line {have[c]}) is not a {name} code")
    for row in rows:  # the row carrying a model code is the one C++ finds by deriving it
        m = row["m2m100"]
        if m and m not in M2M_EXCEPTIONS and first_by_code.get(m) is not row:
            bad(f"line {row['line']}: M2M100 {m!r} derived from iso639_1/iso639_3 finds line "
                f"{first_by_code[m]['line']} first")
        if row["mbart50"] and first_by_iso1.get(row["iso639_1"]) is not row:
            bad(f"line {row['line']}: mBART {row['mbart50']!r} by prefix finds line "
                f"{first_by_iso1[row['iso639_1']]['line']} first")

    # The lookup src/text/languages.cpp does (find_language): codes of the model/detector columns exactly, then
    # "<iso639_1 or iso639_3>_<script>", then the first row with that iso639_1 or iso639_3, then language_REGION.
    exact, exact_no_models, scripted, base = {}, {}, {}, {}
    key = lambda c: c.lower().replace("-", "_")
    for row in rows:
        for column in ("nllb", "cld2", "m2m100", "mbart50"):
            if row[column]:
                exact.setdefault(key(row[column]), row)
                if column in ("nllb", "cld2"):
                    exact_no_models.setdefault(key(row[column]), row)
        for c in (row["iso639_1"], row["iso639_3"]):
            if c:
                base.setdefault(c, row)
                scripted.setdefault(f"{c}_{row['script'].lower()}", row)

    def find(code, with_model_columns=True):
        k = key(code)
        for m in [exact if with_model_columns else exact_no_models, scripted, base]:
            if k in m:
                return m[k]
        return base.get(k.split("_")[0]) if "_" in k else None

    need_column = []
    for row in rows:
        for column in ("nllb", "cld2", "m2m100", "mbart50"):
            c = row[column]
            if not c:
                continue
            if find(c) is not row:
                bad(f"line {row['line']}: {column} {c!r} is looked up as line {(find(c) or {}).get('line')}")
            elif column in ("m2m100", "mbart50") and find(c, with_model_columns=False) is not row:
                need_column.append(c)
        for c in (row["iso639_1"], row["iso639_3"]):
            other = exact.get(c)
            if c and other is not None and other["iso639_3"] != row["iso639_3"]:
                bad(f"line {row['line']}: {c!r} is also a model/CLD2 code of line {other['line']}")

    cld2_column = unique("cld2")
    libs = cld2_from_library()
    if libs:
        reportable = {name: codes for name, (codes, _) in libs.items()}
        known = next(iter(libs.values()))[1]
        source = "libcld2 via ctypes: " + ", ".join(f"{k} {len(v - NOT_LANGUAGES)}" for k, v in reportable.items())
        if "libcld2.so.0" in reportable and set(CLD2_SMALL) != reportable["libcld2.so.0"] - NOT_LANGUAGES:
            print("note: the installed libcld2.so differs from this script's CLD2_SMALL list: "
                  f"+{sorted(reportable['libcld2.so.0'] - NOT_LANGUAGES - set(CLD2_SMALL))} "
                  f"-{sorted(set(CLD2_SMALL) - reportable['libcld2.so.0'])}")
    else:
        reportable = {"CLD2_SMALL": set(CLD2_SMALL), "CLD2_FULL": set(CLD2_SMALL) | set(CLD2_FULL_EXTRA)}
        known = reportable["CLD2_FULL"] | set(CLD2_UNREPORTED)
        source = "no libcld2 here: this script's lists"
    for name, codes in reportable.items():
        for c in sorted(codes - NOT_LANGUAGES):
            if c not in cld2_column:
                bad(f"CLD2 ({name}) reports {c!r}: no row")
    for c, line in cld2_column.items():
        if c not in known:
            bad(f"line {line}: cld2 {c!r} is not a code CLD2 knows")

    if not a.quiet:
        shared = {k: [r["nllb"] or r["name"] for r in rows if r["iso639_1"] == k] for k in first_by_iso1}
        shared = {k: v for k, v in shared.items() if len(v) > 1}
        print(f"languages_table: {len(rows)} rows; NLLB {len(nllb_codes)}, M2M100 {len(m2m_codes)}, "
              f"mBART-50 {len(mbart_codes)}, CLD2 {len(cld2_column)} codes ({source})")
        print(f"  iso639_1 shared by several rows (the first is the default): {shared}")
        print(f"  M2M100 codes that are not iso639_1/iso639_3: {M2M_EXCEPTIONS}")
        print(f"  model codes found only through the m2m100/mbart50 columns: {need_column}")
    for msg in problems:
        print(f"languages_table: FAIL: {msg}", file=sys.stderr)
    if problems:
        return 1
    print("languages_table: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
