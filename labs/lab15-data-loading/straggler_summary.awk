# straggler_summary.awk: lab 15, part 4: reads every rank's events of bench/straggler (kind "step": sharding, tokens,
# cpu_s, compute_s, wait_s) and prints, per sharding, the slowest rank over the mean rank, step by step and averaged.
# Usage: awk -f straggler_summary.awk -v tsv=FILE runs/lab15/straggler/events.rank*.jsonl   (tsv: one row per step)
function field(name,    v) {
    if (!match($0, "\"" name "\":\"?[^,}\"]*")) return ""
    v = substr($0, RSTART + length(name) + 3, RLENGTH - length(name) - 3)
    sub(/^"/, "", v)
    return v
}
/"kind":"step"/ {
    key = field("sharding") SUBSEP (field("step") + 0)
    shard[key] = field("sharding"); step[key] = field("step") + 0
    tok = field("tokens") + 0; cpu = field("cpu_s") + 0; wall = field("compute_s") + 0; wait = field("wait_s") + 0
    n[key]++; stok[key] += tok; scpu[key] += cpu; swall[key] += wall; swait[key] += wait
    if (tok > mtok[key]) mtok[key] = tok
    if (cpu > mcpu[key]) mcpu[key] = cpu
    if (wall > mwall[key]) mwall[key] = wall
}
function ratio(most, sum, count) { return sum > 0 ? most / (sum / count) : 1 }
END {
    if (tsv != "") printf "# step\tsharding\ttokens_max_over_mean\tcpu_max_over_mean\twall_max_over_mean\n" > tsv
    printf "%-9s %6s %17s %17s %17s %15s %15s\n", "sharding", "steps", "tokens max/mean", "CPU s max/mean",
           "wall s max/mean", "slowest CPU s", "mean CPU s"
    split("strided balanced", names, " ")
    for (o = 1; o <= 2; o++) {
        s = names[o]; k = rt = rc = rw = slow = mean = 0
        for (key in n) if (shard[key] == s) {
            k++
            rt += ratio(mtok[key], stok[key], n[key]); rc += ratio(mcpu[key], scpu[key], n[key])
            rw += ratio(mwall[key], swall[key], n[key]); slow += mcpu[key]; mean += scpu[key] / n[key]
            if (tsv != "") rows[s, step[key]] = sprintf("%d\t%s\t%.4f\t%.4f\t%.4f", step[key], s,
                ratio(mtok[key], stok[key], n[key]), ratio(mcpu[key], scpu[key], n[key]), ratio(mwall[key], swall[key], n[key]))
            if (step[key] > last[s]) last[s] = step[key]
        }
        if (!k) continue
        printf "%-9s %6d %17.3f %17.3f %17.3f %15.3f %15.3f\n", s, k, rt / k, rc / k, rw / k, slow, mean
        if (tsv != "") for (i = 1; i <= last[s]; i++) if ((s, i) in rows) print rows[s, i] > tsv
    }
}
