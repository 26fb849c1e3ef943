"""Two LibreTranslate clients from PyPI against a live `mtx serve` of a German -> English model (env MTX_URL;
scripts/checks/libretranslate_api.sh starts it), used as their users call them:

- libretranslatepy: LibreTranslateAPI(url).translate (a urlencoded POST), languages (a GET with an empty
  urlencoded body) and detect (a urlencoded POST /detect);
- deep-translator: LibreTranslator(custom_url=...).translate and translate_batch (a POST with every field in the
  query string and no body). Its LibreTranslator has no language detection.

A translation must be the one the server gives a plain JSON POST /translate of the same text: English, not
empty, not the input.
"""
import pytest
import requests

SENTENCES = ["Ein Hund läuft.", "Zwei Männer spielen Fußball im Park."]
DETECT_TEXT = "Ein Hund läuft durch das Gras."
API_KEY = "mtx-libretranslate-check"  # deep-translator will not start without one; a server without keys ignores it


@pytest.fixture(scope="module")
def reference(mtx_url):
    """Text -> the server's translation of it, asked as JSON."""
    r = requests.post(mtx_url + "/translate", json={"q": SENTENCES, "source": "de", "target": "en"}, timeout=120)
    assert r.status_code == 200, r.text
    out = r.json()["translatedText"]
    assert isinstance(out, list) and len(out) == len(SENTENCES), out
    for src, got in zip(SENTENCES, out):
        assert got.strip() and got != src, (src, got)
    return dict(zip(SENTENCES, out))


def test_libretranslatepy_translate(mtx_url, reference):
    from libretranslatepy import LibreTranslateAPI
    got = LibreTranslateAPI(mtx_url).translate(SENTENCES[0], "de", "en")
    assert got == reference[SENTENCES[0]]


def test_libretranslatepy_languages(mtx_url):
    from libretranslatepy import LibreTranslateAPI
    langs = LibreTranslateAPI(mtx_url).languages()
    assert isinstance(langs, list) and langs, langs
    de = [lang for lang in langs if lang.get("code") == "de"]
    assert len(de) == 1, langs
    assert de[0].get("name") == "German", de
    assert "en" in de[0].get("targets", []), de


def test_libretranslatepy_detect(mtx_url):
    from libretranslatepy import LibreTranslateAPI
    got = LibreTranslateAPI(mtx_url).detect(DETECT_TEXT)
    assert isinstance(got, list) and got, got
    assert got[0].get("language") == "de", got
    confidence = got[0].get("confidence")  # LibreTranslate's scale: a percentage
    assert isinstance(confidence, (int, float)) and 50 <= confidence <= 100, got


def test_deep_translator_translate(mtx_url, reference):
    from deep_translator import LibreTranslator
    t = LibreTranslator(source="de", target="en", custom_url=mtx_url + "/", api_key=API_KEY)
    assert t.translate(SENTENCES[0]) == reference[SENTENCES[0]]


def test_deep_translator_translate_batch(mtx_url, reference):
    from deep_translator import LibreTranslator
    t = LibreTranslator(source="de", target="en", custom_url=mtx_url + "/", api_key=API_KEY)
    assert t.translate_batch(SENTENCES) == [reference[s] for s in SENTENCES]
