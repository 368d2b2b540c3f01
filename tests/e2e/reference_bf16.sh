#!/bin/sh
# txl's bf16 forward against the independent reference with the same roundings (issue 29).
# tests/fixtures/eval/expected_bf16.jsonl holds, per checkpoint and flags, the bpc that
# tests/ref/eval_ckpt.py (PyTorch, float64) computes on the first 2,000 bytes of the enwik8
# slice: exact (bpc_fp64); with both operands of gemm()'s products rounded to bf16 where txl
# rounds them (bpc_bf16: a CPU with AVX512_BF16 alone, where the attention stays fp32); and
# with the AMX attention's operands rounded too (bpc_bf16_amx). `txl eval --precision bf16
# --threads 1` (one thread: more threads split the streams into replicas, whose products
# have fewer rows, which moves the 2^15 threshold) must give its kernel's line to TOL = 1e-6
# relative. Both make the same roundings; what is left is fp32 against float64 arithmetic
# (txl's fp32 eval meets the exact reference to ~1e-8 on these lines) and rounding flips: an
# operand whose fp32 and float64 values straddle a bf16 rounding midpoint rounds a whole
# bf16 step (2^-8 relative) apart. Flips are rare, but they dominate: the reference run in
# float32 moves by as much as txl differs from it (4.8e-7 on a line where txl is 3e-9 from
# that float32 run), and txl's largest difference over the 70 and more evaluations measured
# (both kernels) is 4.9e-7: 1e-6 is twice that, and a thousandth of the issue's ~1e-3. The
# roundings themselves move these losses by 3e-6 to 4e-5: every line checks that its exact
# loss is outside TOL (a txl that ran fp32 would fail), and the attention's roundings move
# most lines by more than TOL too (a wrong kernel's line would fail). On a CPU with AMX the
# AVX512_BF16 kernel runs too (DNNL_MAX_CPU_ISA=AVX512_CORE_BF16 hides AMX from oneDNN and
# txl alike). Skipped on a CPU without bf16. Regenerate with tests/ref/gen_eval_fixture.sh
# --bf16 (make fixtures: all of tests/fixtures/eval/).
. tests/e2e/lib.sh
FX=tests/fixtures/eval/expected_bf16.jsonl
TOL=1e-6
kernel=$($TXL eval tests/fixtures/eval/micro.safetensors.gz --data tests/data/tinyshakespeare.txt.gz \
    --precision auto --max-tokens 100 --json 2>&1 >/dev/null | sed -n 's/.*precision auto: //p')
case "$kernel" in
"bf16 (amx)") modes="amx avx512_bf16" ;;
"bf16 (avx512_bf16)") modes=avx512_bf16 ;;
*) echo "  skip: this CPU has no bf16 (txl eval --precision auto: ${kernel:-nothing said})"
   finish; exit ;;
esac
# one line per evaluation: ckpt|flags|data|range|exact|bf16|bf16_amx|tokens bytes
jq -r '[.ckpt, .txl_flags, .data, .split_range, .bpc_fp64, .bpc_bf16, .bpc_bf16_amx,
        "\(.tokens) \(.bytes)"] | map(tostring) | join("|")' $FX > $TMP/lines
# the fixture tells bf16 from fp32, and one kernel from the other
awk -F '|' -v t=$TOL 'function rel(a, b) { d = (a - b) / b; return d < 0 ? -d : d }
    { n++
      if (rel($6, $5) < t || rel($7, $5) < t) { near++; print "  line " n ": a bf16 loss within " t " of the exact one" }
      if (rel($7, $6) >= t) moved++ }
    END { print n + 0, near + 0, moved + 0 > "'$TMP/counts'" }' $TMP/lines
read -r n near moved < $TMP/counts
check "the fixture's $n lines: every bf16 loss is more than $TOL from the exact one" test "$near" -eq 0
check "...and the attention's roundings move $moved of them by more than $TOL" test "$moved" -ge 1
for mode in $modes; do
    isa=
    [ $mode = avx512_bf16 ] && [ "$kernel" = "bf16 (amx)" ] && isa=AVX512_CORE_BF16
    echo "  -- kernel $mode${isa:+ (DNNL_MAX_CPU_ISA=$isa)}"
    while IFS='|' read -r CK flags data range exact bf amx wtok; do
        want=$amx
        [ $mode = avx512_bf16 ] && want=$bf
        b0=${range%:*} b1=${range#*:}
        slice=$TMP/slice_$b0-$b1.txt
        [ -f $slice ] || gzip -dc $data | tail -c +$((b0 + 1)) | head -c $((b1 - b0)) > $slice
        out=$(env ${isa:+DNNL_MAX_CPU_ISA=$isa} $TXL eval $CK --data $slice $flags --precision bf16 --threads 1 \
              --json -q 2>$TMP/err) || { bad "txl eval $CK $flags: $(cat $TMP/err)"; continue; }
        got=$(echo "$out" | jq -r '"\(.bpc) \(.precision) \(.tokens) \(.bytes)"')
        gtok=${got#* } got=${got%% *}
        r=$(awk -v a="$got" -v b="$want" -v e="$exact" 'function rel(x, y) { d = (x - y) / y; return d < 0 ? -d : d }
            BEGIN { printf "%.1e (exact: %.1e)", rel(a, b), rel(e, b) }')
        check "$(basename $CK .safetensors.gz) ${flags:-(trained lengths)}: bpc $got vs $want, rel $r, $gtok" \
            awk -v r="${r%% *}" -v t=$TOL -v a="$gtok" -v b="bf16 $wtok" 'BEGIN { exit !(r < t && a == b) }'
    done < $TMP/lines
done
finish
