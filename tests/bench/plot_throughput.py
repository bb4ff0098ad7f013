#!/usr/bin/env python3
"""The throughput plot of tests/bench/e2e_bench.sh: records/s of tidemark end to end by
sink and batch size (bars, value on top), each sink's own ceiling at that batch size
(a black tick over the bar) and the consume ceiling (a dashed line), log scale.
Run with the venv of scripts/python-venv.sh (matplotlib is pinned there).

    plot_throughput.py THROUGHPUT_TSV OUT.png [TITLE [PEER_TSV]]

THROUGHPUT_TSV: "SINK BATCH E2E_RECORDS_PER_S SINK_CEILING CONSUME_CEILING" per line.
PEER_TSV: "BATCH RECORDS_PER_S" of the Kafka Connect peer (Debezium's JDBC sink into
PostgreSQL), drawn as its own bar right of PostgreSQL's.
"""
import math
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def main():
    rows = []
    with open(sys.argv[1]) as f:
        for line in f:
            sink, batch, e2e, ceil, consume = line.split()
            rows.append((sink, int(batch), float(e2e), float(ceil), float(consume)))
    if not rows:
        sys.exit("plot_throughput: no rows")
    sinks = list(dict.fromkeys(r[0] for r in rows))
    batches = sorted({r[1] for r in rows})
    peer = None
    if len(sys.argv) > 4:
        with open(sys.argv[4]) as f:
            b, rate = f.read().split()[:2]
            peer = (int(b), float(rate))
        # its own place, right of PostgreSQL's (or last)
        at = sinks.index("postgres") + 1 if "postgres" in sinks else len(sinks)
        sinks.insert(at, "Kafka Connect\n(into PostgreSQL)")
    width = 0.8 / len(batches)
    colours = ["#9ecae1", "#4292c6", "#08519c", "#08306b"]
    fig, ax = plt.subplots(figsize=(9, 6), dpi=110)
    for j, b in enumerate(batches):
        for i, s in enumerate(sinks):
            r = [x for x in rows if x[0] == s and x[1] == b]
            if not r:
                continue
            _, _, e2e, ceil, _ = r[0]
            x = i + (j - (len(batches) - 1) / 2) * width
            ax.bar(x, e2e, width * 0.9, color=colours[j % len(colours)],
                   label=f"tidemark end to end, batches of {b}" if i == 0 else None)
            label = f"{e2e / 1000:.1f}k" if e2e < 10000 else f"{e2e / 1000:.0f}k"
            ax.text(x, e2e * 1.08, label, ha="center", va="bottom",
                    fontsize=8)
            if ceil > 0:
                ax.hlines(ceil, x - width * 0.45, x + width * 0.45, colors="black",
                          linewidth=2,
                          label="the sink's own ceiling (bare loop), same batch"
                          if i == 0 and j == 0 else None)
    if peer:
        i = next(k for k, s in enumerate(sinks) if s.startswith("Kafka Connect"))
        j = batches.index(peer[0]) if peer[0] in batches else 0
        x = i + (j - (len(batches) - 1) / 2) * width
        ax.bar(x, peer[1], width * 0.9, color="#e6550d",
               label=f"Kafka Connect + Debezium JDBC sink, batch.size {peer[0]}")
        ax.text(x, peer[1] * 1.08, f"{peer[1] / 1000:.1f}k", ha="center",
                va="bottom", fontsize=8)
    consume = max(r[4] for r in rows)
    ax.axhline(consume, color="grey", linestyle="--", linewidth=1,
               label=f"consume ceiling (bare librdkafka loop), {consume / 1000:.0f}k")
    ax.set_yscale("log")
    # Bars on a log scale need an explicit floor: a decade under the smallest figure.
    low = min([r[2] for r in rows] + [r[3] for r in rows if r[3] > 0] +
              ([peer[1]] if peer else []))
    ax.set_ylim(bottom=10 ** math.floor(math.log10(low / 2)), top=max([consume] + [r[3] for r in rows]) * 2.5)
    ax.set_xticks(range(len(sinks)))
    ax.set_xticklabels(sinks)
    ax.set_ylabel("records/s (log scale)")
    ax.set_title(sys.argv[3] if len(sys.argv) > 3 else
                 "tidemark end to end by sink and batch size")
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=2,
              frameon=False)
    fig.tight_layout()
    fig.savefig(sys.argv[2])


if __name__ == "__main__":
    main()
