# copy_corpus.awk: a corpus of repeated random strings, for the probes' copy tests
# (tests/e2e/probes_copy.sh) and the copy model they load (tests/ref/train_copy_model.sh).
# Each line is a random string of minl..maxl characters of `alpha`, written minr..maxr
# times, separated by single spaces, until the corpus holds `bytes` bytes:
#
#   awk -v seed=7 -v bytes=2000000 -v alpha='abc...' -v minl=8 -v maxl=40 -v minr=2 \
#       -v maxr=3 -f tests/data/copy_corpus.awk > corpus.txt
#
# The draws are the Park-Miller generator x = 16807 x mod (2^31 - 1): every product is below
# 2^46, exact in the doubles of any awk, so every awk writes the same bytes. With
# `repeat=0` each line is the string alone (random text with no copies in it).
function rnd(m) { x = (x * 16807) % 2147483647; return x % m }
BEGIN {
    x = seed + 0
    if (x <= 0) x = 1
    n = split(alpha, A, "")
    if (repeat == "") repeat = 1
    tot = 0
    while (tot < bytes) {
        len = minl + rnd(maxl - minl + 1)
        s = ""
        for (i = 0; i < len; i++) s = s A[1 + rnd(n)]
        r = repeat ? minr + rnd(maxr - minr + 1) : 1
        line = s
        for (k = 1; k < r; k++) line = line " " s
        print line
        tot += length(line) + 1
    }
}
