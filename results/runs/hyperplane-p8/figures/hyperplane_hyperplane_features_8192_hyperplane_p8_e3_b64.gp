# pcoll-compare: run 'gnuplot hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.gp' in this folder
set datafile missing "NaN"
set grid
set xlabel "wall time (s)"
set terminal pngcairo size 1000,600 noenhanced
set output "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64_loss.png"
set title "hyperplane: model=hyperplane features=8192 data=hyperplane ranks=8 epochs=3 batch=64 (regression: losses)"
set ylabel "training loss"
set key top right
plot "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 0 using 2:3 with linespoints title "sync (none)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 1 using 2:3 with linespoints title "sync (random:k=1,d=200) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 2 using 2:3 with linespoints title "solo (random:k=1,d=200) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 3 using 2:3 with linespoints title "majority (random:k=1,d=200) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 4 using 2:3 with linespoints title "adaptive (random:k=1,d=200) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 5 using 2:3 with linespoints title "sync (random:k=1,d=300) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 6 using 2:3 with linespoints title "solo (random:k=1,d=300) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 7 using 2:3 with linespoints title "majority (random:k=1,d=300) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 8 using 2:3 with linespoints title "adaptive (random:k=1,d=300) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 9 using 2:3 with linespoints title "sync (random:k=1,d=400) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 10 using 2:3 with linespoints title "solo (random:k=1,d=400) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 11 using 2:3 with linespoints title "majority (random:k=1,d=400) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 12 using 2:3 with linespoints title "adaptive (random:k=1,d=400) n=3"
set output "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64_testloss.png"
set title "hyperplane: model=hyperplane features=8192 data=hyperplane ranks=8 epochs=3 batch=64 (regression: losses)"
set ylabel "test loss"
set key top right
plot "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 13 using 2:4 with lines title "sync (none)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 14 using 2:4 with lines title "sync (random:k=1,d=200) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 15 using 2:4 with lines title "solo (random:k=1,d=200) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 16 using 2:4 with lines title "majority (random:k=1,d=200) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 17 using 2:4 with lines title "adaptive (random:k=1,d=200) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 18 using 2:4 with lines title "sync (random:k=1,d=300) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 19 using 2:4 with lines title "solo (random:k=1,d=300) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 20 using 2:4 with lines title "majority (random:k=1,d=300) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 21 using 2:4 with lines title "adaptive (random:k=1,d=300) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 22 using 2:4 with lines title "sync (random:k=1,d=400) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 23 using 2:4 with lines title "solo (random:k=1,d=400) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 24 using 2:4 with lines title "majority (random:k=1,d=400) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 25 using 2:4 with lines title "adaptive (random:k=1,d=400) n=3"
set terminal svg size 1000,600 noenhanced
set output "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64_loss.svg"
set title "hyperplane: model=hyperplane features=8192 data=hyperplane ranks=8 epochs=3 batch=64 (regression: losses)"
set ylabel "training loss"
set key top right
plot "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 0 using 2:3 with linespoints title "sync (none)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 1 using 2:3 with linespoints title "sync (random:k=1,d=200) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 2 using 2:3 with linespoints title "solo (random:k=1,d=200) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 3 using 2:3 with linespoints title "majority (random:k=1,d=200) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 4 using 2:3 with linespoints title "adaptive (random:k=1,d=200) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 5 using 2:3 with linespoints title "sync (random:k=1,d=300) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 6 using 2:3 with linespoints title "solo (random:k=1,d=300) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 7 using 2:3 with linespoints title "majority (random:k=1,d=300) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 8 using 2:3 with linespoints title "adaptive (random:k=1,d=300) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 9 using 2:3 with linespoints title "sync (random:k=1,d=400) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 10 using 2:3 with linespoints title "solo (random:k=1,d=400) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 11 using 2:3 with linespoints title "majority (random:k=1,d=400) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 12 using 2:3 with linespoints title "adaptive (random:k=1,d=400) n=3"
set output "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64_testloss.svg"
set title "hyperplane: model=hyperplane features=8192 data=hyperplane ranks=8 epochs=3 batch=64 (regression: losses)"
set ylabel "test loss"
set key top right
plot "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 13 using 2:4 with lines title "sync (none)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 14 using 2:4 with lines title "sync (random:k=1,d=200) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 15 using 2:4 with lines title "solo (random:k=1,d=200) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 16 using 2:4 with lines title "majority (random:k=1,d=200) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 17 using 2:4 with lines title "adaptive (random:k=1,d=200) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 18 using 2:4 with lines title "sync (random:k=1,d=300) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 19 using 2:4 with lines title "solo (random:k=1,d=300) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 20 using 2:4 with lines title "majority (random:k=1,d=300) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 21 using 2:4 with lines title "adaptive (random:k=1,d=300) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 22 using 2:4 with lines title "sync (random:k=1,d=400) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 23 using 2:4 with lines title "solo (random:k=1,d=400) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 24 using 2:4 with lines title "majority (random:k=1,d=400) n=3", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 25 using 2:4 with lines title "adaptive (random:k=1,d=400) n=3"
unset output
