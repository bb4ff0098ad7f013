# shellcheck shell=bash
# Part "plot" of tests/bench/e2e_bench.sh (sourced): $RESULTS/bench-throughput.png from
# $RESULTS/throughput.tsv (the throughput part of this invocation, or of an earlier one
# when --results names its folder), drawn by matplotlib from the venv of
# scripts/python-venv.sh (pinned there).
part_plot() {
  [ -s "$RESULTS/throughput.tsv" ] || die "plot: no $RESULTS/throughput.tsv (run the throughput part, or --results DIR of a run that did)"
  bash scripts/python-venv.sh >/dev/null
  "${TIDEMARK_VENV:-$ROOT/.cache/venv}/bin/python" tests/bench/plot_throughput.py \
    "$RESULTS/throughput.tsv" "$RESULTS/bench-throughput.png" \
    "tidemark end to end by sink and batch size ($RECORDS records, $(date -u +%F))" \
    $([ -s "$RESULTS/peer.tsv" ] && echo "$RESULTS/peer.tsv")
  say "[plot] $RESULTS/bench-throughput.png"
}
