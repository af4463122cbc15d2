# Bytes each device sends in one FFN training step, per strategy, against device count.
# Data: shardlab sweep --what bytes (bytes_per_device.dat; plan_ffn's prediction, equal to the
# ledger of real runs, see tests/test_sweep.cpp). Run through `make plots`, or by hand:
#   gnuplot -e "dir='build/plots'; term='pngcairo'" plots/bytes_per_device.gp   (or term='dumb')
if (!exists("dir")) dir = "build/plots"
if (!exists("term")) term = "pngcairo"
file = dir."/bytes_per_device.dat"
if (term eq "dumb") { set terminal dumb size 130,36 } else { set terminal pngcairo size 1000,640 font ",11"; set output dir."/bytes_per_device.png" }
set termoption noenhanced

set datafile missing "-"
set title "Bytes sent per device, one FFN training step (B=64, S=8, M=256, H=1024, float32)\n1-D strategies level off at a fixed cost, 2(p-1)/p of whole tensors;\n2-D GSPMD falls as both mesh axes grow"
set xlabel "devices (1-D strategies: D=n; gspmd: mesh X x Y, labelled)"
ylab = "bytes sent per device, forward + backward (MiB)"
set ylabel ylab
if (term eq "dumb") { set label 99 "^ ".ylab at graph 0, graph 1 offset -2,1 left; set title offset 0,1 }  # dumb draws no ylabel
set logscale x 2
set xrange [0.8:80]
set yrange [0:*]
set grid
set key outside right top box
MiB = 1048576.0
names = "gspmd column row pairwise row_column data"
dashes(i) = i == 3 ? 2 : 1
# columns: 1 devices, 2 gspmd mesh, 3.. one per strategy in the order of `names`
# column and row send the same bytes: row is drawn dashed on top of column
plot for [i=1:words(names)] file using 1:(column(2+i)/MiB) with linespoints lw 2 pt (i+3) dt dashes(i) \
       title (word(names, i).(i == 3 ? " (= column)" : "")), \
     file using 1:(column(3)/MiB):2 with labels offset 0,1 notitle
