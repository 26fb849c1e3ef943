#!/usr/bin/env python3
"""The text layer's benchmark (called by scripts/bench/text.sh): three markdown tables on stdout.

1. Paragraphs: --paragraphs paragraphs of 2-4 consecutive test_2016_flickr.de sentences (seeded), each sentence as
   it is, joined by one space, paragraphs apart by a blank line: `mtx translate --format text` against the same
   sentences one per line (`--format lines`): agreement, separators, BLEU, time.
2. Inline markup: --markup sentences (seeded), one word of each (not the first; a word of letters only, so never
   the last with its period) in <b>, <i> or <a href=...> in turn, each sentence a <p> on its own line, one
   document: `--format html` against the plain sentences with `--format lines`: tags kept, nesting, text, BLEU,
   time.
3. Language identification: `mtx detect` on langid_corpus.py's corpus, through langid_peers.py beside langdetect
   and lingua: all languages, those all three know, and --focus's widely used languages.

    python scripts/bench/text_bench.py --mtx build/bin/mtx --model M.pt --data DIR --work TMPDIR
        [--threads 2] [--paragraphs 150] [--markup 300] [--rounds 3] [--beam N] [--tables 1,2,3]
        [--langid-corpus data/cache/langid/corpus.tsv] [--langid-cap N] [--seed 1]

Times are each process's wall clock (model loading included), the median of --rounds runs, the two modes
alternated (which goes first swaps each round); the CLI's own clock (its "N lines in X s" log line: translation
alone) is shown beside it.
"""
import argparse
import datetime
import gzip
import html
import html.parser
import importlib.util
import math
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SENTENCE_END = re.compile(r"[.!?…][\"'»«“”„)\]]*$")
TAG = re.compile(r"<[^>]*>")
LINK = '<a href="https://example.com/x?a=1&amp;b=2">'
MARKUP = [("b", "<b>", "</b>"), ("i", "<i>", "</i>"), ("a", LINK, "</a>")]
# Table 3's widely used languages, no two of them a close pair; CLOSE_PAIRS says what is left out and why.
FOCUS = "ar bg cs de el en es fa fi fr he hi hu id it ja ko nl pl pt ro ru sv th tr uk vi zh".split()
CLOSE_PAIRS = ("bs, hr, sr, sr-Latn (one language, four standards and scripts); da, nb, nn (mutually intelligible "
               "Scandinavian, beside sv); ms (of id); sk (of cs); mk (of bg); be (of ru and uk); ca, gl, ast (of es "
               "and pt); af (of nl); az (of tr); tg (Persian in Cyrillic script); ur (of hi: one spoken language); "
               "mr, ne (Devanagari, like hi); hsb, dsb (of each other, cs and pl); zh-Hant (zh in traditional "
               "characters; simplified zh is in)")


def die(message):
    print(f"text_bench: {message}", file=sys.stderr)
    raise SystemExit(1)


def note(message):
    print(f"text_bench: {message}", file=sys.stderr, flush=True)


# ---- where and what ----

def cpu_name():
    """/proc/cpuinfo's model name, with AMD's Zen generation from its family and model where they tell it."""
    info = {}
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if not line.strip():
                break  # the first processor is enough
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    except OSError:
        return platform.processor() or platform.machine() or "?"
    name = " ".join(info.get("model name", platform.processor() or "?").split())
    try:
        family, model = int(info.get("cpu family", "-1")), int(info.get("model", "-1"))
    except ValueError:
        return name
    zen = None
    if info.get("vendor_id") == "AuthenticAMD":
        if family == 0x17:
            zen = "Zen 2" if model >= 0x30 else "Zen or Zen+"
        elif family == 0x19:
            zen = "Zen 4" if 0x10 <= model <= 0x1F or 0x60 <= model <= 0x7F or 0xA0 <= model <= 0xAF else "Zen 3"
        elif family == 0x1A and model < 0x80:
            zen = "Zen 5"
    if zen and "zen" not in name.lower():
        name += f" ({zen})"
    return name


