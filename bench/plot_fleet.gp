# Draws docs/img/fleet_scaling.png from the figures bench/fleet_table.py writes:
#   bench/fleet_table.py build/bin/plan_bench bench/fleet_table.dat
#   gnuplot -e "data='bench/fleet_table.dat'; out='docs/img/fleet_scaling.png'" bench/plot_fleet.gp
# Columns: nodes types mixes cold_ms warm_ms warm_cpu_ms gap replan_p50_ms replan_p99_ms
# replan_cpu_ms peak_rss_mib (one row per nodes x types; cold_ms -1 when not run).
if (!exists("data")) data = 'bench/fleet_table.dat'
if (!exists("out")) out = 'docs/img/fleet_scaling.png'
set terminal png size 1500,480 font ",11"
set output out
set multiplot layout 1,3 title "oobleck-planner at fleet scale: nodes x GPU types (2 shared cores)"
set logscale xy
set xrange [12:5500]
set xtics (16, 64, 256, 1024, 4096)
set xlabel "nodes"
set grid
set key top left
types = "2 4 6 8"
row(t) = sprintf("< awk '$1 !~ /^#/ && $2 == %s' %s", t, data)

set title "warm Plan (templates cached)"
set ylabel "ms"
plot for [i=1:4] row(word(types, i)) using 1:5 with linespoints lw 2 lc i \
       title sprintf("%s types", word(types, i)), \
     1000 with lines dt 2 lc rgb "red" title "1 s goal"

set ylabel "ms"
set title "warm Replan after one failure (lines p99, circles p50)"
plot for [i=1:4] row(word(types, i)) using 1:9 with linespoints lw 2 lc i \
       title sprintf("%s types", word(types, i)), \
     for [i=1:4] row(word(types, i)) using 1:8 with points pt 6 ps 1.5 lc i notitle, \
     10 with lines dt 2 lc rgb "red" title "10 ms goal (4096 nodes)"

set title "peak RSS (whole benchmark process)"
set ylabel "MiB"
unset logscale y
set yrange [0:*]
plot for [i=1:4] row(word(types, i)) using 1:11 with linespoints lw 2 lc i \
       title sprintf("%s types", word(types, i))
unset multiplot
