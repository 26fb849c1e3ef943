#!/usr/bin/env bash
# LibreTranslate's own API tests (tests/test_api of the libretranslate 1.9.6 wheel on PyPI) and two PyPI clients
# of its API (libretranslatepy, deep-translator) against a live `mtx serve` of a German -> English model.
#   scripts/checks/libretranslate_api.sh MTX_BINARY CKPT
#     env PY: a virtual environment's python (default .venv/bin/python; a relative path is the repository's);
#       the packages the tests need are installed into it when missing
#     env LT_CACHE: where the wheel is kept (default data/cache/libretranslate)
# The wheel's tests run through tests/libretranslate/conftest.py (copied over theirs: a `client` that sends their
# requests over HTTP, their en -> es mapped to the model's de -> en) twice: forms as Flask's test client sends them
# (urlencoded), then as a browser's FormData (multipart). Then tests/libretranslate/clients_test.py. One summary
# line each; exits 1 if any test fails, 2 on bad usage.
set -euo pipefail
say() { echo "libretranslate_api: $*"; }
fail() { echo "libretranslate_api: FAIL: $*" >&2; exit 1; }
[ $# -eq 2 ] || { echo "usage: $0 MTX_BINARY CKPT" >&2; exit 2; }
[ -x "$1" ] || fail "no binary at $1"
[ -f "$2" ] || fail "no model at $2"
mtx=$(realpath "$1") ckpt=$(realpath "$2")
cd "$(dirname "$0")/../.."
repo=$PWD
py=${PY:-.venv/bin/python}
case "$py" in /*) ;; *) py=$repo/$py ;; esac
lt_version=1.9.6
lt_sha256=4e23bec15a1a6d9e5f639dd44fa7614c77b4e671b9d807a94efa96a6f3cefa39
cache=${LT_CACHE:-data/cache/libretranslate}
wheel=$cache/libretranslate-$lt_version-py3-none-any.whl

# werkzeug: the shim builds each request as Flask's test client does; requests sends it.
venv=$(dirname "$(dirname "$py")")
[ -f "$venv/pyvenv.cfg" ] || [ "$py" = "$repo/.venv/bin/python" ] || fail "PY=$py is not a virtual environment's python"
MTX_VENV=$venv scripts/venv.sh pytest==9.2.0 requests werkzeug libretranslatepy==2.1.4 deep-translator==1.11.4 ||
  fail "cannot install the test packages into $venv"

if ! echo "$lt_sha256  $wheel" | sha256sum -c --status 2>/dev/null; then
  mkdir -p "$cache"
  rm -f "$wheel"
  "$py" -m pip download -q --no-deps --only-binary :all: "libretranslate==$lt_version" -d "$cache" ||
    fail "cannot download libretranslate==$lt_version"
  echo "$lt_sha256  $wheel" | sha256sum -c --status || fail "$wheel: sha256 is not $lt_sha256"
fi

work=$(mktemp -d)
pid=""
stop_server() {
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
}
trap 'stop_server; rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Only the wheel's tests/test_api; our conftest.py replaces theirs (which builds LibreTranslate's Flask app).
"$py" - "$wheel" "$work/test_api" <<'PY'
import os, sys, zipfile
wheel, dest = sys.argv[1:]
prefix = "libretranslate/tests/test_api/"
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith(prefix) and not n.endswith("/")]
    if not any(os.path.basename(n).startswith("test_") for n in names):
        sys.exit(f"{wheel}: no tests under {prefix}")
    for n in names:
        path = os.path.join(dest, n[len(prefix):])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(z.read(n))
PY
cp tests/libretranslate/conftest.py "$work/test_api/conftest.py"
printf '[pytest]\n' > "$work/pytest.ini"

# --port 0: the server picks a free port and prints "serving on http://HOST:PORT".
"$mtx" serve --ckpt "$ckpt" --port 0 > "$work/serve.log" 2>&1 &
pid=$!
healthy() {  # URL: 0 once URL/health answers 200
  "$py" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/health", timeout=2)' "$1" 2>/dev/null
}
url=""
for _ in $(seq 900); do  # 180 s
  kill -0 "$pid" 2>/dev/null || fail "mtx serve exited: $(tail -5 "$work/serve.log")"
  [ -n "$url" ] || url=$(grep -o 'serving on http://[^ ]*' "$work/serve.log" | head -1 | sed 's/^serving on //') || true
  [ -n "$url" ] && healthy "$url" && break
  sleep 0.2
done
[ -n "$url" ] || fail "mtx serve printed no address in 180 s: $(tail -5 "$work/serve.log")"
healthy "$url" || fail "no 200 from $url/health in 180 s"
say "mtx serve at $url"

failed=0
run_pytest() {  # NAME DIR LOG PYTEST_ARGS...: pytest in DIR; prints "NAME: N passed[, M failed]", and its failures
  local name=$1 dir=$2 log=$3 rc=0
  shift 3
  (cd "$dir" && "$py" -m pytest -q -rfE --tb=short --color=no -p no:cacheprovider -c "$work/pytest.ini" \
     --rootdir "$dir" "$@") > "$log" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    cat "$log" >&2
    failed=1
  fi
  say "$name: $(tail -1 "$log" | sed 's/ in [0-9.]*s.*$//')"
}
MTX_URL=$url MTX_LT_FORM=flask run_pytest "libretranslate $lt_version tests/test_api (urlencoded forms)" \
  "$work" "$work/test_api_flask.log" test_api
MTX_URL=$url MTX_LT_FORM=multipart run_pytest "libretranslate $lt_version tests/test_api (multipart forms)" \
  "$work" "$work/test_api_multipart.log" test_api
MTX_URL=$url run_pytest "clients (libretranslatepy, deep-translator)" \
  "$repo/tests/libretranslate" "$work/clients.log" clients_test.py

stop_server
[ "$failed" = 0 ] || fail "see the failures above"
say "ok"
