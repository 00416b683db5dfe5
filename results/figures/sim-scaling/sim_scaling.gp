# collectives/sim/plot.sh: run "gnuplot sim_scaling.gp" in this folder
set grid; set logscale xy 2; set key top left; set xlabel "ranks P"; set ylabel "mean latency (us)"
set terminal pngcairo size 1300,600 noenhanced
set output "sim_scaling.png"
set multiplot layout 1,2 title "pcoll-sim: partial allreduce at scale, 8 B (collectives/sim)"
set title "no skew: activation flat O(P) (solid) vs binomial tree (dashed)"
plot  "sim_scaling.dat" index 0 using 1:2 with linespoints dt 1 lw 2 title "sync flat", "sim_scaling.dat" index 1 using 1:2 with linespoints dt 1 lw 2 title "solo flat", "sim_scaling.dat" index 2 using 1:2 with linespoints dt 1 lw 2 title "majority flat", "sim_scaling.dat" index 3 using 1:2 with linespoints dt 1 lw 2 title "quorum flat", "sim_scaling.dat" index 4 using 1:2 with linespoints dt 2 lw 2 title "sync tree", "sim_scaling.dat" index 5 using 1:2 with linespoints dt 2 lw 2 title "solo tree", "sim_scaling.dat" index 6 using 1:2 with linespoints dt 2 lw 2 title "majority tree", "sim_scaling.dat" index 7 using 1:2 with linespoints dt 2 lw 2 title "quorum tree"
set title "linear skew, unit 1 ms: sync"
plot (x-1)/2*1*1000 with lines lw 6 lc rgb "#bbbbbb" title "(P-1)/2 x unit (paper)", "sim_scaling.dat" index 8 using 1:2 with linespoints lw 2 title "sync (model)", "sim_scaling.dat" index 9 using 1:2 with points pt 7 ps 1.5 title "sync measured (collectives-p16.json)", "sim_scaling.dat" index 10 using 1:2 with points pt 7 ps 1.5 title "sync measured (collectives-p32.json)", "sim_scaling.dat" index 11 using 1:2 with points pt 7 ps 1.5 title "sync measured (collectives-p4.json)", "sim_scaling.dat" index 12 using 1:2 with points pt 7 ps 1.5 title "sync measured (collectives-p8.json)"
unset multiplot
set terminal svg size 1300,600 noenhanced
set output "sim_scaling.svg"
set multiplot layout 1,2 title "pcoll-sim: partial allreduce at scale, 8 B (collectives/sim)"
set title "no skew: activation flat O(P) (solid) vs binomial tree (dashed)"
plot  "sim_scaling.dat" index 0 using 1:2 with linespoints dt 1 lw 2 title "sync flat", "sim_scaling.dat" index 1 using 1:2 with linespoints dt 1 lw 2 title "solo flat", "sim_scaling.dat" index 2 using 1:2 with linespoints dt 1 lw 2 title "majority flat", "sim_scaling.dat" index 3 using 1:2 with linespoints dt 1 lw 2 title "quorum flat", "sim_scaling.dat" index 4 using 1:2 with linespoints dt 2 lw 2 title "sync tree", "sim_scaling.dat" index 5 using 1:2 with linespoints dt 2 lw 2 title "solo tree", "sim_scaling.dat" index 6 using 1:2 with linespoints dt 2 lw 2 title "majority tree", "sim_scaling.dat" index 7 using 1:2 with linespoints dt 2 lw 2 title "quorum tree"
set title "linear skew, unit 1 ms: sync"
plot (x-1)/2*1*1000 with lines lw 6 lc rgb "#bbbbbb" title "(P-1)/2 x unit (paper)", "sim_scaling.dat" index 8 using 1:2 with linespoints lw 2 title "sync (model)", "sim_scaling.dat" index 9 using 1:2 with points pt 7 ps 1.5 title "sync measured (collectives-p16.json)", "sim_scaling.dat" index 10 using 1:2 with points pt 7 ps 1.5 title "sync measured (collectives-p32.json)", "sim_scaling.dat" index 11 using 1:2 with points pt 7 ps 1.5 title "sync measured (collectives-p4.json)", "sim_scaling.dat" index 12 using 1:2 with points pt 7 ps 1.5 title "sync measured (collectives-p8.json)"
unset multiplot