def git_commit():
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               check=True, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "? (not a git checkout)"
    return head + (" with uncommitted changes" if dirty else "")


def read_lines(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        text = f.read()
    if "\r" in text:
        die(f"{path} has carriage returns")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def write(path, text):
    Path(path).write_text(text, encoding="utf-8", newline="")


def read(path):
    return Path(path).read_bytes().decode("utf-8")


# ---- running mtx ----

class Runner:
    def __init__(self, a):
        self.mtx, self.model, self.threads, self.beam = a.mtx, a.model, a.threads, a.beam

    def translate(self, fmt, src, out):
        """(wall s, the CLI's own s or None) of one `mtx translate` of file src into out."""
        cmd = [self.mtx, "translate", "--ckpt", self.model, "--threads", str(self.threads), "--format", fmt,
               "--input", src, "--output", out] + (["--beam", str(self.beam)] if self.beam else [])
        start = time.perf_counter()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as e:
            die(f"cannot run {self.mtx}: {e}")
        wall = time.perf_counter() - start
        if p.returncode != 0:
            die(f"exit status {p.returncode}: {' '.join(cmd)}\n{p.stderr[-4000:]}")
        for line in p.stderr.splitlines():
            if "[warn" in line or "[error" in line:
                note(f"{fmt}: {line}")
        clock = re.findall(r"\d+ lines in ([0-9.]+) s", p.stderr)
        return wall, (float(clock[-1]) if clock else None)

    def compare(self, rounds, ways):
        """ways: [(name, fmt, src, out)]. Runs them alternated, `rounds` times (the order reversed every other
        round) after one untimed run of the first; returns {name: (median wall, median CLI s, output text)} and
        checks each way's output is the same every round."""
        self.translate(ways[0][1], ways[0][2], ways[0][3])  # warm-up: the model and libraries into the page cache
        walls = {w[0]: [] for w in ways}
        clocks = {w[0]: [] for w in ways}
        outputs = {}
        for r in range(rounds):
            for name, fmt, src, out in (ways if r % 2 == 0 else ways[::-1]):
                wall, clock = self.translate(fmt, src, out)
                walls[name].append(wall)
                clocks[name].append(clock)
                text = read(out)
                if outputs.setdefault(name, text) != text:
                    die(f"{name}: round {r + 1}'s output differs from round 1's (nondeterministic translation)")
                note(f"round {r + 1}/{rounds}: {name} {wall:.2f} s")
        result = {}
        for name in walls:
            c = [x for x in clocks[name] if x is not None]
            result[name] = (statistics.median(walls[name]), statistics.median(c) if c else None, outputs[name])
        return result


def bleu(hyps, refs):
    import sacrebleu
    return sacrebleu.corpus_bleu(hyps, [refs]).score


def bleu_signature():
    import sacrebleu
    try:
        return str(sacrebleu.BLEU().get_signature())
    except Exception:
        return f"sacrebleu {sacrebleu.__version__}"


def seconds(wall, clock):
    return f"{wall:.2f}" + ("" if clock is None else f" ({clock:.2f})")


def share(k, n):
    return f"{k} / {n} ({100.0 * k / n:.1f}%)" if n else f"{k} / 0"


# ---- 1. paragraphs ----

def first_letter(s):
    m = re.search(r"[^\W\d_]", s)
    return m.group(0) if m else ""


def rough_breaks(text):
    """Sentence breaks by a rough rule where ICU cannot be loaded: after [.!?] (and closing quotes) and blanks,
    unless the next letter is lower case (Unicode's SB8)."""
    out = set()
    for m in re.finditer(r"[.!?…][\"'»”)\]]*\s+", text):
        if m.end() < len(text) and not first_letter(text[m.end():]).islower():
            out.add(m.end())
    return out


def table_paragraphs(a, runner, src, ref, work):
    rng = random.Random(a.seed)
    paras, i = [], 0
    while len(paras) < a.paragraphs:
        k = rng.randint(2, 4)
        if i + k > len(src):
            die(f"--paragraphs {a.paragraphs}: the {len(src)} test sentences make only {len(paras)} paragraphs")
        paras.append(list(range(i, i + k)))
        i += k
    used = [j for p in paras for j in p]
    for j in used:
        if not src[j].strip() or src[j] != src[j].strip() or "  " in src[j]:
            note(f"sentence {j + 1} has blanks at its ends or inside: {src[j]!r}")
    no_end = [j for j in used if not SENTENCE_END.search(src[j])]
    # Where sentence splitting is expected to differ from the lines: a boundary no splitter sees (no final
    # punctuation, or the next sentence's first letter lower case, Unicode's SB8), or a break inside a sentence
    # ("E.S.E. Electronics"). The rule: [.!?] + blank + not lower case.
    predictor = "a rule that sees a boundary only after . ! ? before a letter not in lower case"
    breaks = rough_breaks
    missed, inside, risky = [], [], set()
    for k, p in enumerate(paras):
        text, want, at = " ".join(src[j] for j in p), set(), 0
        for j in p[:-1]:
            at += len(src[j]) + 1
            want.add(at)
        got = breaks(text)
        missed += [text[:b - 1].rsplit(" ", 1)[-1] for b in sorted(want - got)]
        inside += [text[b:].split(" ", 1)[0] for b in sorted(got - want)]
        if got != want:
            risky.add(k)
    boundaries = sum(len(p) - 1 for p in paras)

    lines_in, text_in = Path(work, "para.lines.de"), Path(work, "para.text.de")
    write(lines_in, "".join(src[j] + "\n" for j in used))
    para_src = [" ".join(src[j] for j in p) for p in paras]
    write(text_in, "\n\n".join(para_src) + "\n")
    note(f"table 1: {len(used)} sentences in {len(paras)} paragraphs, {a.rounds} round(s)")
    r = runner.compare(a.rounds, [("lines", "lines", lines_in, Path(work, "para.lines.en")),
                                  ("text", "text", text_in, Path(work, "para.text.en"))])
    lines_out = r["lines"][2].split("\n")
    if lines_out[-1] != "" or len(lines_out) - 1 != len(used):
        die(f"--format lines wrote {len(lines_out) - 1} lines for {len(used)}")
    by_sentence = dict(zip(used, lines_out))
    out = r["text"][2]

    # Separators: the same lines, blank where the input's are, each paragraph one line, the final newline kept.
    in_lines, out_lines = (text_in.read_text(encoding="utf-8")).split("\n"), out.split("\n")
    problems = []
    if len(out_lines) != len(in_lines):
        problems.append(f"{len(out_lines) - 1} lines for {len(in_lines) - 1}")
    else:
        blank_moved = sum(1 for x, y in zip(in_lines, out_lines) if (x == "") != (y == ""))
        if blank_moved:
            problems.append(f"{blank_moved} lines blank in one and not the other")
        edges = sum(1 for y in out_lines if y and y != y.strip())
        if edges:
            problems.append(f"{edges} paragraphs with blanks at their ends")
    if not out.endswith("\n") or out.endswith("\n\n"):
        problems.append("the final newline differs")
    separators = "yes" if not problems else "**no**: " + "; ".join(problems)
    para_out = out_lines[0::2][:len(paras)] if len(out_lines) == len(in_lines) else None
    if para_out is None:
        blocks = [b for b in re.split(r"\n[ \t]*\n", out.strip("\n"))]
        para_out = blocks if len(blocks) == len(paras) else None
    joined = [" ".join(by_sentence[j] for j in p) for p in paras]
    refs = [" ".join(ref[j] for j in p) for p in paras]

    rows = [("sentences", f"{len(used)} in {len(paras)} paragraphs of 2-4 (seed {a.seed}); {len(no_end)} without "
                          f"final punctuation, kept as they are")]
    rows.append((f"boundaries between sentences not split by {predictor}",
                 f"{len(missed)} of {boundaries}" + (f" (after: {', '.join(missed[:12])}"
                                                      f"{', ...' if len(missed) > 12 else ''})" if missed else "")))
    rows.append(("breaks it makes inside a sentence", f"{len(inside)}" + (
        f" (before: {', '.join(inside[:12])}{', ...' if len(inside) > 12 else ''})" if inside else "")))
    bleu_lines = bleu(joined, refs)
    if para_out is None:
        rows.append(("paragraph output = its sentences' line translations joined by one space",
                     f"n/a: the output has no paragraph per input paragraph"))
        bleu_text = None
    else:
        exact = [k for k in range(len(paras)) if para_out[k] == joined[k]]
        clean = [k for k in range(len(paras)) if k not in risky]
        found = 0
        for k, p in enumerate(paras):
            at = 0
            for j in p:
                hit = para_out[k].find(by_sentence[j], at)
                if hit >= 0:
                    found += 1
                    at = hit + len(by_sentence[j])
        rows.append(("paragraph output = its sentences' line translations joined by one space",
                     f"{share(len(exact), len(paras))}; of the {len(clean)} split as the lines are by the rule above: "
                     f"{share(sum(1 for k in exact if k in clean), len(clean))}"))
        rows.append(("sentences whose line translation is in their paragraph's output (in order)",
                     share(found, len(used))))
        bleu_text = bleu(para_out, refs)
        misses = [k for k in range(len(paras)) if para_out[k] != joined[k]]
        for k in misses[:3]:
            note(f"paragraph {k + 1} differs:\n  source: {para_src[k]}\n  text:   {para_out[k]}\n"
                 f"  lines:  {joined[k]}")
    rows.append(("separators byte-identical (line count, blank lines, one line per paragraph, final newline)",
                 separators))
    rows.append(("BLEU, lines mode, sentences joined per paragraph", f"{bleu_lines:.2f}"))
    rows.append(("BLEU, text mode", "n/a" if bleu_text is None else
                 f"{bleu_text:.2f} ({bleu_text - bleu_lines:+.2f})"))
    (w_l, c_l, _), (w_t, c_t, _) = r["lines"], r["text"]
    rows.append((f"seconds, lines mode, median of {a.rounds} (CLI's own clock)", seconds(w_l, c_l)))
    rows.append(("seconds, text mode", seconds(w_t, c_t)))
    ratio = w_t / w_l
    rows.append(("time text / lines (target ≤ 1.03)", f"{ratio:.3f}" + ("" if ratio <= 1.03 else " **over**")
                 + ("" if not (c_l and c_t) else f" (CLI's clock: {c_t / c_l:.3f})")))
    print("## 1. Paragraphs: --format text against --format lines\n")
    print("BLEU for both against the references joined per paragraph the same way (" + bleu_signature() + ").\n")
    print_rows(rows)


def print_rows(rows):
    print("| measure | value |")
    print("| --- | --- |")
    for k, v in rows:
        print(f"| {k} | {v} |")
    print()


# ---- 2. inline markup ----

class Nesting(html.parser.HTMLParser):
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors = [], 0

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if self.stack and self.stack[-1] == tag:
            self.stack.pop()
        else:
            self.errors += 1

    def well_nested(self):
        self.close()
        return self.errors == 0 and not self.stack


def nested(text):
    p = Nesting()
    p.feed(text)
    return p.well_nested()


def table_markup(a, runner, src, ref, work):
    rng = random.Random(a.seed + 1)
    order = list(range(len(src)))
    rng.shuffle(order)
    chosen = []  # (sentence index, word index)
    for j in order:
        words = src[j].split(" ")
        candidates = [w for w in range(1, len(words)) if re.fullmatch(r"[^\W\d_]+(?:-[^\W\d_]+)*", words[w])]
        if candidates:
            chosen.append((j, rng.choice(candidates)))
        if len(chosen) == a.markup:
            break
    if len(chosen) < a.markup:
        die(f"--markup {a.markup}: only {len(chosen)} test sentences have a word to mark")
    chosen.sort()
    docs, expect = [], []
    for k, (j, w) in enumerate(chosen):
        _, open_tag, close_tag = MARKUP[k % len(MARKUP)]
        words = [html.escape(x, quote=False) for x in src[j].split(" ")]
        words[w] = open_tag + words[w] + close_tag
        docs.append("<p>" + " ".join(words) + "</p>")
        expect.append((open_tag, close_tag))
    plain_in, html_in = Path(work, "markup.lines.de"), Path(work, "markup.html")
    write(plain_in, "".join(src[j] + "\n" for j, _ in chosen))
    write(html_in, "".join(d + "\n" for d in docs))
    note(f"table 2: {len(chosen)} sentences, {a.rounds} round(s)")
    r = runner.compare(a.rounds, [("lines", "lines", plain_in, Path(work, "markup.lines.en")),
                                  ("html", "html", html_in, Path(work, "markup.html.en"))])
    plain = r["lines"][2].split("\n")
    if plain[-1] != "" or len(plain) - 1 != len(chosen):
        die(f"--format lines wrote {len(plain) - 1} lines for {len(chosen)}")
    plain.pop()
    out = r["html"][2]
    refs = [ref[j] for j, _ in chosen]

    out_lines = out.split("\n")
    layout = (len(out_lines) == len(docs) + 1 and out_lines[-1] == ""
              and all(re.fullmatch(r"<p>.*</p>", x) for x in out_lines[:-1]))
    blocks = re.findall(r"<p>(.*?)</p>", out, re.S)
    rows = [("sentences", f"{len(chosen)} (seed {a.seed + 1}), one word each in <b>, <i> or "
                          f"<a href=\"https://example.com/x?a=1&amp;b=2\"> in turn; one <p> a line, one document")]
    rows.append(("layout kept (one <p>...</p> a line, as in the input)", "yes" if layout else "**no**"))
    rows.append(("whole output well nested (html.parser, a stack)", "yes" if nested(out) else "**no**"))
    bleu_plain = bleu(plain, refs)
    if len(blocks) != len(docs):
        rows.append(("blocks", f"**{len(blocks)} <p> blocks in the output for {len(docs)}**: per-sentence checks "
                               "n/a"))
        bleu_html = None
    else:
        kept = nest = equal = equal_blanks = empty = 0
        inside = []
        for block, (open_tag, close_tag), t in zip(blocks, expect, plain):
            tags = TAG.findall(block)
            if tags == [open_tag, close_tag]:
                kept += 1
                words = block.split(open_tag, 1)[1].split(close_tag, 1)[0]
                n = len(html.unescape(TAG.sub("", words)).split())
                inside.append(n)
                empty += n == 0
            nest += nested("<p>" + block + "</p>")
            stripped = html.unescape(TAG.sub("", block))
            equal += stripped == t
            equal_blanks += stripped.split() == t.split()
        bleu_html = bleu([html.unescape(TAG.sub("", b)) for b in blocks], refs)
        rows.append(("tags kept: exactly its one element, opened and closed once, attributes byte-identical",
                     share(kept, len(docs))))
        rows.append(("of those, the element empty (no word inside)", f"{empty}"))
        rows.append(("words inside the element, mean (the source's: 1)",
                     f"{statistics.mean(inside):.2f}" if inside else "n/a"))
        rows.append(("sentences well nested", share(nest, len(docs))))
        rows.append(("text with tags stripped (entities unescaped) = plain translation (target ≥ 95%)",
                     share(equal, len(docs)) + ("" if equal >= 0.95 * len(docs) else " **under**")
                     + ("" if equal_blanks == equal else f"; up to blanks: {share(equal_blanks, len(docs))}")))
    rows.append(("BLEU, plain sentences (lines mode)", f"{bleu_plain:.2f}"))
    if bleu_html is None:
        rows.append(("BLEU, html mode, tags stripped", "n/a"))
    else:
        d = bleu_html - bleu_plain
        rows.append(("BLEU, html mode, tags stripped (target within 0.3)",
                     f"{bleu_html:.2f} ({d:+.2f})" + ("" if abs(d) <= 0.3 else " **over**")))
    (w_l, c_l, _), (w_h, c_h, _) = r["lines"], r["html"]
    rows.append((f"seconds, lines mode, median of {a.rounds} (CLI's own clock)", seconds(w_l, c_l)))
    rows.append(("seconds, html mode", seconds(w_h, c_h)))
    rows.append(("time html / lines", f"{w_h / w_l:.3f}" + ("" if not (c_l and c_h) else
                                                            f" (CLI's clock: {c_h / c_l:.3f})")))
    print("## 2. Inline markup: --format html against --format lines\n")
    print_rows(rows)


# ---- 3. language identification ----

def table_langid(a, work):
    corpus_path = Path(a.langid_corpus)
    if not corpus_path.is_file():
        die(f"no language-identification corpus at {corpus_path} (scripts/bench/langid_corpus.py --out ...)")
    rows = []
    for n, line in enumerate(read_lines(corpus_path), 1):
        lang, tab, text = line.partition("\t")
        if not tab or not lang or not text or "\t" in text:
            die(f"{corpus_path}:{n}: not lang<TAB>sentence")
        rows.append((lang, text))
    if a.langid_cap:
        kept, seen = [], {}
        for lang, text in rows:
            seen[lang] = seen.get(lang, 0) + 1
            if seen[lang] <= a.langid_cap:
                kept.append((lang, text))
        rows = kept
        corpus_path = Path(work, "langid.tsv")
        write(corpus_path, "".join(f"{lang}\t{text}\n" for lang, text in rows))
    sentences = Path(work, "langid.txt")
    write(sentences, "".join(text + "\n" for _, text in rows))
    answers = Path(work, "langid.mtx")
    note(f"table 3: mtx detect on {len(rows)} sentences")

    def detect(path, out):
        start = time.perf_counter()
        try:
            with open(out, "wb") as f:
                p = subprocess.run([a.mtx, "detect", "--input", str(path)], stdout=f, stderr=subprocess.PIPE)
        except OSError as e:
            die(f"cannot run {a.mtx}: {e}")
        wall = time.perf_counter() - start
        if p.returncode != 0:
            die(f"mtx detect --input {path}: exit status {p.returncode}\n{p.stderr.decode(errors='replace')[-4000:]}")
        return wall

    detect(sentences, answers)
    got = read_lines(answers)
    if len(got) != len(rows):
        die(f"mtx detect wrote {len(got)} lines for {len(rows)}")
    # Time per sentence: the corpus repeated to 200,000+ lines, less a run on no input (the process's start).
    times = max(1, math.ceil(200000 / len(rows)))
    repeated, empty = Path(work, "langid.repeated.txt"), Path(work, "langid.empty.txt")
    write(repeated, "".join(text + "\n" for _, text in rows) * times)
    write(empty, "")
    full, start = [], []
    for _ in range(a.rounds):
        full.append(detect(repeated, os.devnull))
        start.append(detect(empty, os.devnull))
    s_full, s_start = statistics.median(full), statistics.median(start)
    ms = 1000.0 * (s_full - s_start) / (len(rows) * times)
    if ms <= 0:
        note(f"mtx detect: {s_full:.3f} s on {len(rows) * times} lines, {s_start:.3f} s on none: no time left")
        ms = 0.0
    focus = [x for x in FOCUS if any(lang == x for lang, _ in rows)]
    missing = [x for x in FOCUS if x not in focus]
    about = (f"mtx detect (CLD2, libcld2.so's tables, kCLDFlagBestEffort; its ms/sentence from the process's wall "
             f"clock on the corpus {times} times over less its start on no input, {s_start:.2f} s, the load column; "
             f"median of {a.rounds})")
    cmd = [sys.executable, str(ROOT / "scripts/bench/langid_peers.py"), "--in", str(corpus_path),
           "--answers", f"mtx={answers}@{ms:.6f}@{s_start:.3f}", "--supported", "mtx=mtx", "--about", f"mtx={about}",
           "--focus", ",".join(focus)]
    note("table 3: " + " ".join(cmd[1:]))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        die(f"langid_peers.py: exit status {p.returncode}")
    print("## 3. Language identification: mtx detect (CLD2), langdetect and lingua\n")
    print("(i) every language of the corpus: the per-language table; (ii) the languages all three know: the list and "
          "the summary's second column; (iii) widely used languages, no two a close pair: the last table. "
          f"Left out of (iii) as close pairs: {CLOSE_PAIRS}; the corpus's other languages are less widely used."
          + (f" Not in this corpus: {' '.join(missing)}." if missing else "") + "\n")
    print(re.sub(r"^## ", "### ", p.stdout, flags=re.M).rstrip("\n") + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mtx", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True, help="the folder of test_2016_flickr.de.gz and .en.gz")
    p.add_argument("--work", required=True, help="a folder for the intermediate files")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--paragraphs", type=int, default=150)
    p.add_argument("--markup", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--beam", type=int, help="default: the checkpoint's")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tables", default="1,2,3")
    p.add_argument("--langid-corpus", default=str(ROOT / "data/cache/langid/corpus.tsv"))
    p.add_argument("--langid-cap", type=int, default=0, help="at most N sentences a language (a quick try)")
    a = p.parse_args()
    tables = {x.strip() for x in a.tables.split(",") if x.strip()}
    if not tables or tables - {"1", "2", "3"}:
        die(f"--tables {a.tables}: a list of 1, 2, 3")
    if a.rounds < 1 or a.paragraphs < 1 or a.markup < 1 or a.threads < 0:
        die("--rounds, --paragraphs and --markup must be positive, --threads not negative")
    need = ["sacrebleu"] + (["langdetect", "lingua"] if "3" in tables else [])
    lacking = [m for m in need if importlib.util.find_spec(m) is None]
    if lacking:
        die(f"{sys.executable} lacks {' '.join(lacking)} (pip install sacrebleu langdetect lingua-language-detector)")
    for path in (a.mtx, a.model):
        if not Path(path).is_file():
            die(f"no such file: {path}")

    try:
        version = subprocess.run([a.mtx, "--version"], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        die(f"{a.mtx} --version: {e}")
    version = ", ".join(version.splitlines()[:2])
    built = datetime.datetime.fromtimestamp(Path(a.mtx).stat().st_mtime).astimezone()
    print("# mtx text layer: paragraphs, inline markup, language identification\n")
    now = datetime.datetime.now().astimezone()
    print(f"CPU: {cpu_name()}, {os.cpu_count()} logical cores; {now:%Y-%m-%d %H:%M %Z}; commit {git_commit()}; "
          f"{a.mtx} ({version}; built {built:%Y-%m-%d %H:%M}); model {a.model}; --threads {a.threads}; "
          f"beam {a.beam or 'the checkpoint’s'}. Seconds: each process's wall clock, model load included, median of "
          f"{a.rounds} round{'s' if a.rounds > 1 else ''}, the two modes alternated, after a warm-up run; in brackets "
          "the CLI's own clock (translation alone).\n", flush=True)
    src = ref = None
    if tables & {"1", "2"}:
        src = read_lines(Path(a.data, "test_2016_flickr.de.gz"))
        ref = read_lines(Path(a.data, "test_2016_flickr.en.gz"))
        if len(src) != len(ref):
            die(f"{a.data}: {len(src)} German and {len(ref)} English test sentences")
    runner = Runner(a)
    if "1" in tables:
        table_paragraphs(a, runner, src, ref, a.work)
        sys.stdout.flush()
    if "2" in tables:
        table_markup(a, runner, src, ref, a.work)
        sys.stdout.flush()
    if "3" in tables:
        table_langid(a, a.work)


if __name__ == "__main__":
    main()
