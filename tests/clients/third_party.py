#!/usr/bin/env python3
"""Clients nobody in this project wrote, against a running `mtx serve` (tests/serve_api_test.cpp starts it):

- libretranslatepy (PyPI), LibreTranslate's own Python client: translate (form-encoded, as it posts), languages,
  and an error for a language the server does not have;
- schemathesis (PyPI) against /openapi.json: generated requests for every operation, a bounded number each; no
  5xx, no status or body outside the document.

    third_party.py --url http://127.0.0.1:PORT --text SOURCE --expect TRANSLATION --work DIR
"""
import argparse
import os
import subprocess
import sys
import urllib.error


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True)
    p.add_argument("--text", required=True)
    p.add_argument("--expect", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--examples", type=int, default=25)
    a = p.parse_args()

    from libretranslatepy import LibreTranslateAPI
    lt = LibreTranslateAPI(a.url)
    got = lt.translate(a.text, "de", "en")
    assert got == a.expect, f"libretranslatepy translated {a.text!r} to {got!r}, mtx to {a.expect!r}"
    langs = lt.languages()
    assert langs == [{"code": "de", "name": "German", "targets": ["en"]}], langs
    try:
        lt.translate(a.text, "de", "fr")
        raise AssertionError("a target the server does not have was translated")
    except urllib.error.HTTPError as e:
        assert e.code == 400, e.code
        assert b"fr is not supported" in e.read()
    print("libretranslatepy: translate, languages and an error: ok")

    exe = os.path.join(os.path.dirname(sys.executable), "schemathesis")
    # CI runs a fixed seed so that a landing's result is reproducible; MTX_SCHEMATHESIS_SEED=random and a larger
    # MTX_SCHEMATHESIS_EXAMPLES explore (what they find becomes a case in serve_api_test.cpp).
    examples = int(os.environ.get("MTX_SCHEMATHESIS_EXAMPLES", a.examples))
    seed = os.environ.get("MTX_SCHEMATHESIS_SEED", "1")
    cmd = [exe, "run", a.url + "/openapi.json", "--checks", "all", "--max-examples", str(examples),
           "--exclude-checks", "positive_data_acceptance"]
    if seed != "random":
        cmd += ["--seed", seed]
    env = dict(os.environ, SCHEMATHESIS_HOOKS="", NO_COLOR="1")
    r = subprocess.run(cmd, cwd=a.work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(r.stdout[-6000:])
    if r.returncode != 0:
        sys.exit(f"schemathesis: exit {r.returncode}")
    print("schemathesis: ok")


if __name__ == "__main__":
    main()
