# pcoll-compare: run 'gnuplot fmnist_resnet-fmnist_fmnist_p4_e16_b64.gp' in this folder
set datafile missing "NaN"
set grid
set xlabel "wall time (s)"
set terminal pngcairo size 1000,600 noenhanced
set output "fmnist_resnet-fmnist_fmnist_p4_e16_b64_loss.png"
set title "fmnist: model=resnet-fmnist data=fmnist ranks=4 epochs=16 batch=64, target top-1 80.00%"
set ylabel "training loss"
set key top right
plot "fmnist_resnet-fmnist_fmnist_p4_e16_b64.dat" index 0 using 2:3 with linespoints title "sync n=3"
set output "fmnist_resnet-fmnist_fmnist_p4_e16_b64_top1.png"
set title "fmnist: model=resnet-fmnist data=fmnist ranks=4 epochs=16 batch=64, target top-1 80.00%"
set ylabel "test top-1 (%)"
set key bottom right
plot "fmnist_resnet-fmnist_fmnist_p4_e16_b64.dat" index 0 using 2:5 with linespoints title "sync n=3"
set terminal svg size 1000,600 noenhanced
set output "fmnist_resnet-fmnist_fmnist_p4_e16_b64_loss.svg"
set title "fmnist: model=resnet-fmnist data=fmnist ranks=4 epochs=16 batch=64, target top-1 80.00%"
set ylabel "training loss"
set key top right
plot "fmnist_resnet-fmnist_fmnist_p4_e16_b64.dat" index 0 using 2:3 with linespoints title "sync n=3"
set output "fmnist_resnet-fmnist_fmnist_p4_e16_b64_top1.svg"
set title "fmnist: model=resnet-fmnist data=fmnist ranks=4 epochs=16 batch=64, target top-1 80.00%"
set ylabel "test top-1 (%)"
set key bottom right
plot "fmnist_resnet-fmnist_fmnist_p4_e16_b64.dat" index 0 using 2:5 with linespoints title "sync n=3"
unset output
