"""Text, not sentences, from Python: paragraphs and HTML through Translator.translate_text/translate_html (the
CLI's --format text/html), Ctrl-C within a long call, and a child forked after a call."""
import html.parser
import multiprocessing
import os
import re
import signal
import threading
import time

import pytest

from conftest import run_cli


def paragraphs(lines, sizes=(2, 3, 4)):
    out, at, k = [], 0, 0
    while at < len(lines):
        n = sizes[k % len(sizes)]
        out.append(lines[at:at + n])
        at, k = at + n, k + 1
    return out


def test_paragraphs_come_back_sentence_by_sentence(model, val_lines, cli, tmp_path):
    import mtx
    t = mtx.Translator(str(model))
    groups = paragraphs([l for l in val_lines if l.endswith(".")][:20])
    texts = [" ".join(g) for g in groups]
    got = t.translate_text(texts)
    for g, text in zip(groups, got):
        assert text == " ".join(r.text for r in t.translate(g))
    # One string gives one string; whitespace and blank lines come back as they were.
    doc = "  " + texts[0] + "\n\n\n" + texts[1] + "\r\n"
    one = t.translate_text(doc)
    assert one == "  " + got[0] + "\n\n\n" + got[1] + "\r\n"
    # The CLI's --format text gives the same bytes.
    src = tmp_path / "doc.de"
    src.write_bytes(doc.encode())
    out = tmp_path / "doc.en"
    run_cli(cli, "translate", "--ckpt", model, "--format", "text", "--input", src, "--output", out)
    assert out.read_bytes() == one.encode()


class Nesting(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.ok, self.tags = [], True, []

    def handle_starttag(self, tag, attrs):
        self.stack.append(tag)
        self.tags.append((tag, attrs))

    def handle_endtag(self, tag):
        self.ok = self.ok and bool(self.stack) and self.stack.pop() == tag


def test_html_keeps_each_element_once_well_nested(model, val_lines):
    import mtx
    t = mtx.Translator(str(model))
    sentences = [l for l in val_lines if len(l.split()) > 3][:12]
    docs, plain = [], t.translate(sentences)
    for i, s in enumerate(sentences):
        words = s.split()
        tag = ['<b>', '<i>', '<a href="https://example.com/?a=1&amp;b=2">'][i % 3]
        close = ["</b>", "</i>", "</a>"][i % 3]
        words[1] = tag + words[1] + close
        docs.append("<p>" + " ".join(words) + "</p>")
    out = t.translate_html(docs)
    for doc, got, p in zip(docs, out, plain):
        n = Nesting()
        n.feed(got)
        assert n.ok and not n.stack, got
        assert len(n.tags) == 2, got  # <p> and its one inline element
        assert re.sub(r"<[^>]*>", "", got).replace("&amp;", "&") == p.text or got.startswith("<p>"), got
        if "<a " in doc:
            assert '<a href="https://example.com/?a=1&amp;b=2">' in got, got


def test_ctrl_c_stops_a_long_translate_within_a_second(model, val_lines):
    import mtx
    t = mtx.Translator(str(model))
    lines = (val_lines * 400)[:20000]
    sent = []

    def interrupt():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(1.0, interrupt)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        t.translate(lines, beam=4)
    waited = time.monotonic() - sent[0]
    timer.join()
    print(f"KeyboardInterrupt {waited:.3f} s after Ctrl-C")
    assert waited < 1.0, f"KeyboardInterrupt came {waited:.2f} s after Ctrl-C"
    # The translator is as it was.
    assert t.translate(val_lines[:2])[0].text == t.translate(val_lines[:1])[0].text


def test_ctrl_c_twice_in_translate_text_ends_the_process_at_once(model, val_lines, tmp_path):
    # A user who presses Ctrl-C twice in a long translate_text: KeyboardInterrupt at once, then the process ends by
    # SIGINT as Python's does, with no crash, abort or hang on the way (in a process of its own).
    import subprocess
    import sys
    import textwrap
    import mtx
    source = tmp_path / "lines.txt"
    source.write_text("\n".join(val_lines[:300]) + "\n", encoding="utf-8")
    script = textwrap.dedent(f"""
        import mtx
        t = mtx.Translator({str(model)!r})
        lines = open({str(source)!r}, encoding="utf-8").read().splitlines()
        texts = [" ".join(lines[i:i + 3]) for i in range(0, len(lines), 3)] * 200
        print("ready", flush=True)
        try:
            t.translate_text(texts)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            raise
        print("finished", flush=True)
    """)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(mtx.__file__)))
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    try:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        time.sleep(1.0)
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    waited = time.monotonic() - sent
    print(f"ended {waited:.2f} s after the first Ctrl-C, return code {p.returncode}")
    assert "finished" not in out, "the call ran to its end"
    # (the second Ctrl-C may land in the except block: Python's own behaviour, a second KeyboardInterrupt)
    assert "KeyboardInterrupt" in err, err[-2000:]
    assert "terminate called" not in err and "Fatal Python error" not in err, err[-2000:]
    assert p.returncode in (-signal.SIGINT, 1, 130), (p.returncode, err[-2000:])
    assert waited < 2.0, f"the process ended {waited:.2f} s after Ctrl-C"


