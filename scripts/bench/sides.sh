# Sourced by the speed benchmarks: installs and builds what they compare, and sets `sides`, one
# "kind|torch|executable" entry per side: the PyTorch-Python peer and mtx on Debian's LibTorch 1.13, then (unless
# MTX_BENCH_TORCH2=0) the peer on .venv's torch 2.x and mtx built against it (build-torch2/).
MTX_EXTRA_PACKAGES="python3-torch python3-numpy" scripts/setup.sh >/dev/null
scripts/build.sh >/dev/null
sides=("peer|1.13|/usr/bin/python3" "mtx|1.13|build/bin/mtx")   # Debian's python, where python3-torch lives
if [ "${MTX_BENCH_TORCH2:-1}" = 1 ]; then
  scripts/setup.sh --torch pip >/dev/null
  scripts/venv.sh numpy >/dev/null
  scripts/build.sh --torch pip >/dev/null
  sides+=("peer|2.x|.venv/bin/python" "mtx|2.x|build-torch2/bin/mtx")
fi
