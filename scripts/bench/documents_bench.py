"""The documents benchmark (scripts/bench/documents.sh runs it): test_2016_flickr.de as documents, translated by
`mtx translate --input F --output O` against the same sentences one per line (--format lines), and by
argos-translate-files with mtx's translation plugged in underneath (only the formatting method differs).

Each document holds --paragraphs paragraphs of 4 sentences; in every paragraph one word inside a sentence is bold,
one italic and (docx, odt) one a link. Per format, one markdown row for mtx:
  - BLEU of the document's paragraphs and of the plain translations joined per paragraph, against the references
    joined the same way (sacreBLEU-exact, mtx eval);
  - time: the document's, against the plain lines' plus reading and writing the zip archive (Python's zipfile);
  - formatting runs kept (a bold, italic or link run of the source is in the output, on some words) and segments
    left untranslated (a paragraph or cue whose text came back as it was);
and one for argos-translate-files: its kept runs and untranslated segments, and its time beside mtx's.
"""

import argparse
import gzip
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "documents"))
import corpus  # noqa: E402  (tests/documents/corpus.py: the paragraph readers)

FORMATS = ["docx", "pptx", "odt", "srt", "md"]


def read(path, n):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [l.rstrip("\n") for _, l in zip(range(n), f)]


def groups(lines, size=4):
    return [lines[i:i + size] for i in range(0, len(lines), size)]


def marked(paragraph, rng):
    """The paragraph's text cut around three words inside its sentences: (before, [(word, kind), between...])."""
    words = " ".join(paragraph).split(" ")
    inner = [i for i in range(1, len(words) - 1) if re.fullmatch(r"\w+", words[i])]
    picks = sorted(rng.sample(inner, min(3, len(inner))))
    pieces, at = [], 0
    for k, i in enumerate(picks):
        pieces.append(((" " if k else "") + " ".join(words[at:i]) + " ", None))
        pieces.append((words[i], ["bold", "italic", "link"][k]))
        at = i + 1
    pieces.append((" " + " ".join(words[at:]), None))
    return pieces


def make_docx(path, paras):
    import docx
    d = docx.Document()
    for pieces in paras:
        p = d.add_paragraph()
        for text, kind in pieces:
            r = p.add_run(text)
            if kind == "bold":
                r.bold = True
            elif kind == "italic":
                r.italic = True
            elif kind == "link":
                r.underline = True
                r.font.color.rgb = docx.shared.RGBColor(0, 0, 0xCC)
    d.save(path)


def make_pptx(path, paras):
    import pptx
    prs = pptx.Presentation()
    for k in range(0, len(paras), 5):
        s = prs.slides.add_slide(prs.slide_layouts[1])
        s.shapes.title.text = "Folie"
        tf = s.placeholders[1].text_frame
        for j, pieces in enumerate(paras[k:k + 5]):
            p = tf.paragraphs[0] if j == 0 else tf.add_paragraph()
            for text, kind in pieces:
                r = p.add_run()
                r.text = text
                if kind == "bold":
                    r.font.bold = True
                elif kind == "italic":
                    r.font.italic = True
                elif kind == "link":
                    r.hyperlink.address = "https://example.org/"
    prs.save(path)


def make_odt(path, paras):
    from odf.opendocument import OpenDocumentText
    from odf.style import Style, TextProperties
    from odf.text import A, P, Span
    d = OpenDocumentText()
    styles = {}
    for kind, props in (("bold", {"fontweight": "bold"}), ("italic", {"fontstyle": "italic"})):
        st = Style(name=kind, family="text")
        st.addElement(TextProperties(**props))
        d.automaticstyles.addElement(st)
        styles[kind] = st
    for pieces in paras:
        p = P()
        for text, kind in pieces:
            if kind is None:
                p.addText(text)
            elif kind == "link":
                p.addElement(A(href="https://example.org/", text=text))
            else:
                p.addElement(Span(stylename=styles[kind], text=text))
        d.text.addElement(p)
    d.save(path)


