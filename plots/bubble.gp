# Pipeline bubble against chunks (micro-batches) for 2, 4 and 8 stages: GPipe runs on the sim
# backend, measured on the logical clock from the order the devices ran (points), on the curves of
# (P-1)/(m+P-1) (lines). Data: shardlab sweep --what bubble (bubble.dat).
#   gnuplot -e "dir='build/plots'; term='pngcairo'" plots/bubble.gp   (or term='dumb')
if (!exists("dir")) dir = "build/plots"
if (!exists("term")) term = "pngcairo"
file = dir."/bubble.dat"
if (term eq "dumb") { set terminal dumb size 110,34 } else { set terminal pngcairo size 1000,640 font ",11"; set output dir."/bubble.png" }
set termoption noenhanced

set title "Pipeline bubble: the idle share of P stages x the step, against chunks m\nmeasured GPipe runs (points) on (P-1)/(m+P-1) (lines); more chunks, smaller bubble"
set xlabel "chunks m (micro-batches per step)"
ylab = "bubble (idle fraction)"
set ylabel ylab
if (term eq "dumb") { set label 99 "^ ".ylab at graph 0, graph 1 offset -2,1 left; set title offset 0,1 }  # dumb draws no ylabel
set logscale x 2
set xrange [0.8:40]
set yrange [0:1]
set grid
set key top right box opaque
bubble(p, m) = (p - 1.0) / (m + p - 1.0)
set samples 200
plot bubble(2, x) with lines lw 2 lc 1 title "P=2: (P-1)/(m+P-1)", \
     file using 1:2 with points pt 7 ps 1.5 lc 1 title "P=2 measured", \
     bubble(4, x) with lines lw 2 lc 2 title "P=4", \
     file using 1:4 with points pt 5 ps 1.5 lc 2 title "P=4 measured", \
     bubble(8, x) with lines lw 2 lc 3 title "P=8", \
     file using 1:6 with points pt 9 ps 1.5 lc 3 title "P=8 measured"
