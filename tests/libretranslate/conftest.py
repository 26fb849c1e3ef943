"""LibreTranslate's own API tests (tests/test_api of its wheel) against a live `mtx serve`.

scripts/checks/libretranslate_api.sh copies this file over LibreTranslate's conftest.py, whose `client` fixture
is a Flask test client on LibreTranslate's app. Here `client` has the same calls and answers, but sends each
request over HTTP to the server at env MTX_URL (e.g. http://127.0.0.1:8080).

What the server receives:
- the bytes and Content-Type that Flask's test client would hand the app: werkzeug's EnvironBuilder (what
  `app.test_client()` uses) builds the request, so `data={...}` of plain values is a
  application/x-www-form-urlencoded form, `data=` with files multipart/form-data, `json=` application/json, and a
  call without data a body-less request (Content-Length: 0 on a POST);
- with env MTX_LT_FORM=multipart, a `data={...}` of plain values is sent as multipart/form-data fields without
  filenames instead, as a browser's FormData posts it (LibreTranslate's own page posts /translate that way).

The language pair. The tests translate en -> es; the served model translates de -> en. Only the codes change,
never the texts:
- requests: the fields "source" and "target" (form, JSON body or query string) go through REQUEST_CODES;
  a code not in it ("auto", the tests' unsupported "zz") is sent as it is;
- answers: in a JSON answer, the values of "language", "code" and "targets" go through ANSWER_CODES (its
  inverse), so /languages, /detect, detectedLanguage and /frontend/settings speak the tests' codes. `data` is
  then the mapped JSON re-serialised; `raw_data` keeps the server's bytes. Error strings are not rewritten
  (the server's "zz is not supported" needs none).

The fixtures: `client` (per test, like LibreTranslate's) and `mtx_url` (the server's URL, for other tests in
this directory). Without MTX_URL every test that uses them errors: this check never skips.
"""
import json as jsonlib
import os
import urllib.parse

import pytest
import requests
import urllib3
from werkzeug.test import EnvironBuilder

# The tests' code -> the model's code, in requests.
REQUEST_CODES = {"en": "de", "es": "en"}
# The model's code -> the tests' code, in answers.
ANSWER_CODES = {model: test for test, model in REQUEST_CODES.items()}
# Request fields that hold a language code, and answer keys whose values are codes (a string or a list of them).
REQUEST_CODE_FIELDS = ("source", "target")
ANSWER_CODE_KEYS = ("language", "code", "targets")

TIMEOUT_S = float(os.environ.get("MTX_LT_TIMEOUT", "120"))


def _map_request_fields(fields):
    """A copy of a dict of request fields with the language codes mapped; anything else is returned as it is."""
    if not isinstance(fields, dict):
        return fields
    out = dict(fields)
    for k in REQUEST_CODE_FIELDS:
        if isinstance(out.get(k), str):
            out[k] = REQUEST_CODES.get(out[k], out[k])
    return out


