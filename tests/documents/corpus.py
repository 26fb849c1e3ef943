"""Documents written by the PyPI libraries people make them with, and the checks of their translations.

    corpus.py make DIR                 writes report.docx (python-docx), slides.pptx (python-pptx), letter.odt and
                                       deck.odp (odfpy), film.srt (pysrt), film.vtt, page.html and notes.txt
    corpus.py check IN OUT --mode M    checks OUT, IN translated:
        both modes: the PyPI reader opens OUT; the structure is IN's (paragraph, table, cell, slide, cue counts,
                    paragraph styles, cue timings); every formatting run (bold, italic, link, span) is there;
        fake:  IN was translated by the tests' fake translator (each sentence's words upper-cased in reverse order,
               each word aligned to its source word): every text is translated, and every formatting run holds
               exactly the upper-cased words of its source run (a run moved onto other words fails);
        model: a real model translated IN: no paragraph with words is left as it was.
    corpus.py terms IN OUT GLOSSARY    checks OUT, IN translated with `mtx translate --glossary GLOSSARY` (a TSV,
                                       forms separated by '|'): every paragraph of IN that holds a source form as a
                                       whole word holds one of its entry's target forms.
Prints one line per problem and exits 1 when there is any.
"""

import collections
import re
import sys
import zipfile

from lxml import etree

SENTENCES = [
    "Ein Mann mit einem roten Hut sitzt auf einer Bank.",
    "Zwei Hunde spielen im Schnee.",
    "Eine Frau liest ein Buch im Park.",
    "Kinder spielen Fußball auf der Straße.",
    "Ein Junge springt ins Wasser.",
    "Eine Gruppe von Menschen steht vor einem Gebäude.",
]

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"


def up(word):
    return "".join(c.upper() if c.isascii() else c for c in word)


# ---- making ---------------------------------------------------------------------------------------------------


