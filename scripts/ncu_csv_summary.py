"""Summarise an Nsight Compute --csv file: per workload (consecutive launches of one kernel name and grid, at
most --group launches), the median of each metric over its launches (the first left out as a warm-up when there
are more than two). Usage: python3 scripts/ncu_csv_summary.py FILE.csv [--group 13]"""
import csv
import statistics
import sys


def main() -> None:
    path = sys.argv[1]
    group = int(sys.argv[sys.argv.index("--group") + 1]) if "--group" in sys.argv else 10 ** 9
    rows = [r for r in csv.reader(open(path)) if len(r) > 10]
    if not rows:
        print(f"{path}: no ncu rows")
        return
    idx = {k: i for i, k in enumerate(rows[0])}
    launches: dict[int, dict] = {}
    for r in rows[1:]:
        entry = launches.setdefault(int(r[idx["ID"]]), {"key": (r[idx["Kernel Name"]][:50], r[idx["Grid Size"]]),
                                                        "metrics": {}})
        entry["metrics"][r[idx["Metric Name"]]] = (float(r[idx["Metric Value"]].replace(",", "")),
                                                   r[idx["Metric Unit"]])
    groups: list[tuple[tuple[str, str], list[dict]]] = []
    for i in sorted(launches):
        e = launches[i]
        if not groups or groups[-1][0] != e["key"] or len(groups[-1][1]) >= group:
            groups.append((e["key"], []))
        groups[-1][1].append(e["metrics"])
    for (name, grid), items in groups:
        tail = items[1:] if len(items) > 2 else items
        parts = []
        for metric in dict.fromkeys(m for it in tail for m in it):
            vals = [it[metric][0] for it in tail if metric in it]
            parts.append(f"{metric} {statistics.median(vals):.1f} {tail[0][metric][1]} "
                         f"(min {min(vals):.1f} max {max(vals):.1f})")
        print(f"{name:50} {grid:14} n={len(tail):2}  " + "; ".join(parts))


if __name__ == "__main__":
    main()
