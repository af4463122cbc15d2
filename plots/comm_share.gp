# Modeled communication share of one FFN forward step at the article's sizes (article 001: B=8,
# S=512, M=5120, H=20480), for each hardware preset of harness/cost/cost.cpp. Left: 2-D GSPMD on the
# meshes 1x2 ... 8x8; middle: Megatron's pairwise split on D=2 ... 64; right: 8 devices cut into
# every shape X x Y, the article's 2x4 among them.
# Data: shardlab sweep --what share (comm_share.dat: one block per strategy, 6 columns per preset).
#   gnuplot -e "dir='build/plots'; term='pngcairo'" plots/comm_share.gp   (or term='dumb')
if (!exists("dir")) dir = "build/plots"
if (!exists("term")) term = "pngcairo"
file = dir."/comm_share.dat"
if (term eq "dumb") { set terminal dumb size 170,40 } else { set terminal pngcairo size 1700,660 font ",11"; set output dir."/comm_share.png" }
set termoption noenhanced

# Preset names and block numbers, read from the file's own # rows so the script follows the sweep.
presets = system("sed -n 's/^# preset \\([^:]*\\):.*/\\1/p' ".file)
block(name) = int(system("sed -n 's/^# block \\([0-9]*\\) (gnuplot index [0-9]*): ".name.":.*/\\1/p' ".file))
fwd_pct(i) = 2 + 6*(i-1) + 3  # columns: mesh, devices, then per preset fwd_comm, fwd_compute, fwd_pct, ...

set datafile missing "-"
set yrange [0:100]
ylab = "communication share of the step (%)"
set ylabel ylab
# dumb: the y label as text above the axis (a multiplot would draw the rotated one across the plot)
if (term eq "dumb") { set label 99 "^ ".ylab at graph 0, graph 1 offset -2,1 left; set title offset 0,1; unset ylabel }
# panel titles, shorter where the terminal is narrow
dumb = term eq "dumb"
t1 = dumb ? "gspmd, growing mesh" : "2-D GSPMD (batch over X, embed and hidden over Y)"
t2 = dumb ? "pairwise (Megatron), D devices" : "pairwise (Megatron: W_in by columns, W_out by rows, one AllReduce)"
t3 = dumb ? "gspmd, 8 devices, every shape" : "2-D GSPMD on 8 devices cut into every shape X x Y"
set grid
set bmargin 7
set key at screen 0.5, screen 0.04 center center horizontal box maxrows 1 width 2  # one legend for every panel
if (dumb) { set key at screen 0.5, screen 0.06 center center horizontal box maxrows 1 width 4 Left reverse }
set multiplot layout 1,3 title "Modeled share of an FFN forward step spent communicating (B=8, S=512, M=5120, H=20480; ring collectives, no overlap)\nThe article's TPUv2-8 (2x4) lands near its measured ~20%; faster chips or slower links make communication dominate, and the mesh shape matters as much as its size"
set title t1
set xlabel "mesh X x Y"
set arrow 1 from graph 0, first 20 to graph 1, first 20 nohead dt 3 lw 2 lc rgb "black"
set label 1 (dumb ? "article ~20%" : "article: ~20% on a TPUv2-8") at graph 0.55, first 23
plot for [i=1:words(presets)] file index block("gspmd") using 0:(column(fwd_pct(i))):xtic(1) \
       with linespoints lw 2 pt (i+3) title word(presets, i)
set title t2
set xlabel "devices D"
unset label 1
unset key
plot for [i=1:words(presets)] file index block("pairwise") using 0:(column(fwd_pct(i))):xtic(1) \
       with linespoints lw 2 pt (i+3) title word(presets, i)
set title t3
set xlabel "mesh X x Y (8 devices)"
plot for [i=1:words(presets)] file index block("gspmd_shapes_8") using 0:(column(fwd_pct(i))):xtic(1) \
       with linespoints lw 2 pt (i+3) title word(presets, i)
unset multiplot
