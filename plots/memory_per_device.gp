# Peak memory per device of one FFN training step, per strategy, against device count, beside the
# unsharded step on one device. Data: shardlab sweep --what memory (memory_per_device.dat, plan_ffn).
#   gnuplot -e "dir='build/plots'; term='pngcairo'" plots/memory_per_device.gp   (or term='dumb')
if (!exists("dir")) dir = "build/plots"
if (!exists("term")) term = "pngcairo"
file = dir."/memory_per_device.dat"
if (term eq "dumb") { set terminal dumb size 130,36 } else { set terminal pngcairo size 1000,640 font ",11"; set output dir."/memory_per_device.png" }
set termoption noenhanced

set datafile missing "-"
set title "Peak memory per device, one FFN training step (B=64, S=8, M=256, H=1024, float32)\nGSPMD and pairwise shrink with the mesh; column, row and data keep whole activations or weights\nwhat GSPMD holds between stages (dots: measured) falls near 1/n; its peak adds the transient gathers"
set xlabel "devices (1-D strategies: D=n; gspmd: 1x2, 2x2, 2x4 ... 8x8)"
ylab = "peak bytes held by one device (MiB, log scale)"
set ylabel ylab
if (term eq "dumb") { set label 99 "^ ".ylab at graph 0, graph 1 offset -2,1 left; set title offset 0,1 }  # dumb draws no ylabel
set logscale x 2
set logscale y 2
set xrange [0.8:80]
set grid
set key bottom left box opaque
MiB = 1048576.0
names = "gspmd column row pairwise row_column data"
# columns: 1 devices, 2 gspmd mesh, 3..8 peak per strategy (order of `names`), 9..14 stored, 15 unsharded peak,
# 16 unsharded stored, 17 gspmd peak measured on the sim mesh, 18 gspmd held (stored) measured
plot for [i=1:words(names)] file using 1:(column(2+i)/MiB) with linespoints lw 2 pt (i+3) title word(names, i), \
     file using 1:(column(15)/MiB) with lines lw 2 dt 2 lc rgb "black" title "unsharded (one device)", \
     file using 1:(column(18)/MiB) with points pt 7 ps 1.5 lc rgb "dark-red" title "gspmd held, run on the sim mesh", \
     file using 1:(column(16)/column(1)/MiB) with lines lw 1 dt 3 lc rgb "dark-red" title "unsharded held / n"
