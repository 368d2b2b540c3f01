#!/bin/sh
# multihost_model.sh [RESULTS]: bench/multihost.sh's measurements as doc/mpi.md's tables, and
# the step-time model of doc/mpi.md ("A model of the step time") checked against them and
# used to predict 8, 32 and 128 ranks. RESULTS: default runs/multihost/results.jsonl.
#
# The model, for p ranks, each with the same share of the batch (its compute C: measured as
# one rank's step with that share while the other core computes the other share: two 1-rank
# runs side by side), P parameters (n = 4 P bytes summed per step: N layers of n_l bytes,
# the rest model-wide), a link whose 2-rank sums move bw bytes/s (as MPI moves them) and
# whose one-way latency is a:
#   a sum of m bytes        t(m) = 2 (p-1)/p m / bw + 2 log2(p) a   (reduce-scatter and
#                           allgather: 2 (p-1)/p of the buffer each way, 2 log2 p rounds)
#   blocking                T = C + t(n)
#   overlapped              the sums' own work (TCP on both ends, the reduction: on these
#                           cores, as fast as the fastest setting's sums ran, cpu_bw) is done
#                           between the layers: C' = C + 2 (p-1)/p n / cpu_bw. The backward
#                           is 2/3 of C' (twice the forward's FLOPs), layer l's sum starts
#                           when its backward ends (from the top), the link takes the sums
#                           one after the other; after the backward the model-wide sum:
#                           T = C' + max(0, f - C') + t(n_0), f when the last layer sum ends.
# bw and a are measured by bench/mpi_link.c at each setting: the blocking MPI_Allreduce's fit
# for blocking sums, the MPI_Iallreduce's for the overlapped layers' sums, the ping-pong's
# latency. The predictions take C from the blocking run over the fastest link (its step
# less its sum), the 1 Gbit/s setting's efficiency (measured bw over the rate) at 1 and 10
# Gbit/s, and a = 0.2 ms.
set -eu
cd "$(dirname "$0")/.."
RESULTS=${1:-runs/multihost/results.jsonl}
. bench/lib.sh # S_SHAPE, M_SHAPE
[ -s "$RESULTS" ] || { echo "multihost_model: no results in $RESULTS" >&2; exit 2; }