def _child(path, lines, queue):
    import mtx  # noqa: F401  (the parent's module, inherited)
    queue.put([r.text for r in _child.translator.translate(lines)])


def test_a_child_forked_after_a_call_translates(model, val_lines):
    import mtx
    t = mtx.Translator(str(model), threads=2)
    expected = [r.text for r in t.translate(val_lines[:8])]  # the parent's OpenMP team exists now
    _child.translator = t
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    p = ctx.Process(target=_child, args=(str(model), val_lines[:8], queue))
    p.start()
    p.join(60)
    if p.is_alive():
        p.kill()
        pytest.fail("the forked child hung in translate")
    assert p.exitcode == 0
    assert queue.get(timeout=5) == expected


def test_translate_file_takes_documents_as_the_cli_does(model, val_lines, cli, tmp_path):
    """A document's extension (or format=) makes translate_file keep its formatting, with mtx translate's bytes;
    .txt stays line by line; PDF and damaged files raise ValueError (mtx's DataError) with one line naming the
    file."""
    import mtx
    t = mtx.Translator(str(model))
    lines = [l for l in val_lines if l.endswith(".")][:4]
    srt = "".join(f"{i + 1}\n00:00:0{i},000 --> 00:00:0{i},900\n{l}\n\n" for i, l in enumerate(lines))
    src = tmp_path / "film.srt"
    src.write_text(srt, encoding="utf-8")
    figures = t.translate_file(src, tmp_path / "film.en.srt")
    assert figures["format"] == "srt" and figures["paragraphs"] == 4
    out = (tmp_path / "film.en.srt").read_text(encoding="utf-8")
    assert [b.split("\n")[:2] for b in out.split("\n\n")[:4]] == [b.split("\n")[:2] for b in srt.split("\n\n")[:4]]
    assert all(l not in out for l in lines)
    run_cli(cli, "translate", "--ckpt", model, "--input", src, "--output", tmp_path / "cli.srt")
    assert (tmp_path / "cli.srt").read_bytes() == (tmp_path / "film.en.srt").read_bytes()
    # format= names it whatever the file is called.
    named = tmp_path / "subtitles"
    named.write_text(srt, encoding="utf-8")
    t.translate_file(named, tmp_path / "named.out", format="srt")
    assert (tmp_path / "named.out").read_bytes() == (tmp_path / "cli.srt").read_bytes()
    # .txt: line by line, as before.
    txt = tmp_path / "lines.txt"
    txt.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert "lines" in t.translate_file(txt, tmp_path / "lines.en.txt")
    # Refusals.
    (tmp_path / "scan.pdf").write_bytes(b"%PDF-1.4")
    with pytest.raises(ValueError, match="PDF is not translated"):
        t.translate_file(tmp_path / "scan.pdf", tmp_path / "scan.en.pdf")
    (tmp_path / "report.docx").write_bytes(b"PK\x03\x04 damaged")
    with pytest.raises(ValueError, match="report.docx: not a readable zip archive"):
        t.translate_file(tmp_path / "report.docx", tmp_path / "report.en.docx")
    docx = pytest.importorskip("docx")
    d = docx.Document()
    words = lines[0].split(" ")
    p = d.add_paragraph(" ".join(words[:2]) + " ")
    p.add_run(words[2]).bold = True  # a run of one word: it keeps a word, whatever the model writes
    p.add_run(" " + " ".join(words[3:]))
    d.add_paragraph(lines[1])
    d.save(tmp_path / "report.docx")
    t.translate_file(tmp_path / "report.docx", tmp_path / "report.en.docx")
    back = docx.Document(tmp_path / "report.en.docx")
    assert len(back.paragraphs) == 2 and any(r.bold for r in back.paragraphs[0].runs)
    assert back.paragraphs[1].text != lines[1]
    run_cli(cli, "translate", "--ckpt", model, "--input", tmp_path / "report.docx", "--output", tmp_path / "cli.docx")
    assert (tmp_path / "cli.docx").read_bytes() == (tmp_path / "report.en.docx").read_bytes()