def _map_answer(value):
    """A JSON value with the codes under ANSWER_CODE_KEYS mapped back to the tests' codes, at any depth."""
    if isinstance(value, list):
        return [_map_answer(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for k, v in value.items():
        if k in ANSWER_CODE_KEYS and isinstance(v, str):
            out[k] = ANSWER_CODES.get(v, v)
        elif k in ANSWER_CODE_KEYS and isinstance(v, list) and all(isinstance(c, str) for c in v):
            out[k] = [ANSWER_CODES.get(c, c) for c in v]
        else:
            out[k] = _map_answer(v)
    return out


def _is_plain_form(data):
    return isinstance(data, dict) and all(isinstance(v, (str, int, float)) for v in data.values())


class LiveResponse:
    """What LibreTranslate's tests read of a Flask test response: status_code, status, headers, mimetype,
    content_type, data, text, json, get_json(), get_data()."""

    def __init__(self, r):
        self.status_code = r.status_code
        self.status = f"{r.status_code} {r.reason}"
        self.headers = r.headers
        self.content_type = r.headers.get("Content-Type", "")
        self.mimetype = self.content_type.split(";")[0].strip().lower()
        self.raw_data = r.content
        self.data = r.content
        self.is_json = self.mimetype == "application/json" or (
            self.mimetype.startswith("application/") and self.mimetype.endswith("+json"))
        if self.is_json:
            try:
                mapped = _map_answer(jsonlib.loads(r.content))
            except ValueError:
                pass  # get_json() raises, as werkzeug's does
            else:
                self.data = jsonlib.dumps(mapped, ensure_ascii=False).encode("utf-8")

    def __repr__(self):
        return f"<LiveResponse {self.status_code} {self.content_type} {self.raw_data[:300]!r}>"

    @property
    def text(self):
        return self.data.decode("utf-8", "replace")

    def get_data(self, as_text=False):
        return self.text if as_text else self.data

    def get_json(self, force=False, silent=False):
        """werkzeug's Response.get_json: None unless the answer is JSON (or force); bad JSON raises unless silent."""
        if not (force or self.is_json):
            return None
        try:
            return jsonlib.loads(self.data)
        except ValueError:
            if not silent:
                raise
            return None

    @property
    def json(self):
        return self.get_json()


class LiveClient:
    """The calls of Flask's test client that LibreTranslate's tests make (get, post, ... with path, data=,
    json=, query_string=, headers=, content_type=, follow_redirects=), sent to `base_url`."""

    def __init__(self, base_url, form):
        self.base_url = base_url.rstrip("/")
        self.form = form
        self.session = requests.Session()

    def open(self, path="/", method="GET", data=None, json=None, query_string=None, headers=None,
             content_type=None, follow_redirects=False, **unhandled):
        if unhandled:
            raise TypeError(f"the mtx shim client does not take {sorted(unhandled)}")
        data = _map_request_fields(data)
        json = _map_request_fields(json)
        query_string = _map_request_fields(query_string)
        if self.form == "multipart" and _is_plain_form(data) and content_type is None:
            body, content_type = urllib3.encode_multipart_formdata([(k, str(v)) for k, v in data.items()])
            data = body
        builder = EnvironBuilder(path=path, method=method, data=data, json=json, query_string=query_string,
                                 headers=headers, content_type=content_type)
        try:
            env = builder.get_environ()
            body = env["wsgi.input"].read()
        finally:
            builder.close()
        send = {k: v for k, v in builder.headers.items() if k.lower() not in ("host", "content-type", "content-length")}
        if env.get("CONTENT_TYPE"):
            send["Content-Type"] = env["CONTENT_TYPE"]
        url = self.base_url + urllib.parse.quote(env["PATH_INFO"])
        if env.get("QUERY_STRING"):
            url += "?" + env["QUERY_STRING"]
        r = self.session.request(method, url, data=body or None, headers=send, timeout=TIMEOUT_S,
                                 allow_redirects=follow_redirects)
        return LiveResponse(r)

    def get(self, path="/", **kw):
        return self.open(path, method="GET", **kw)

    def post(self, path="/", **kw):
        return self.open(path, method="POST", **kw)

    def put(self, path="/", **kw):
        return self.open(path, method="PUT", **kw)

    def patch(self, path="/", **kw):
        return self.open(path, method="PATCH", **kw)

    def delete(self, path="/", **kw):
        return self.open(path, method="DELETE", **kw)

    def head(self, path="/", **kw):
        return self.open(path, method="HEAD", **kw)

    def options(self, path="/", **kw):
        return self.open(path, method="OPTIONS", **kw)


@pytest.fixture(scope="session")
def mtx_url():
    url = os.environ.get("MTX_URL", "").rstrip("/")
    if not url:
        pytest.fail("MTX_URL is not set: the URL of a running `mtx serve` (scripts/checks/libretranslate_api.sh)")
    return url


@pytest.fixture()
def client(mtx_url):
    form = os.environ.get("MTX_LT_FORM", "flask")
    if form not in ("flask", "multipart"):
        pytest.fail(f"MTX_LT_FORM={form!r}: flask or multipart")
    c = LiveClient(mtx_url, form)
    yield c
    c.session.close()