# one line per fact, for awk: shapes, links, runs
{
    echo "shape S $S_SHAPE"
    echo "shape M $M_SHAPE"
    jq -r 'select(.kind == "link") | "link \(.link) \(.bw_Bps) \(.latency_us) \(.p2p_Bps) \(.load[0]) \(.nb_bw_Bps)"' "$RESULTS"
    jq -r 'select(.kind == "train") | ["run", .config, .link, .ranks, .batch, .overlap, .params,
           .step_s, .tok_s, .comm_s, .exposed_s, .load[0], .load[1],
           (if .decided then (if .decided.on then "on" else "off" end) else "-" end)] |
           map(tostring) | join(" ")' "$RESULTS"
} | awk '
function log2(x) { return log(x) / log(2) }
function tsum(m, p, bw, a) { return 2 * (p - 1) / p * m / bw + 2 * log2(p) * a }
# per-layer floats: qkv 3 hd d, o d hd, the xl scheme r hd d, feed-forward 2 d di + di + d,
# two layer norms 4 d
function layer_floats(c) { return 5 * HD[c] * D[c] + 2 * D[c] * DI[c] + DI[c] + 5 * D[c] }
function blocking(c, C, p, bw, a) { return C + tsum(4 * PARAMS[c], p, bw, a) }
function overlapped(c, C, p, bw, nbw, a,    N, nl, n0, bwd, f, l, s) {
    N = NL[c]; nl = 4 * layer_floats(c); n0 = 4 * PARAMS[c] - N * nl
    C += 2 * (p - 1) / p * 4 * PARAMS[c] / CPUBW # the work of the sums, on the same core
    bwd = C * 2 / 3; f = 0
    for (l = N - 1; l >= 0; l--) {
        s = (C - bwd) + bwd * (N - l) / N
        f = (f > s ? f : s) + tsum(nl, p, nbw, a)
    }
    return C + (f > C ? f - C : 0) + tsum(n0, p, bw, a)
}
$1 == "shape" { NL[$2] = $3; D[$2] = $4; HD[$2] = $5 * $6; DI[$2] = $7; LQ[$2] = $8; BATCH[$2] = $10 }
$1 == "link" { BW[$2] = $3; LAT[$2] = $4 * 1e-6; P2P[$2] = $5; LLOAD[$2] = $6; NBW[$2] = $7; links[++nlinks] = $2 }
$1 == "run" {
    c = $2; PARAMS[c] = $7
    if ($4 == 1) { # the baselines before (link none) and after (after) the config'"'"'s runs
        if (!(c in seen)) { seen[c] = 1; cfgs[++ncfg] = c }
        if ($3 == "after") { ONE2[c, $5] = $8; next }
        ONE[c, $5] = $8; TOK1[c, $5] = $9; next
    }
    k = c SUBSEP $3 SUBSEP $6
    STEP[k] = $8; TOK[k] = $9; COMM[k] = $10; EXP[k] = $11; L0[k] = $12; L1[k] = $13; DEC[k] = $14
}
END {
    CPUBW = 0 # the fastest non-blocking sum measured: the cores own limit
    for (j = 1; j <= nlinks; j++) if (NBW[links[j]] > CPUBW) CPUBW = NBW[links[j]]
    for (i = 1; i <= ncfg; i++) { # the baselines: the mean of before and after
        c = cfgs[i]
        for (h = 1; h <= 2; h++) {
            b = h == 1 ? BATCH[c] : BATCH[c] / 2
            BASE[c, b] = ((c, b) in ONE2) ? (ONE[c, b] + ONE2[c, b]) / 2 : ONE[c, b]
        }
    }
    print "Measured (2 ranks on two namespaces, 1 core and 1 thread each; efficiency = tok/s over"
    print "twice one rank'"'"'s with the whole batch):"
    print ""
    print "| config | link (sum bw blocking/not, latency) | overlap | tok/s | step s | comm s | exposed s | efficiency | load |"
    print "|---|---|---|---:|---:|---:|---:|---:|---|"
    for (i = 1; i <= ncfg; i++) {
        c = cfgs[i]
        for (h = 1; h <= 2; h++) {
            b = h == 1 ? BATCH[c] : BATCH[c] / 2
            printf "| %s | %s, batch %d, before/after | - | %.0f | %.3f/%.3f | - | - | %s | |\n", c,
                h == 1 ? "1 rank" : "2 x 1 rank side by side, no link", b,
                b * LQ[c] / BASE[c, b], ONE[c, b], ONE2[c, b], h == 1 ? "1" : "-"
        }
        for (j = 1; j <= nlinks; j++) {
            lk = links[j]
            split("off on auto", ovs, " ")
            for (o = 1; o <= 3; o++) {
                k = c SUBSEP lk SUBSEP ovs[o]
                if (!(k in STEP)) continue
                printf "| %s | %s (%.2f/%.2f Gbit/s, %.0f us) | %s%s | %.0f | %.3f | %.3f | %.3f | %.2f | %.1f-%.1f |\n", c, lk,
                    BW[lk] * 8e-9, NBW[lk] * 8e-9, LAT[lk] * 1e6, ovs[o], ovs[o] == "auto" ? " (" DEC[k] ")" : "",
                    TOK[k], STEP[k], COMM[k], EXP[k], BASE[c, BATCH[c]] / (2 * STEP[k]), L0[k], L1[k]
            }
        }
    }
    print ""
    print "The model against them (C: the side-by-side runs'"'"' step, one rank'"'"'s share while the other core"
    print "computes; the link'"'"'s measured bw and latency):"
    print ""
    print "| config | link | overlap | measured step s | model step s | error |"
    print "|---|---|---|---:|---:|---:|"
    worst = 0
    for (i = 1; i <= ncfg; i++) {
        c = cfgs[i]; C = BASE[c, BATCH[c] / 2]
        for (j = 1; j <= nlinks; j++) {
            lk = links[j]
            for (o = 1; o <= 2; o++) {
                ov = o == 1 ? "off" : "on"; k = c SUBSEP lk SUBSEP ov
                if (!(k in STEP) || C == "") continue
                m = ov == "off" ? blocking(c, C, 2, BW[lk], LAT[lk]) : overlapped(c, C, 2, BW[lk], NBW[lk], LAT[lk])
                e = (m - STEP[k]) / STEP[k]
                if ((e < 0 ? -e : e) > worst) worst = e < 0 ? -e : e
                printf "| %s | %s | %s | %.3f | %.3f | %+.1f%% |\n", c, lk, ov, STEP[k], m, 100 * e
            }
        }
    }
    printf "\nworst error: %.1f%%\n\n", 100 * worst
    print "The same with C from the blocking run over the same link (its step less its sum: the"
    print "compute of that very minute), which leaves the sums to the model: the blocking sum t(n)"
    print "against the measured comm_s, the overlapped step against the measured one:"
    print ""
    print "| config | link | C s | sum: measured | model | error | overlapped step: measured | model | error |"
    print "|---|---|---:|---:|---:|---:|---:|---:|---:|"
    worst2 = 0
    for (i = 1; i <= ncfg; i++) {
        c = cfgs[i]
        for (j = 1; j <= nlinks; j++) {
            lk = links[j]; kb = c SUBSEP lk SUBSEP "off"; ko = c SUBSEP lk SUBSEP "on"
            if (!(kb in STEP) || !(ko in STEP)) continue
            C = STEP[kb] - COMM[kb]; ts = tsum(4 * PARAMS[c], 2, BW[lk], LAT[lk])
            m = overlapped(c, C, 2, BW[lk], NBW[lk], LAT[lk])
            e1 = (ts - COMM[kb]) / COMM[kb]; e2 = (m - STEP[ko]) / STEP[ko]
            if ((e1 < 0 ? -e1 : e1) > worst2) worst2 = e1 < 0 ? -e1 : e1
            if ((e2 < 0 ? -e2 : e2) > worst2) worst2 = e2 < 0 ? -e2 : e2
            printf "| %s | %s | %.3f | %.3f | %.3f | %+.1f%% | %.3f | %.3f | %+.1f%% |\n", c, lk, C,
                COMM[kb], ts, 100 * e1, STEP[ko], m, 100 * e2
        }
    }
    printf "\nworst error: %.1f%%\n\n", 100 * worst2
    eff = ("1gbit" in BW) ? BW["1gbit"] / 125e6 : 0.9
    nbeff = ("1gbit" in NBW) ? NBW["1gbit"] / 125e6 : eff
    printf "Predicted (C: the compute of the blocking run over the fastest link, its step less its sum;\n"
    printf "each rank with the 2-rank share of the batch, as measured here; links at %.0f%%\n", 100 * eff
    print "of their rate, as the 1 Gbit/s setting measured; latency 0.2 ms each way): step s (efficiency:"
    print "C over the step). Overlapped twice: with the sums'"'"' CPU work of this machine (its veth), and"
    print "without it (a NIC that moves the bytes itself):"
    print ""
    print "| config | link | ranks | blocking | overlapped, the sums CPU as here | overlapped, none |"
    print "|---|---|---:|---:|---:|---:|"
    for (i = 1; i <= ncfg; i++) {
        c = cfgs[i]; C = ""; fast = 0
        for (j = 1; j <= nlinks; j++) {
            kb = c SUBSEP links[j] SUBSEP "off"
            if ((kb in STEP) && NBW[links[j]] > fast) { fast = NBW[links[j]]; C = STEP[kb] - COMM[kb] }
        }
        if (C == "") continue
        split("1 10", rates, " ")
        for (r = 1; r <= 2; r++) {
            bw = rates[r] * 125e6 * eff; nbw = rates[r] * 125e6 * nbeff
            split("2 8 32 128", ps, " ")
            for (q = 1; q <= 4; q++) {
                p = ps[q]; b = blocking(c, C, p, bw, 2e-4); v = overlapped(c, C, p, bw, nbw, 2e-4)
                keep = CPUBW; CPUBW = 1e30; w = overlapped(c, C, p, bw, nbw, 2e-4); CPUBW = keep
                printf "| %s | %d Gbit/s | %d | %.3f (%.2f) | %.3f (%.2f) | %.3f (%.2f) |\n", c, rates[r], p,
                    b, C / b, v, C / v, w, C / w
            }
        }
    }
}'
