# pcoll-compare: run 'gnuplot bench_run-3.gp' in this folder
set datafile missing "NaN"
set grid
set logscale xy
set format x "%.0s%cB"
set xlabel "message size"
set ylabel "mean latency (us)"
set key below
set terminal pngcairo size 1200,650 noenhanced
set output "bench_run-3.png"
set multiplot layout 1,2 title "partial allreduce latency, P=8, unit 1 ms (run-3.json)"
set title "skew: none"
plot "bench_run-3.dat" index 0 using 1:2 with linespoints lw 2 title "mpi_allreduce", \
     "bench_run-3.dat" index 1 using 1:2 with linespoints lw 2 title "sync", \
     "bench_run-3.dat" index 2 using 1:2 with linespoints lw 2 title "solo", \
     "bench_run-3.dat" index 3 using 1:2 with linespoints lw 2 title "majority", \
     "bench_run-3.dat" index 4 using 1:2 with linespoints lw 2 title "quorum"
set title "skew: linear"
plot "bench_run-3.dat" index 5 using 1:2 with linespoints lw 2 title "mpi_allreduce", \
     "bench_run-3.dat" index 6 using 1:2 with linespoints lw 2 title "sync", \
     "bench_run-3.dat" index 7 using 1:2 with linespoints lw 2 title "solo", \
     "bench_run-3.dat" index 8 using 1:2 with linespoints lw 2 title "majority", \
     "bench_run-3.dat" index 9 using 1:2 with linespoints lw 2 title "quorum"
unset multiplot
set terminal svg size 1200,650 noenhanced
set output "bench_run-3.svg"
set multiplot layout 1,2 title "partial allreduce latency, P=8, unit 1 ms (run-3.json)"
set title "skew: none"
plot "bench_run-3.dat" index 0 using 1:2 with linespoints lw 2 title "mpi_allreduce", \
     "bench_run-3.dat" index 1 using 1:2 with linespoints lw 2 title "sync", \
     "bench_run-3.dat" index 2 using 1:2 with linespoints lw 2 title "solo", \
     "bench_run-3.dat" index 3 using 1:2 with linespoints lw 2 title "majority", \
     "bench_run-3.dat" index 4 using 1:2 with linespoints lw 2 title "quorum"
set title "skew: linear"
plot "bench_run-3.dat" index 5 using 1:2 with linespoints lw 2 title "mpi_allreduce", \
     "bench_run-3.dat" index 6 using 1:2 with linespoints lw 2 title "sync", \
     "bench_run-3.dat" index 7 using 1:2 with linespoints lw 2 title "solo", \
     "bench_run-3.dat" index 8 using 1:2 with linespoints lw 2 title "majority", \
     "bench_run-3.dat" index 9 using 1:2 with linespoints lw 2 title "quorum"
unset multiplot
unset output
