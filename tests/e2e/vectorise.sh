#!/bin/sh
# The elementwise hot loops vectorise on AVX2 as on AVX-512 (issue 17: "the vectorised passes
# must not assume AVX-512"). Each file is compiled with the Makefile's own command line (make
# -n, so its flags count: without -fno-trapping-math GCC kept the softmax's exp and both
# dropout maps scalar on AVX2) for Haswell and for Skylake-AVX512, and GCC's vectoriser report
# must name each loop. A loop is found by a line of its body, so edits that move it keep
# the test valid. x86-64 only (-march names); GCC only (-fopt-info).
. tests/e2e/lib.sh
case "$(uname -m)" in x86_64) ;; *) echo "vectorise.sh: not x86-64, skipped"; finish; exit ;; esac
printf '#if defined(__clang__) || !defined(__GNUC__)\n#error not GCC\n#endif\n' |
    cc -E - > /dev/null 2>&1 || { echo "vectorise.sh: cc is not GCC, skipped"; finish; exit; }

# compile_cmd ARCH SRC: the Makefile's command line that compiles SRC for ARCH
compile_cmd() {
    make -n -B BUILD="$TMP/b" CFLAGS="-O3 -march=$1" "$TMP/b/${2%.c}.o" 2>/dev/null |
        grep -- "-c -o $TMP/b/${2%.c}.o $2\$"
}
# report CMD: GCC's "loop vectorized" lines of compile command CMD
report() { eval "$1 -fopt-info-vec-optimized" 2>&1 | grep "loop vectorized"; }

# the loop header's line: one line above the line of FILE that holds BODY (fixed string)
loop_line() { echo $(($(grep -nF -- "$2" "$1" | head -1 | cut -d: -f1) - 1)); }
# REPORT names FILE's loop at line L (GCC names an OpenMP loop by its body's line, L + 1)
names() { grep -qE "$2:($3|$(($3 + 1))):" "$1"; }

exp_loop=$(loop_line common/vmath.h "x[j] = vm_expf_neg(x[j] - sub);")
drop_loop=$(loop_line model/dropout.c "float v = drop_in(&o, i0 + (size_t)j);")
relu_loop=$(loop_line model/dropout.c "dz[i] = a[i] != 0.0f ? da[i] * scale : 0.0f;")
check "the loops are found (vmath.h:$exp_loop dropout.c:$drop_loop dropout.c:$relu_loop)" \
    test "$exp_loop" -gt 0 -a "$drop_loop" -gt 0 -a "$relu_loop" -gt 0

for arch in haswell skylake-avx512; do
    report "$(compile_cmd $arch model/attention.c)" > $TMP/att.$arch
    report "$(compile_cmd $arch model/dropout.c)" > $TMP/drop.$arch
    check "$arch: the softmax's exp loop vectorises (attention.c, vmath.h:$exp_loop)" \
        names $TMP/att.$arch vmath.h $exp_loop
    check "$arch: drop_map's element loop vectorises (dropout.c:$drop_loop)" \
        names $TMP/drop.$arch dropout.c $drop_loop
    check "$arch: dropout_relu_backward vectorises (dropout.c:$relu_loop)" \
        names $TMP/drop.$arch dropout.c $relu_loop
done

# the check itself: without -fno-trapping-math the AVX2 exp loop stays scalar (the failure
# this test is for), so the report above can tell the two apart
report "$(compile_cmd haswell model/attention.c | sed 's/ -fno-trapping-math//')" > $TMP/att.trapping
check_not "  ... and with trapping math the AVX2 exp loop is reported scalar" \
    names $TMP/att.trapping vmath.h $exp_loop
finish
