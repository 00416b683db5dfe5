#!/bin/sh
# jobs/plot_sim.sh SIM.json OUTDIR [MEASURED.json ...]: the scaling figure of pcoll-sim.
#   left:  no skew, mean latency vs P for each rule, flat O(P) activation against the tree
#   right: linear skew (rank r waits r x unit), sync against the paper's (P-1)/2 x unit, with
#          measured bench_collectives points (their mean) where given
# Needs jq and gnuplot (make deps installs both). Writes OUTDIR/sim_scaling.{png,svg,gp,dat}.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 SIM.json OUTDIR [MEASURED.json ...]" >&2; exit 2; }
sim=$1; out=$2; shift 2
command -v jq >/dev/null && command -v gnuplot >/dev/null || { echo "plot_sim.sh: needs jq and gnuplot (make deps)" >&2; exit 3; }
mkdir -p "$out"
dat=$out/sim_scaling.dat
: > "$dat"
idx=0; plots_l=""; plots_r=""
for act in flat tree; do
  for mode in sync solo majority quorum; do
    printf '# %s %s none\n' "$mode" "$act" >> "$dat"
    jq -r --arg m "$mode" --arg a "$act" '.results[] | select(.mode==$m and .activation==$a and .skew=="none")
      | "\(.ranks) \(.mean_latency_us)"' "$sim" >> "$dat"
    printf '\n\n' >> "$dat"
    dt=1; [ "$act" = tree ] && dt=2
    plots_l="$plots_l \"sim_scaling.dat\" index $idx using 1:2 with linespoints dt $dt lw 2 title \"$mode $act\","
    idx=$((idx+1))
  done
done
unit=$(jq -r '[.results[] | select(.skew|startswith("linear:unit=")) | .skew][0] // "linear:unit=1"' "$sim" | sed 's/.*unit=//')
printf '# sync flat linear\n' >> "$dat"
jq -r '.results[] | select(.mode=="sync" and .activation=="flat" and (.skew|startswith("linear")))
  | "\(.ranks) \(.mean_latency_us)"' "$sim" >> "$dat"
printf '\n\n' >> "$dat"
plots_r="(x-1)/2*$unit*1000 with lines lw 6 lc rgb \"#bbbbbb\" title \"(P-1)/2 x unit (paper)\", \"sim_scaling.dat\" index $idx using 1:2 with linespoints lw 2 title \"sync (model)\","
idx=$((idx+1))
for m in "$@"; do
  printf '# measured %s\n' "$m" >> "$dat"
  jq -r '. as $r | .results[] | select(.mode=="sync" and .skew=="linear" and .bytes==8) | "\($r.ranks) \(.mean_latency_us)"' "$m" >> "$dat"
  printf '\n\n' >> "$dat"
  plots_r="$plots_r \"sim_scaling.dat\" index $idx using 1:2 with points pt 7 ps 1.5 title \"sync measured ($(basename "$m"))\","
  idx=$((idx+1))
done
gp=$out/sim_scaling.gp
{
  echo '# jobs/plot_sim.sh: run "gnuplot sim_scaling.gp" in this folder'
  echo 'set grid; set logscale xy 2; set key top left; set xlabel "ranks P"; set ylabel "mean latency (us)"'
  for term in "pngcairo size 1300,600 noenhanced" "svg size 1300,600 noenhanced"; do
    ext=png; case $term in svg*) ext=svg;; esac
    echo "set terminal $term"
    echo "set output \"sim_scaling.$ext\""
    echo 'set multiplot layout 1,2 title "pcoll-sim: partial allreduce at scale, 8 B (collectives/sim)"'
    echo 'set title "no skew: activation flat O(P) (solid) vs binomial tree (dashed)"'
    echo "plot ${plots_l%,}"
    echo "set title \"linear skew, unit $unit ms: sync\""
    echo "plot ${plots_r%,}"
    echo 'unset multiplot'
  done
} > "$gp"
(cd "$out" && gnuplot sim_scaling.gp)
echo "plot_sim.sh: wrote $out/sim_scaling.png and .svg"