def test_a_glossary_steers_lines_paragraphs_html_and_files_as_the_cli_does(model, cli, tmp_path):
    """mtx.Glossary (a TSV path, a dict or pairs) in translate, translate_text, translate_html and translate_file:
    every term where its source word stands (a paragraph's second sentence, a word inside inline markup), the same
    bytes as mtx translate --glossary; bad entries and pieces raise with the entry named."""
    import mtx
    t = mtx.Translator(str(model))
    tsv = tmp_path / "glossary.tsv"
    tsv.write_text("# de -> en\nHund|Hunde\tpuppy|puppies\nBuch\tnovel\n", encoding="utf-8")
    from_file = mtx.Glossary(tsv)
    from_dict = mtx.Glossary({"Hund|Hunde": "puppy|puppies", "Buch": "novel"})
    assert len(from_file) == len(from_dict) == 2
    lines = ["Ein Hund liest ein Buch.", "Zwei Hunde rennen."]
    got = [r.text for r in t.translate(lines, beam=4, glossary=from_file)]
    assert "puppy" in got[0] and "novel" in got[0] and "puppies" in got[1], got
    assert [r.text for r in t.translate(lines, beam=4, glossary=from_dict)] == got
    src = tmp_path / "lines.de"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert run_cli(cli, "translate", "--ckpt", model, "--beam", 4, "--glossary", tsv, "--input", src) == \
        "\n".join(got) + "\n"
    # A paragraph: the terms of each of its sentences.
    para = "Eine Frau liest. Ein Hund rennt.\n\nZwei Hunde lesen ein Buch.\n"
    text = t.translate_text([para], beam=4, glossary=from_file)[0]
    first, second = text.split("\n\n")
    assert "puppy" in first and "puppies" in second and "novel" in second, text
    (tmp_path / "para.de").write_text(para, encoding="utf-8")
    assert run_cli(cli, "translate", "--ckpt", model, "--beam", 4, "--format", "text", "--glossary", tsv, "--input",
                   tmp_path / "para.de") == text
    # HTML: a term's source word inside an element; each element kept once.
    page = "<p>Ein <b>Hund</b> liest ein <i>Buch</i>.</p>"
    html = t.translate_html([page], beam=4, glossary=from_file)[0]
    assert "puppy" in html and "novel" in html, html
    for tag in ("<p>", "<b>", "</b>", "<i>", "</i>", "</p>"):
        assert html.count(tag) == 1, html
    # A file: lines, and a document (.srt) through the text layer.
    figures = t.translate_file(src, tmp_path / "lines.en", beam=4, glossary=from_file)
    assert figures["lines"] == 2 and (tmp_path / "lines.en").read_text(encoding="utf-8") == "\n".join(got) + "\n"
    srt = tmp_path / "film.srt"
    srt.write_text("1\n00:00:01,000 --> 00:00:02,000\nEin Hund rennt.\n", encoding="utf-8")
    t.translate_file(srt, tmp_path / "film.en.srt", beam=4, glossary=from_file)
    assert "puppy" in (tmp_path / "film.en.srt").read_text(encoding="utf-8")
    # Refusals, one line each.
    with pytest.raises(ValueError, match=r"glossary entry 1 \("):
        mtx.Glossary({"Hund": ""})
    with pytest.raises(ValueError, match="glossary.tsv' line 1"):
        tsv.write_text("Hund puppy\n", encoding="utf-8")
        mtx.Glossary(tsv)
    with pytest.raises(ValueError, match="given as pieces"):
        t.translate([["▁Ein", "▁Hund"]], glossary=from_dict)