def make_docx(path):
    import docx
    from docx.enum.text import WD_BREAK  # noqa: F401  (python-docx's own module layout)

    d = docx.Document()
    d.sections[0].header.paragraphs[0].text = "Ein Bericht über Hunde im Park."
    d.add_heading("Hunde im Park", level=1)
    p = d.add_paragraph("Ein Mann mit einem ")
    p.add_run("roten").bold = True
    p.add_run(" Hut sitzt auf einer ")
    p.add_run("Bank").italic = True
    p.add_run(". Zwei Hunde spielen im Schnee.")
    # A link run inside a sentence (python-docx writes no hyperlinks: the XML it would be).
    p2 = d.add_paragraph("Eine Frau liest ")
    rid = d.part.relate_to("https://example.org/", docx.opc.constants.RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
    link = docx.oxml.OxmlElement("w:hyperlink")
    link.set(docx.oxml.ns.qn("r:id"), rid)
    run = docx.oxml.OxmlElement("w:r")
    props = docx.oxml.OxmlElement("w:rPr")
    style = docx.oxml.OxmlElement("w:u")
    style.set(docx.oxml.ns.qn("w:val"), "single")
    props.append(style)
    run.append(props)
    t = docx.oxml.OxmlElement("w:t")
    t.text = "ein Buch"
    run.append(t)
    link.append(run)
    p2._p.append(link)
    p2.add_run(" im Park.")
    d.add_paragraph("Kinder spielen Fußball auf der Straße.", style="List Bullet")
    d.add_paragraph("Ein Junge springt ins Wasser.", style="List Bullet")
    table = d.add_table(rows=2, cols=2)
    for i, cell in enumerate(c for row in table.rows for c in row.cells):
        cell.text = SENTENCES[i]
    table.cell(1, 1).paragraphs[0].runs[0].bold = True
    tabbed = d.add_paragraph("Eine Gruppe von Menschen")
    tabbed.add_run().add_tab()
    tabbed.add_run("steht vor einem Gebäude.")
    d.add_paragraph("Ein Mann sitzt auf einer Bank.")  # the footnote's anchor, added below
    d.save(path)
    add_footnote(path, "Zwei Hunde spielen im Schnee.")


def add_footnote(path, text):
    """A footnote, as Word writes one (python-docx has no API for footnotes)."""
    with zipfile.ZipFile(path) as z:
        parts = {n: z.read(n) for n in z.namelist()}
    ns = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    parts["word/footnotes.xml"] = (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:footnotes {ns}>'
        '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>'
        '<w:footnote w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/></w:r></w:p>'
        "</w:footnote>"
        f'<w:footnote w:id="1"><w:p><w:r><w:rPr><w:vertAlign w:val="superscript"/></w:rPr><w:footnoteRef/></w:r>'
        f'<w:r><w:t xml:space="preserve"> {text}</w:t></w:r></w:p></w:footnote></w:footnotes>'
    ).encode()
    types = parts["[Content_Types].xml"].decode()
    types = types.replace(
        "</Types>",
        '<Override PartName="/word/footnotes.xml" ContentType="application/vnd.openxmlformats-officedocument.'
        'wordprocessingml.footnotes+xml"/></Types>',
    )
    parts["[Content_Types].xml"] = types.encode()
    rels = parts["word/_rels/document.xml.rels"].decode()
    rels = rels.replace(
        "</Relationships>",
        '<Relationship Id="rIdFootnotes" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
        'footnotes" Target="footnotes.xml"/></Relationships>',
    )
    parts["word/_rels/document.xml.rels"] = rels.encode()
    body = parts["word/document.xml"].decode()
    anchor = "Ein Mann sitzt auf einer Bank.</w:t></w:r>"
    assert anchor in body
    body = body.replace(
        anchor,
        anchor + '<w:r><w:rPr><w:vertAlign w:val="superscript"/></w:rPr><w:footnoteReference w:id="1"/></w:r>',
    )
    parts["word/document.xml"] = body.encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for n, b in parts.items():
            z.writestr(n, b)


def make_pptx(path):
    import pptx
    from pptx.util import Inches

    prs = pptx.Presentation()
    s = prs.slides.add_slide(prs.slide_layouts[0])
    s.shapes.title.text = "Hunde im Park"
    s.placeholders[1].text = "Ein Bericht über Hunde."
    s = prs.slides.add_slide(prs.slide_layouts[1])
    s.shapes.title.text = "Was wir sahen"
    body = s.placeholders[1].text_frame
    para = body.paragraphs[0]
    para.text = "Ein Mann mit einem "
    r = para.add_run()
    r.text = "roten"
    r.font.bold = True
    r = para.add_run()
    r.text = " Hut sitzt auf einer Bank."
    body.add_paragraph().text = "Zwei Hunde spielen im Schnee."
    s.notes_slide.notes_text_frame.text = "Eine Frau liest ein Buch im Park."
    s = prs.slides.add_slide(prs.slide_layouts[5])
    s.shapes.title.text = "Eine Tabelle"
    table = s.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(6), Inches(2)).table
    for i in range(4):
        table.cell(i // 2, i % 2).text = SENTENCES[i + 2 if i < 4 else 0]
    prs.save(path)


def make_odt(path):
    from odf.opendocument import OpenDocumentText
    from odf.style import MasterPage, PageLayout, Style, TextProperties, Header
    from odf.table import Table, TableCell, TableColumn, TableRow
    from odf.text import A, H, List, ListItem, Note, NoteBody, NoteCitation, P, Span

    d = OpenDocumentText()
    bold = Style(name="Bold", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    italic = Style(name="Italic", family="text")
    italic.addElement(TextProperties(fontstyle="italic"))
    d.automaticstyles.addElement(bold)
    d.automaticstyles.addElement(italic)
    layout = PageLayout(name="Layout")
    d.automaticstyles.addElement(layout)
    master = MasterPage(name="Standard", pagelayoutname=layout)
    header = Header()
    header.addElement(P(text="Ein Bericht über Hunde im Park."))
    master.addElement(header)
    d.masterstyles.addElement(master)
    d.text.addElement(H(outlinelevel=1, text="Hunde im Park"))
    p = P(text="Ein Mann mit einem ")
    p.addElement(Span(stylename=bold, text="roten"))
    p.addText(" Hut sitzt auf einer ")
    p.addElement(Span(stylename=italic, text="Bank"))
    p.addText(". Zwei Hunde spielen im Schnee.")
    d.text.addElement(p)
    p = P(text="Eine Frau liest ")
    p.addElement(A(href="https://example.org/", text="ein Buch"))
    p.addText(" im Park.")
    note = Note(id="ftn1", noteclass="footnote")
    note.addElement(NoteCitation(text="1"))
    body = NoteBody()
    body.addElement(P(text="Zwei Hunde spielen im Schnee."))
    note.addElement(body)
    p.addElement(note)
    d.text.addElement(p)
    items = List()
    for s in SENTENCES[3:5]:
        item = ListItem()
        item.addElement(P(text=s))
        items.addElement(item)
    d.text.addElement(items)
    table = Table(name="T")
    table.addElement(TableColumn(numbercolumnsrepeated=2))
    for r in range(2):
        row = TableRow()
        for c in range(2):
            cell = TableCell()
            cell.addElement(P(text=SENTENCES[2 * r + c]))
            row.addElement(cell)
        table.addElement(row)
    d.text.addElement(table)
    d.save(path)


def make_odp(path):
    from odf.draw import Frame, Page, TextBox
    from odf.opendocument import OpenDocumentPresentation
    from odf.style import MasterPage, PageLayout, PageLayoutProperties, Style, TextProperties
    from odf.text import P, Span

    d = OpenDocumentPresentation()
    layout = PageLayout(name="Layout")
    layout.addElement(PageLayoutProperties(pagewidth="28cm", pageheight="21cm"))
    d.automaticstyles.addElement(layout)
    master = MasterPage(name="Master", pagelayoutname=layout)
    d.masterstyles.addElement(master)
    bold = Style(name="Bold", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    d.automaticstyles.addElement(bold)
    for i in range(2):
        page = Page(name=f"Seite{i + 1}", masterpagename=master)
        frame = Frame(width="20cm", height="10cm", x="2cm", y="2cm")
        box = TextBox()
        p = P(text="Ein Mann mit einem ")
        p.addElement(Span(stylename=bold, text="roten"))
        p.addText(" Hut sitzt auf einer Bank.")
        box.addElement(p)
        box.addElement(P(text=SENTENCES[1 + i]))
        frame.addElement(box)
        page.addElement(frame)
        d.presentation.addElement(page)
    d.save(path)


def make_srt(path):
    import pysrt

    subs = pysrt.SubRipFile()
    texts = [
        "Ein Mann mit einem roten Hut\nsitzt auf einer Bank.",
        "Zwei Hunde spielen\nim <i>Schnee</i>.",
        "Eine Frau liest ein Buch im Park.",
    ]
    for i, t in enumerate(texts):
        subs.append(pysrt.SubRipItem(i + 1, start=pysrt.SubRipTime(0, 0, 2 * i), end=pysrt.SubRipTime(0, 0, 2 * i + 1, 500), text=t))
    subs.save(path, encoding="utf-8")


def make_vtt(path):
    with open(path, "w", encoding="utf-8") as f:
        f.write(
            "WEBVTT\n\nNOTE made by the corpus script\n\n"
            "1\n00:00:00.000 --> 00:00:01.500\nEin Mann mit einem <b>roten</b> Hut\nsitzt auf einer Bank.\n\n"
            "00:00:02.000 --> 00:00:03.500 align:start\n<v Anna>Zwei Hunde spielen im Schnee.\n"
        )


def make_html(path):
    with open(path, "w", encoding="utf-8") as f:
        f.write(
            "<!DOCTYPE html>\n<html><head><title>Hunde im Park</title></head><body>\n"
            "<h1>Hunde im Park</h1>\n<p>Ein Mann mit einem <b>roten</b> Hut sitzt auf einer Bank.</p>\n"
            "<ul><li>Zwei Hunde spielen im Schnee.</li></ul>\n<pre>code bleibt</pre>\n</body></html>\n"
        )


def make_txt(path):
    with open(path, "w", encoding="utf-8") as f:
        f.write(" ".join(SENTENCES[:3]) + "\n\n" + " ".join(SENTENCES[3:]) + "\n")


def make_md(path):
    with open(path, "w", encoding="utf-8") as f:
        f.write(
            "# Hunde im *Park*\n\n"
            "Ein Mann mit einem **roten** Hut sitzt auf einer [Bank](https://example.org/ \"Bank\").\n"
            "Zwei Hunde spielen im Schnee.\n\n"
            "> Eine Frau liest ein Buch im Park.\n\n"
            "- Kinder spielen Fußball auf der Straße.\n"
            "- Ein Junge springt ins _Wasser_.\n\n"
            "Mit `mtx translate` übersetzt man eine Datei.\n\n"
            "| Wer | Was |\n|---|---|\n| Ein Hund | Zwei Katzen |\n\n"
            "```sh\nmtx translate --input bericht.md\n```\n"
        )


MAKERS = {
    "report.docx": make_docx,
    "slides.pptx": make_pptx,
    "letter.odt": make_odt,
    "deck.odp": make_odp,
    "film.srt": make_srt,
    "film.vtt": make_vtt,
    "page.html": make_html,
    "notes.txt": make_txt,
    "readme.md": make_md,
}


# ---- reading --------------------------------------------------------------------------------------------------


class Para:
    """A paragraph: its style and its runs as (text, formatting key)."""

    def __init__(self, style):
        self.style = style
        self.runs = []

    def text(self):
        return "".join(t for t, _ in self.runs)


def ooxml_paragraphs(path, parts_re, ns):
    out = []
    with zipfile.ZipFile(path) as z:
        natural = lambda n: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", n)]  # slide2 before slide10
        for name in sorted((n for n in z.namelist() if re.fullmatch(parts_re, n)), key=natural):
            root = etree.fromstring(z.read(name))
            for p in root.iter(ns + "p"):
                ppr = p.find(ns + "pPr")
                para = Para(name + ":" + (etree.tostring(ppr).decode() if ppr is not None else ""))
                for t in p.iter(ns + "t", ns + "tab", ns + "br"):
                    run = t.getparent()
                    rpr = run.find(ns + "rPr")
                    key = etree.tostring(rpr).decode() if rpr is not None else ""
                    key = re.sub(r' xmlns:\w+="[^"]*"', "", key)
                    key = re.sub(r' lang="[^"]*"', "", key)
                    anc = run.getparent()
                    while anc is not None and anc is not p:
                        if anc.tag == W + "hyperlink":
                            key = "link:" + key
                        anc = anc.getparent()
                    if any(x.tag == W + "fldChar" for x in run.itersiblings(preceding=True)):
                        continue
                    para.runs.append((t.text or "" if t.tag == ns + "t" else " ", key))
                out.append(para)
    return out


def odf_paragraphs(path):
    out = []
    with zipfile.ZipFile(path) as z:
        for name in ("styles.xml", "content.xml"):
            root = etree.fromstring(z.read(name))
            for p in root.iter(TEXT + "p", TEXT + "h"):
                para = Para(name + ":" + str(p.get(TEXT + "style-name")) + p.tag)

                def walk(node, key):
                    if node.text:
                        para.runs.append((node.text, key))
                    for c in node:
                        if c.tag in (TEXT + "span", TEXT + "a"):
                            walk(c, key + "/" + (c.get(TEXT + "style-name") or "") + c.tag)
                        elif c.tag in (TEXT + "s", TEXT + "tab", TEXT + "line-break"):
                            para.runs.append((" ", key))
                        if c.tail:
                            para.runs.append((c.tail, key))

                walk(p, "")
                out.append(para)
    return out


def subtitle_paragraphs(path):
    out = []
    text = open(path, encoding="utf-8-sig").read().replace("\r\n", "\n")
    for block in text.strip().split("\n\n"):
        lines = block.split("\n")
        timing = [i for i, l in enumerate(lines) if "-->" in l]
        if not timing:
            continue
        para = Para("\n".join(lines[: timing[0] + 1]) + f"|{len(lines) - timing[0] - 1} lines")
        cue = " ".join(lines[timing[0] + 1 :])
        pos, stack = 0, []
        for m in re.finditer(r"<(/?)([a-z]+)[^>]*>", cue):
            if m.start() > pos:
                para.runs.append((cue[pos : m.start()], "/".join(stack)))
            if m.group(1):
                if stack:
                    stack.pop()
            elif m.group(2) != "v":
                stack.append(m.group(2))
            pos = m.end()
        para.runs.append((cue[pos:], "/".join(stack)))
        out.append(para)
    return out


def html_paragraphs(path):
    html = open(path, encoding="utf-8").read()
    out = []
    for m in re.finditer(r"<(title|h1|p|li|pre)>(.*?)</\1>", html, re.S):
        para = Para(m.group(1))
        pos, stack = 0, []
        for t in re.finditer(r"<(/?)(\w+)[^>]*>", m.group(2)):
            para.runs.append((m.group(2)[pos : t.start()], "/".join(stack)))
            if t.group(1):
                stack.pop()
            else:
                stack.append(t.group(2))
            pos = t.end()
        para.runs.append((m.group(2)[pos:], "/".join(stack)))
        out.append(para)
    return out


def md_paragraphs(path):
    """Paragraphs, headings, quotes, list items and table cells of the corpus' Markdown; fenced code is a
    paragraph of style "pre" (kept as it is); code spans are left out of the runs (they must come back as written:
    md_code_spans)."""
    out = []
    text = open(path, encoding="utf-8").read()
    fenced = re.findall(r"```.*?```", text, re.S)
    text = re.sub(r"```.*?```", "\n\n", text, flags=re.S)
    for block in re.split(r"\n\s*\n", text):
        lines = [l for l in block.split("\n") if l.strip()]
        if not lines:
            continue
        if lines[0].startswith("|"):
            units = [("cell", c.strip()) for l in lines if not re.fullmatch(r"[|\- :]+", l)
                     for c in l.strip("|").split("|")]
        elif lines[0].startswith("- "):
            units = [("item", l[2:]) for l in lines]
        elif lines[0].startswith("#"):
            units = [("h", lines[0].lstrip("#").strip())]
        elif lines[0].startswith(">"):
            units = [("quote", " ".join(l.lstrip("> ") for l in lines))]
        else:
            units = [("p", " ".join(lines))]
        for style, unit in units:
            para = Para(style)
            unit = re.sub(r"`[^`]*`", " ", unit)
            pos = 0
            for m in re.finditer(r"\*\*(.+?)\*\*|\*(.+?)\*|_(.+?)_|\[(.+?)\]\([^)]*\)", unit):
                para.runs.append((unit[pos:m.start()], ""))
                key = "strong" if m.group(1) else "em" if m.group(2) or m.group(3) else "link"
                para.runs.append((next(g for g in m.groups() if g), key))
                pos = m.end()
            para.runs.append((unit[pos:], ""))
            out.append(para)
    for code in fenced:
        para = Para("pre")
        para.runs.append((code, ""))
        out.append(para)
    return out


def md_code_spans(path):
    return re.findall(r"`[^`]+`", re.sub(r"```.*?```", "", open(path, encoding="utf-8").read(), flags=re.S))


def txt_paragraphs(path):
    out = []
    for text in open(path, encoding="utf-8").read().strip().split("\n\n"):
        out.append(Para("p"))
        out[-1].runs.append((text, ""))
    return out


def paragraphs(path):
    ext = path.rsplit(".", 1)[-1]
    if ext == "docx":
        return ooxml_paragraphs(path, r"word/(document|header\d*|footer\d*|footnotes|endnotes|comments)\.xml", W)
    if ext == "pptx":
        return ooxml_paragraphs(path, r"ppt/(slides/slide|notesSlides/notesSlide)\d+\.xml", A)
    if ext in ("odt", "odp"):
        return odf_paragraphs(path)
    if ext in ("srt", "vtt"):
        return subtitle_paragraphs(path)
    if ext == "html":
        return html_paragraphs(path)
    if ext == "md":
        return md_paragraphs(path)
    return txt_paragraphs(path)


def open_with_pypi(path):
    """The PyPI reader of the format opens the file; returns its structure counts."""
    ext = path.rsplit(".", 1)[-1]
    if ext == "docx":
        import docx

        d = docx.Document(path)
        return {
            "paragraphs": len(d.paragraphs),
            "tables": len(d.tables),
            "cells": sum(len(r.cells) for t in d.tables for r in t.rows),
            "styles": [p.style.name for p in d.paragraphs],
            "headers": [len(s.header.paragraphs) for s in d.sections],
        }
    if ext == "pptx":
        import pptx

        prs = pptx.Presentation(path)
        return {
            "slides": len(prs.slides),
            "shapes": [len(s.shapes) for s in prs.slides],
            "paragraphs": [sum(len(sh.text_frame.paragraphs) for sh in s.shapes if sh.has_text_frame) for s in prs.slides],
        }
    if ext in ("odt", "odp"):
        from odf import opendocument, text

        d = opendocument.load(path)
        return {"paragraphs": len(d.getElementsByType(text.P)), "headings": len(d.getElementsByType(text.H))}
    if ext == "srt":
        import pysrt

        subs = pysrt.open(path, encoding="utf-8")
        return {"cues": [(s.index, str(s.start), str(s.end), s.text.count("\n")) for s in subs]}
    return {}


# ---- checking -------------------------------------------------------------------------------------------------


def words(text):
    """Words without the punctuation next to them: a run placed on words holds whole words, "Bank" of "Bank."."""
    return [w for w in (w.strip(".,;:!?\"'()") for w in text.split()) if w]


def check(src, out, mode):
    problems = []
    try:
        before, after = open_with_pypi(src), open_with_pypi(out)
    except Exception as e:  # the reader could not open the output
        return [f"{out}: the PyPI reader cannot open it: {e}"]
    if before != after:
        problems.append(f"{out}: structure {after} is not the source's {before}")
    if src.endswith(".md") and md_code_spans(src) != md_code_spans(out):
        problems.append(f"{out}: code spans {md_code_spans(out)} are not the source's {md_code_spans(src)}")
    ps, po = paragraphs(src), paragraphs(out)
    if len(ps) != len(po):
        return problems + [f"{out}: {len(po)} paragraphs, the source has {len(ps)}"]
    for i, (s, o) in enumerate(zip(ps, po)):
        where = f"{out}: paragraph {i + 1} ({s.text()[:40]!r})"
        if s.style != o.style:
            problems.append(f"{where}: style {o.style!r} is not the source's {s.style!r}")
        if s.style == "pre":  # <pre> and fenced code are kept as they are
            if o.text() != s.text():
                problems.append(f"{where}: code changed to {o.text()[:60]!r}")
            continue
        if not re.search(r"[A-Za-zÄÖÜäöüß]{2}", s.text()):
            continue
        if o.text().strip() == s.text().strip():
            problems.append(f"{where}: left untranslated")
            continue
        by_key_s, by_key_o = collections.defaultdict(list), collections.defaultdict(list)
        for t, k in s.runs:
            by_key_s[k] += words(t)
        for t, k in o.runs:
            by_key_o[k] += words(t)
        formatted_s = {k for k, v in by_key_s.items() if v}
        formatted_o = {k for k, v in by_key_o.items() if v}
        if len(formatted_s) > 1 and formatted_s != formatted_o:
            problems.append(f"{where}: formatting runs {sorted(formatted_o)} are not the source's {sorted(formatted_s)}")
        if mode == "fake":
            all_s = sorted(up(w) for w in words(s.text()))
            if sorted(words(o.text())) != all_s:
                problems.append(f"{where}: words {o.text()!r} are not the source's, translated")
            for k in formatted_s:
                want = sorted(up(w) for w in by_key_s[k])
                got = sorted(by_key_o.get(k, []))
                if len(formatted_s) > 1 and got != want:
                    problems.append(f"{where}: the run {k[:60]!r} holds {got}, its source words translated are {want}")
    return problems


def terms(src, out, glossary):
    entries = []
    for line in open(glossary, encoding="utf-8"):
        line = line.rstrip("\r\n")
        if line and not line.startswith("#"):
            source, target = line.split("\t")
            entries.append((source.split("|"), target.split("|")))
    ps, po = paragraphs(src), paragraphs(out)
    if len(ps) != len(po):
        return [f"{out}: {len(po)} paragraphs, the source has {len(ps)}"]
    problems, held = [], 0
    for i, (s, o) in enumerate(zip(ps, po)):
        if s.style == "pre":
            continue
        for sources, targets in entries:
            if not any(re.search(r"(?<!\w)" + re.escape(f) + r"(?!\w)", s.text()) for f in sources):
                continue
            held += 1
            if not any(re.search(r"(?<!\w)" + re.escape(t) + r"(?!\w)", o.text(), re.IGNORECASE) for t in targets):
                problems.append(f"{out}: paragraph {i + 1} ({s.text()[:40]!r}) lacks {'|'.join(targets)}: "
                                f"{o.text()[:80]!r}")
    if held == 0:
        problems.append(f"{src}: no paragraph holds a glossary word (the check checks nothing)")
    return problems


def main():
    if sys.argv[1] == "terms":
        problems = terms(sys.argv[2], sys.argv[3], sys.argv[4])
        for p in problems:
            print(p)
        return 1 if problems else 0
    if sys.argv[1] == "make":
        import os

        os.makedirs(sys.argv[2], exist_ok=True)
        for name, make in MAKERS.items():
            make(os.path.join(sys.argv[2], name))
        return 0
    if sys.argv[1] == "check":
        mode = sys.argv[sys.argv.index("--mode") + 1] if "--mode" in sys.argv else "model"
        problems = check(sys.argv[2], sys.argv[3], mode)
        for p in problems:
            print(p)
        return 1 if problems else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