def make_srt(path, paras):
    import pysrt
    subs = pysrt.SubRipFile()
    for k, pieces in enumerate(paras):
        text = "".join(f"<b>{t}</b>" if kind == "bold" else f"<i>{t}</i>" if kind == "italic" else t
                       for t, kind in pieces)
        words = text.split(" ")
        text = " ".join(words[:len(words) // 2]) + "\n" + " ".join(words[len(words) // 2:])
        subs.append(pysrt.SubRipItem(k + 1, start=pysrt.SubRipTime(0, 0, 4 * k),
                                     end=pysrt.SubRipTime(0, 0, 4 * k + 3), text=text))
    subs.save(path, encoding="utf-8")


def make_md(path, paras):
    marks = {"bold": ("**", "**"), "italic": ("*", "*"), "link": ("[", "](https://example.org/)")}
    with open(path, "w", encoding="utf-8") as f:
        for pieces in paras:
            f.write("".join(marks[k][0] + t + marks[k][1] if k else t for t, k in pieces) + "\n\n")


MAKE = {"docx": make_docx, "pptx": make_pptx, "odt": make_odt, "srt": make_srt, "md": make_md}


def paragraph_texts(path, src=None):
    """The paragraphs of `path` that are the benchmark's (the source's with more than 3 words: no slide titles)."""
    ps = corpus.paragraphs(src or path)
    keep = [i for i, p in enumerate(ps) if len(p.text().split()) > 3]
    po = corpus.paragraphs(path) if src else ps
    return [po[i] for i in keep if i < len(po)]


def run_stats(src, out):
    """(formatting runs of the source, those kept in the output, segments, segments left untranslated)."""
    ps, po = paragraph_texts(src), paragraph_texts(out, src)
    runs = kept = untranslated = 0
    for s, o in zip(ps, po):
        keys_s = {k for t, k in s.runs if k and t.strip()}
        keys_o = {k for t, k in o.runs if k and t.strip()}
        runs += len(keys_s)
        kept += len(keys_s & keys_o)
        untranslated += o.text().split() == s.text().split()
    untranslated += max(0, len(ps) - len(po))
    return runs, kept, len(ps), untranslated


def bleu(mtx, hyps, refs, work):
    h, r = os.path.join(work, "bleu.hyp"), os.path.join(work, "bleu.ref")
    open(h, "w", encoding="utf-8").write("\n".join(hyps) + "\n")
    open(r, "w", encoding="utf-8").write("\n".join(refs) + "\n")
    out = subprocess.run([mtx, "eval", "--metric", "bleu", "--ref", r, "--hyp", h], capture_output=True,
                         text=True, check=True).stdout
    return float(re.search(r"BLEU[^=]*= *([0-9.]+)", out).group(1))


def timed(cmd, rounds):
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def zip_seconds(path, rounds):
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        with zipfile.ZipFile(path) as z:
            parts = [(i, z.read(i)) for i in z.infolist()]
        with zipfile.ZipFile(os.path.join(os.path.dirname(path), "rezip.zip"), "w", zipfile.ZIP_DEFLATED) as z:
            for i, b in parts:
                z.writestr(i, b)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def argos(args, fmt, src, work, mtx_lines):
    """argos-translate-files on `src` with mtx underneath: every text it asks for translated by mtx (its texts are
    gathered first, then translated in one `mtx translate --format text` batch, then argos runs again on them)."""
    py = args.argos_python
    script = os.path.join(work, "argos_run.py")
    with open(script, "w") as f:
        f.write('''
import json, subprocess, sys, time
from argostranslate.translate import ITranslation, Hypothesis
from argostranslatefiles import argostranslatefiles
class Lang:
    def __init__(self, code): self.code = code
class Mtx(ITranslation):
    def __init__(self, table): self.table, self.asked = table, []; self.from_lang, self.to_lang = Lang("de"), Lang("en")
    def hypotheses(self, input_text, num_hypotheses=4):
        self.asked.append(input_text)
        return [Hypothesis(self.table.get(input_text, input_text), 0)] * num_hypotheses
    def translate(self, input_text): return self.hypotheses(input_text, 1)[0].value
mode, src, table_path = sys.argv[1:4]
table = json.load(open(table_path)) if mode == "run" else {}
t = Mtx(table)
start = time.perf_counter()
out = argostranslatefiles.translate_file(t, src)
print(json.dumps({"out": out, "asked": t.asked, "seconds": time.perf_counter() - start}))
''')
    import json
    first = json.loads(subprocess.run([py, script, "gather", src, "-"], capture_output=True, text=True,
                                      check=True).stdout.splitlines()[-1])
    texts = [t for t in dict.fromkeys(first["asked"]) if t.strip()]
    inp = os.path.join(work, f"argos-{fmt}.de")
    # One text a paragraph: blank lines between them, newlines inside them kept as spaces.
    open(inp, "w", encoding="utf-8").write("\n\n".join(t.replace("\n", " ") for t in texts) + "\n")
    t0 = time.perf_counter()
    out = subprocess.run([args.mtx, "--log-level", "warn", "translate", "--ckpt", args.model, "--format", "text",
                          "--threads", str(args.threads), "--input", inp], capture_output=True, text=True,
                         check=True).stdout
    mtx_seconds = time.perf_counter() - t0
    translated = out.rstrip("\n").split("\n\n")
    table = dict(zip(texts, translated)) if len(translated) == len(texts) else {}
    table_path = os.path.join(work, f"argos-{fmt}.json")
    json.dump(table, open(table_path, "w"))
    second = json.loads(subprocess.run([py, script, "run", src, table_path], capture_output=True, text=True,
                                       check=True).stdout.splitlines()[-1])
    return second["out"], mtx_seconds + second["seconds"], len(table) == len(texts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mtx", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--paragraphs", type=int, default=250)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--argos-python", default="")
    args = ap.parse_args()
    n = args.paragraphs * 4
    # Sentences that end with a full stop, so that a paragraph's sentences are the segmenter's too (a sentence
    # without one runs into the next: text.md measures that apart).
    pairs = [(d, e) for d, e in zip(read(os.path.join(args.data, "test_2016_flickr.de.gz"), 1000),
                                    read(os.path.join(args.data, "test_2016_flickr.en.gz"), 1000)) if d.endswith(".")]
    de, en = [d for d, _ in pairs[:n]], [e for _, e in pairs[:n]]
    rng = random.Random(1)
    paras = [marked(g, rng) for g in groups(de)]
    refs = [" ".join(g) for g in groups(en)]
    plain_in = os.path.join(args.work, "plain.de")
    open(plain_in, "w", encoding="utf-8").write("\n".join(de) + "\n")
    base = [args.mtx, "--log-level", "warn", "translate", "--ckpt", args.model, "--threads", str(args.threads)]
    plain_out = subprocess.run(base + ["--input", plain_in], capture_output=True, text=True, check=True).stdout
    plain = plain_out.rstrip("\n").split("\n")
    plain_paras = [" ".join(g) for g in groups(plain)]
    plain_bleu = bleu(args.mtx, plain_paras, refs, args.work)
    plain_s = timed(base + ["--input", plain_in, "--output", os.path.join(args.work, "plain.en")], args.rounds)
    rows = []
    for fmt in args.formats.split(","):
        src = os.path.join(args.work, f"bench.{fmt}")
        MAKE[fmt](src, paras)
        out = os.path.join(args.work, f"bench.en.{fmt}")
        doc_s = timed(base + ["--input", src, "--output", out], args.rounds)
        zip_s = zip_seconds(src, args.rounds) if fmt in ("docx", "pptx", "odt") else 0.0
        hyps = [p.text() for p in paragraph_texts(out, src)]
        doc_bleu = bleu(args.mtx, [re.sub(r"\s+", " ", h).strip() for h in hyps][:len(refs)], refs, args.work)
        runs, kept, segs, untranslated = run_stats(src, out)
        row = {"fmt": fmt, "doc_bleu": doc_bleu, "plain_bleu": plain_bleu, "doc_s": doc_s, "plain_s": plain_s,
               "zip_s": zip_s, "runs": runs, "kept": kept, "segs": segs, "untranslated": untranslated}
        if args.argos_python:
            a_src = os.path.join(args.work, f"argos.{fmt}")
            shutil.copy(src, a_src)
            try:
                a_out, a_s, complete = argos(args, fmt, a_src, args.work, plain)
                if not a_out:
                    raise ValueError("argos-translate-files does not take this format")
                ar, ak, asg, au = run_stats(src, a_out)
                a_hyps = [re.sub(r"\s+", " ", p.text()).strip() for p in paragraph_texts(a_out, src)]
                row["argos"] = {"s": a_s, "runs": ar, "kept": ak, "segs": asg, "untranslated": au,
                                "bleu": bleu(args.mtx, a_hyps[:len(refs)], refs, args.work) if len(a_hyps) >= len(refs)
                                else float("nan"), "complete": complete}
            except Exception as e:  # a format argos cannot take
                row["argos"] = {"error": str(e).splitlines()[-1][:80] if str(e) else type(e).__name__}
        rows.append(row)
        print(f"documents: {fmt} done", file=sys.stderr)
    print(f"{len(paras)} paragraphs of 4 test_2016_flickr sentences ({len(de)} sentences that end with a full "
          f"stop), 3 formatting runs each; "
          f"median of {args.rounds}; --threads {args.threads}\n")
    print("| format | side | BLEU doc | BLEU plain | Δ | time doc s | plain + zip s | ratio | runs kept | untranslated |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        base_s = r["plain_s"] + r["zip_s"]
        print(f"| {r['fmt']} | mtx | {r['doc_bleu']:.2f} | {r['plain_bleu']:.2f} | {r['doc_bleu'] - r['plain_bleu']:+.2f} "
              f"| {r['doc_s']:.2f} | {r['plain_s']:.2f} + {r['zip_s']:.3f} | {r['doc_s'] / base_s:.3f} "
              f"| {r['kept']}/{r['runs']} | {r['untranslated']}/{r['segs']} |")
        a = r.get("argos")
        if a and "error" in a:
            print(f"| {r['fmt']} | argos-translate-files + mtx | - | - | - | - | - | - | - | {a['error']} |")
        elif a:
            print(f"| {r['fmt']} | argos-translate-files + mtx | {a['bleu']:.2f} | {r['plain_bleu']:.2f} | "
                  f"{a['bleu'] - r['plain_bleu']:+.2f} | {a['s']:.2f} | - | - | {a['kept']}/{a['runs']} | "
                  f"{a['untranslated']}/{a['segs']} |")


if __name__ == "__main__":
    main()
