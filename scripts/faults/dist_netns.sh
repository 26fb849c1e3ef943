#!/usr/bin/env bash
# Two hosts: two network namespaces joined by a veth pair (made here, removed on exit), one rank in each,
# MASTER_ADDR the first one's address, as on two machines. The run completes and its weights equal those of
# one process accumulating the same two batches per update. Needs root (ip netns); exits 77 (skipped) without.
#   scripts/faults/dist_netns.sh [--steps S] [--work DIR] [--timeout SECONDS]
set -euo pipefail
source "$(dirname "$0")/common.sh"
steps=30 work="" timeout_s=60
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    *) echo "usage: $0 [--steps S] [--work DIR]" >&2; exit 2 ;;
  esac
done
command -v ip > /dev/null || { say "SKIP: no ip command (apt-get install iproute2)"; exit 77; }
a=mtxa$$ b=mtxb$$
cleanup() {
  ip netns del "$a" 2> /dev/null || true
  ip netns del "$b" 2> /dev/null || true
  [ -z "${own_work:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
if ! ip netns add "$a" 2> /dev/null; then say "SKIP: cannot create network namespaces here (needs root / CAP_SYS_ADMIN)"; exit 77; fi
ip netns add "$b"
ip link add "va$$" type veth peer name "vb$$"
ip link set "va$$" netns "$a"
ip link set "vb$$" netns "$b"
ip -n "$a" addr add 10.231.0.1/24 dev "va$$"
ip -n "$b" addr add 10.231.0.2/24 dev "vb$$"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "va$$" up
ip -n "$b" link set "vb$$" up

[ -n "$work" ] || { work=$(mktemp -d); own_work=1; }
make_corpus "$work/corpus" 3000
write_config "$work/cfg.json" "$work/corpus" "$work/cache"
set_args=(--set train.max_steps="$steps" --set train.threads=1 --set train.dist_timeout_s="$timeout_s")

say "reference: one process, train.accum_steps=2"
"$MTX" train --config "$work/cfg.json" "${set_args[@]}" --set train.accum_steps=2 --out "$work/one" > "$work/one.log" 2>&1 ||
  fail "single-process run failed: $(tail -3 "$work/one.log")"

say "two hosts: rank 0 in $a (10.231.0.1), rank 1 in $b (10.231.0.2)"
vars=(WORLD_SIZE=2 MASTER_ADDR=10.231.0.1 MASTER_PORT=29531)
ip netns exec "$a" env "${vars[@]}" RANK=0 LOCAL_RANK=0 "$MTX" train --config "$work/cfg.json" "${set_args[@]}" \
  --out "$work/two" > "$work/rank0.log" 2>&1 &
p0=$!
ip netns exec "$b" env "${vars[@]}" RANK=1 LOCAL_RANK=0 "$MTX" train --config "$work/cfg.json" "${set_args[@]}" \
  --out "$work/two" > "$work/rank1.log" 2>&1 &
p1=$!
rc0=0 rc1=0
wait "$p0" || rc0=$?
wait "$p1" || rc1=$?
[ "$rc0" = 0 ] && [ "$rc1" = 0 ] || fail "ranks exited $rc0 / $rc1: $(tail -2 "$work/rank0.log") / $(tail -2 "$work/rank1.log")"
one=$(sha "$work/one/last.pt") two=$(sha "$work/two/last.pt")
[ "$one" = "$two" ] || fail "two hosts' weights $two differ from one process's $one"
say "two hosts over veth: last.pt weights equal one process's ($two)"
say "dist_netns OK"
