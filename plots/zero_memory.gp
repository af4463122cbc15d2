# Memory per device of plain data parallelism and ZeRO stages 1-3 against device count, for the
# ZeRO paper's 7.5B-parameter model with mixed-precision Adam (2 + 2 + 12 bytes per parameter).
# Data: shardlab sweep --what zero (zero_memory.dat, formulas of harness/models/zero.hpp).
#   gnuplot -e "dir='build/plots'; term='pngcairo'" plots/zero_memory.gp   (or term='dumb')
if (!exists("dir")) dir = "build/plots"
if (!exists("term")) term = "pngcairo"
file = dir."/zero_memory.dat"
if (term eq "dumb") { set terminal dumb size 110,34 } else { set terminal pngcairo size 1000,640 font ",11"; set output dir."/zero_memory.png" }
set termoption noenhanced

set title "Memory per device, 7.5B parameters, mixed-precision Adam (ZeRO paper)\nplain DP stays at 120 GB; each ZeRO stage splits one more part of it over the devices"
set xlabel "data-parallel devices"
ylab = "GB held by one device (log scale)"
set ylabel ylab
if (term eq "dumb") { set label 99 "^ ".ylab at graph 0, graph 1 offset -2,1 left; set title offset 0,1 }  # dumb draws no ylabel
set logscale x 2
set logscale y 10
set xrange [0.8:1300]
set grid
set key bottom left box opaque
set arrow 1 from 64, graph 0 to 64, graph 1 nohead dt 3 lc rgb "black"
set label 1 "64 devices: 120, 31.4, 16.6, 1.9 GB" at 70, graph 0.93
plot file using 1:2 with linespoints lw 2 pt 4 title "plain DP (2+2+12 bytes/param)", \
     file using 1:3 with linespoints lw 2 pt 6 title "ZeRO-1: optimizer states split", \
     file using 1:4 with linespoints lw 2 pt 8 title "ZeRO-2: gradients split too", \
     file using 1:5 with linespoints lw 2 pt 10 title "ZeRO-3: parameters split too"
