#!/usr/bin/env python3
"""Markdown tables of scripts/bench/budget.sh (and budget_ensemble.sh) runs, one per budget (minutes).

    scripts/bench/budget_table.py [runs/budget/results.jsonl] [--only NAME,NAME]

Each row: the run's name, the --set overrides it does not share with every run of its budget, updates,
epochs, target tokens/s, the lowest validation loss and where it was (the pick: the checkpoint with the lowest
validation loss -- with a cosine schedule usually the model at the deadline), and the test_2016_flickr BLEU and
chrF2 of that pick (beam 5). A later row of the same name replaces an earlier one.
"""
import json
import os
import sys


def main():
    args = sys.argv[1:]
    only = None
    if "--only" in args:
        i = args.index("--only")
        only = set(args[i + 1].split(","))
        del args[i:i + 2]
    path = args[0] if args else "runs/budget/results.jsonl"
    rows = {}
    for line in open(path):
        if line.strip():
            r = json.loads(line)
            if only is None or r["name"] in only:
                rows[r["name"]] = r
    by_budget = {}
    for r in rows.values():
        by_budget.setdefault(r["minutes"], []).append(r)
    for minutes, group in sorted(by_budget.items()):
        sets = [r["sets"].split("--set ")[1:] for r in group]
        sets = [[s.strip() for s in x] for x in sets]
        common = set.intersection(*(set(x) for x in sets))
        print(f"\n{minutes:g} minutes (2 threads; test_2016_flickr, beam 5)\n")
        print("| run | changes | updates | epochs | tgt tok/s | lowest val. loss (update) | pick | BLEU | chrF2 |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r, s in zip(group, sets):
            d = os.path.join(os.path.dirname(path), r["name"])
            if "members" in r:  # scripts/bench/budget_ensemble.sh: N members at once, scored as one ensemble
                runs = r["runs"]
                valid = [(m["val_loss"], m["step"]) for k in range(len(runs))
                         for m in map(json.loads, open(os.path.join(d, f"m{k + 1}", "metrics.jsonl")))
                         if m.get("type") in ("valid", "final")]
                loss, step = min(valid) if valid else (float("nan"), 0)
                changes = ", ".join(x for x in s if x not in common and not x.startswith("train.threads"))
                changes = f"{r['members']} members (seeds 1-{r['members']}), alpha {r['alpha']:g} chosen on validation" + \
                    (f", {changes}" if changes else "")
                tps = sum(x["tok_per_s"] or 0 for x in runs)
                print(f"| {r['name']} | {changes} | {' + '.join(str(x['updates']) for x in runs)} "
                      f"| {max(x['epochs'] for x in runs)} | {tps:.0f} | {loss:.3f} ({step}) | ensemble of avg.pt "
                      f"| {r['bleu']:.2f} | {r['chrF2']:.2f} |")
                continue
            metrics = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl")) if l.strip()]
            valid = [(m["val_loss"], m["step"]) for m in metrics if m.get("type") in ("valid", "final")]
            loss, step = min(valid) if valid else (float("nan"), 0)
            pick = "last" if step == r["updates"] and "last" in r["scores"] else "best"
            if r.get("pick") == "avg":
                pick = "avg"
            score = r["scores"].get(pick, {})
            changes = ", ".join(x for x in s if x not in common and not x.startswith("train.threads")) or "(base)"
            tps = f"{r['tok_per_s']:.0f}" if r.get("tok_per_s") else "-"
            bleu = f"{score['BLEU']:.2f}" if score.get("BLEU") is not None else "-"
            chrf = f"{score['chrF2']:.2f}" if score.get("chrF2") is not None else "-"
            print(f"| {r['name']} | {changes} | {r['updates']} | {r['epochs']} | {tps} | {loss:.3f} ({step}) | {pick}.pt "
                  f"| {bleu} | {chrf} |")


if __name__ == "__main__":
    main()
