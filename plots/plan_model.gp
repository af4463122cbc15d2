# Step time against memory per device for every layout plan-model searched: GPT-3 175B on 1024 A100s
# (80 GB each). The layouts left of the line fit; the planner takes the fastest of them.
# Data: shardlab sweep --what plan (plan_model.dat, harness/jobs/job_sweep.cpp).
#   gnuplot -e "dir='build/plots'; term='pngcairo'" plots/plan_model.gp   (or term='dumb')
if (!exists("dir")) dir = "build/plots"
if (!exists("term")) term = "pngcairo"
file = dir."/plan_model.dat"
if (term eq "dumb") { set terminal dumb size 110,34 } else { set terminal pngcairo size 1000,640 font ",11"; set output dir."/plan_model.png" }
set termoption noenhanced

set title "plan-model: GPT-3 175B on 1024 A100 80GB, every layout searched\nstep time against memory per device; the fastest layout left of 80 GB is the plan"
set xlabel "memory per device, GB (log scale)"
ylab = "modeled step time, s (log scale)"
set ylabel ylab
if (term eq "dumb") { set label 99 "^ ".ylab at graph 0, graph 1 offset -2,1 left; set title offset 0,1 }  # dumb draws no ylabel
set logscale x 10
set logscale y 10
set grid
set key top right box opaque
set arrow 1 from 80, graph 0 to 80, graph 1 nohead dt 2 lw 2 lc rgb "black"
set label 1 "80 GB a device" at 85, graph 0.05
plot file index 1 using 1:2 with points pt 1 lc rgb "#bbbbbb" title "does not fit", \
     file index 0 using 1:2 with points pt 7 ps 0.5 lc rgb "#1f77b4" title "fits", \
     file index 2 using 1:2 with points pt 9 ps 2.5 lc rgb "#d62728" title "the plan"
