# Measured bus bandwidth of each collective against message size: shardlab's ring (ours) beside
# MPICH's own (native; only under mpiexec with --backend mpi), and all_reduce's alpha-beta-gamma
# model twice: fitted to this run, and with the this-machine preset's figures (measured once, on
# one machine: the gap between the two says how far this machine is from that one).
# Data: shardlab sweep --what busbw (busbw.dat: one block per collective).
#   gnuplot -e "dir='build/plots'; term='pngcairo'" plots/busbw.gp   (or term='dumb')
if (!exists("dir")) dir = "build/plots"
if (!exists("term")) term = "pngcairo"
file = dir."/busbw.dat"
if (term eq "dumb") { set terminal dumb size 150,38 } else { set terminal pngcairo size 1150,680 font ",11"; set output dir."/busbw.png" }
set termoption noenhanced

ops = system("sed -n 's/^# block [0-9]* (gnuplot index [0-9]*): //p' ".file)
native = int(system("awk '!/^#/ && NF && $4 != \"-\" {n++} END {print n+0}' ".file)) > 0
setup = system("sed -n 's/^# bench: \\(shardlab bench collectives: \\)\\{0,1\\}//p' ".file." | head -1")
fitted = system("sed -n 's/^# fit: alpha \\([^,]*\\), link \\([^,]*\\),.*/\\1, \\2/p' ".file)
preset = system("sed -n 's/^# preset: alpha \\([^,]*\\), link \\([^ ]* GB\\/s\\).*/\\1, \\2/p' ".file)

set datafile missing "-"
set title "Bus bandwidth against message size: ".setup."\n". \
  (native ? "ours (solid) against MPICH's own (dashed)" : "ours only (sim backend: MPICH's side needs mpiexec -n 2 ... --backend mpi)")."\n". \
  "black: all_reduce model, fit to this run (dotted: ".(strlen(fitted) ? fitted : "none").")". \
  ", this-machine preset (dashed: ".preset.")\n". \
  "small messages pay the latency alpha; a straight line cannot follow protocol switches and cache effects"
set xlabel "message size (bytes, log scale)"
ylab = "busbw (GB/s = 1e9 B/s)"
set ylabel ylab
if (term eq "dumb") { set label 99 "^ ".ylab at graph 0, graph 1 offset -2,1 left; set title offset 0,1 }  # dumb draws no ylabel
set logscale x 2
set format x "%.0b %BB"
set grid
set key outside right top box
# columns: 1 size_B, 2 ours_us, 3 ours_busbw, 4 native_us, 5 native_busbw, 6 model_us, 7 model_busbw, 8 fit_us, 9 fit_busbw
plot for [i=1:words(ops)] file index (i-1) using 1:3 with linespoints lw 2 pt 7 lc i title word(ops, i)." ours" noenhanced, \
     for [i=1:words(ops)] file index (i-1) using 1:(native ? column(5) : NaN) with linespoints lw 2 dt 2 pt 6 lc i \
       title (native ? word(ops, i)." MPICH" : "") noenhanced, \
     file index 0 using 1:9 with lines lw 2 dt 3 lc rgb "black" \
       title word(ops, 1)." model (fit)" noenhanced, \
     file index 0 using 1:7 with lines lw 2 dt 2 lc rgb "black" \
       title word(ops, 1)." model (preset)" noenhanced
