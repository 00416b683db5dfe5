# pcoll-compare: run 'gnuplot hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.gp' in this folder
set datafile missing "NaN"
set grid
set xlabel "wall time (s)"
set terminal pngcairo size 1000,600 noenhanced
set output "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64_loss.png"
set title "hyperplane: model=hyperplane features=8192 data=hyperplane ranks=8 epochs=3 batch=64 (regression: losses)"
set ylabel "training loss"
set key top right
plot "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 0 using 2:3 with linespoints title "sync (random:k=1,d=200)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 1 using 2:3 with linespoints title "solo (random:k=1,d=200)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 2 using 2:3 with linespoints title "majority (random:k=1,d=200)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 3 using 2:3 with linespoints title "adaptive/adaptive (random:k=1,d=200)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 4 using 2:3 with linespoints title "sync (random:k=1,d=300)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 5 using 2:3 with linespoints title "solo (random:k=1,d=300)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 6 using 2:3 with linespoints title "majority (random:k=1,d=300)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 7 using 2:3 with linespoints title "adaptive/adaptive (random:k=1,d=300)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 8 using 2:3 with linespoints title "sync (random:k=1,d=400)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 9 using 2:3 with linespoints title "solo (random:k=1,d=400)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 10 using 2:3 with linespoints title "majority (random:k=1,d=400)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 11 using 2:3 with linespoints title "adaptive/adaptive (random:k=1,d=400)"
set output "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64_testloss.png"
set title "hyperplane: model=hyperplane features=8192 data=hyperplane ranks=8 epochs=3 batch=64 (regression: losses)"
set ylabel "test loss"
set key top right
plot "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 0 using 2:4 with linespoints title "sync (random:k=1,d=200)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 1 using 2:4 with linespoints title "solo (random:k=1,d=200)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 2 using 2:4 with linespoints title "majority (random:k=1,d=200)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 3 using 2:4 with linespoints title "adaptive/adaptive (random:k=1,d=200)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 4 using 2:4 with linespoints title "sync (random:k=1,d=300)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 5 using 2:4 with linespoints title "solo (random:k=1,d=300)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 6 using 2:4 with linespoints title "majority (random:k=1,d=300)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 7 using 2:4 with linespoints title "adaptive/adaptive (random:k=1,d=300)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 8 using 2:4 with linespoints title "sync (random:k=1,d=400)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 9 using 2:4 with linespoints title "solo (random:k=1,d=400)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 10 using 2:4 with linespoints title "majority (random:k=1,d=400)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 11 using 2:4 with linespoints title "adaptive/adaptive (random:k=1,d=400)"
set terminal svg size 1000,600 noenhanced
set output "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64_loss.svg"
set title "hyperplane: model=hyperplane features=8192 data=hyperplane ranks=8 epochs=3 batch=64 (regression: losses)"
set ylabel "training loss"
set key top right
plot "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 0 using 2:3 with linespoints title "sync (random:k=1,d=200)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 1 using 2:3 with linespoints title "solo (random:k=1,d=200)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 2 using 2:3 with linespoints title "majority (random:k=1,d=200)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 3 using 2:3 with linespoints title "adaptive/adaptive (random:k=1,d=200)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 4 using 2:3 with linespoints title "sync (random:k=1,d=300)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 5 using 2:3 with linespoints title "solo (random:k=1,d=300)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 6 using 2:3 with linespoints title "majority (random:k=1,d=300)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 7 using 2:3 with linespoints title "adaptive/adaptive (random:k=1,d=300)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 8 using 2:3 with linespoints title "sync (random:k=1,d=400)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 9 using 2:3 with linespoints title "solo (random:k=1,d=400)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 10 using 2:3 with linespoints title "majority (random:k=1,d=400)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 11 using 2:3 with linespoints title "adaptive/adaptive (random:k=1,d=400)"
set output "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64_testloss.svg"
set title "hyperplane: model=hyperplane features=8192 data=hyperplane ranks=8 epochs=3 batch=64 (regression: losses)"
set ylabel "test loss"
set key top right
plot "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 0 using 2:4 with linespoints title "sync (random:k=1,d=200)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 1 using 2:4 with linespoints title "solo (random:k=1,d=200)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 2 using 2:4 with linespoints title "majority (random:k=1,d=200)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 3 using 2:4 with linespoints title "adaptive/adaptive (random:k=1,d=200)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 4 using 2:4 with linespoints title "sync (random:k=1,d=300)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 5 using 2:4 with linespoints title "solo (random:k=1,d=300)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 6 using 2:4 with linespoints title "majority (random:k=1,d=300)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 7 using 2:4 with linespoints title "adaptive/adaptive (random:k=1,d=300)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 8 using 2:4 with linespoints title "sync (random:k=1,d=400)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 9 using 2:4 with linespoints title "solo (random:k=1,d=400)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 10 using 2:4 with linespoints title "majority (random:k=1,d=400)", \
     "hyperplane_hyperplane_features_8192_hyperplane_p8_e3_b64.dat" index 11 using 2:4 with linespoints title "adaptive/adaptive (random:k=1,d=400)"
unset output
