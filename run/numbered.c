/* numbered.c: train.keep_checkpoints, the last N checkpoints of ckpt_interval kept as
 * out_dir/step-NNNNNNNN.safetensors[.gz] (fairseq's checkpoint_N with keep-last): each is
 * the `last` of its step, whole (weights, Adam moments, memory, data position), so
 * `--resume` and every reader take it. Zero-padded to 8 digits, the names sort by step
 * (ls, a shell glob, txl eval 'DIR/step-*'). Rank 0 does the file work. */
#include "run.h"

#define STEP_PREFIX "step-"

/* The step of a numbered checkpoint's file name, or -1 for any other name. */
static long numbered_step(const char *name)
{
    size_t d = strspn(name + strlen(STEP_PREFIX), "0123456789");
    if (strncmp(name, STEP_PREFIX, strlen(STEP_PREFIX)) != 0 || d < 8 || d > 15)
        return -1;
    const char *ext = name + strlen(STEP_PREFIX) + d;
    if (strcmp(ext, ".safetensors.gz") != 0 && strcmp(ext, ".safetensors") != 0)
        return -1;
    return strtol(name + strlen(STEP_PREFIX), NULL, 10);
}

int run_numbered_temp(const char *name)
{
    const char *t = strstr(name, ".tmp.");
    return strncmp(name, STEP_PREFIX, strlen(STEP_PREFIX)) == 0 && t && strlen(t + 5) == 6;
}

/* src copied into the open file fd (a file system without hard links). */
static int copy_into(int fd, const char *src, txl_err *e)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return err_set(e, ERR_RUNTIME, "%s: cannot open: %s", src, strerror(errno));
    char buf[1 << 16];
    ssize_t n;
    int rc = 0;
    while (rc == 0 && (n = read(in, buf, sizeof buf)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        for (ssize_t o = 0; rc == 0 && n > 0 && o < n;) {
            ssize_t w = write(fd, buf + o, (size_t)(n - o));
            if (w < 0 && errno != EINTR)
                rc = -1;
            o += w > 0 ? w : 0;
        }
        if (n < 0)
            rc = -1;
    }
    int err = errno;
    close(in);
    if (rc == 0 && fsync(fd) != 0)
        rc = -1, err = errno;
    return rc ? err_set(e, ERR_RUNTIME, "copying %s: %s", src, strerror(err)) : 0;
}

/* The numbered checkpoints of out_dir up to step `upto` beyond the newest `keep` are
 * removed. Those of later steps (a run resumed from an earlier one) are left: this run
 * writes over them as it reaches their steps. */
static void prune(const trainer *t, long upto, long keep)
{
    DIR *d = opendir(t->cfg.train.out_dir);
    if (!d)
        return;
    long steps[4096];
    int n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        long s = numbered_step(de->d_name);
        if (s >= 0 && s <= upto && n < 4096)
            steps[n++] = s;
    }
    for (int i = 0; i < n; i++) { /* the newest `keep` distinct steps stay */
        int newer = 0;
        for (int j = 0; j < n; j++)
            newer += steps[j] > steps[i] && !(j < i && steps[j] == steps[i]);
        if (newer < keep)
            continue;
        for (int g = 0; g < 2; g++) {
            char name[64];
            snprintf(name, sizeof name, STEP_PREFIX "%08ld.safetensors%s", steps[i],
                     g ? ".gz" : "");
            if (unlinkat(dirfd(d), name, 0) != 0 && errno != ENOENT)
                run_note(t, TXL_EV_WARN, "warning: cannot remove %s/%s: %s",
                         t->cfg.train.out_dir, name, strerror(errno));
        }
    }
    closedir(d);
}

/* Rank 0: `last` (just written at this step) under its numbered name: a hard link (the next
 * `last` is a new file renamed over its name, so the link keeps this one), or a copy where
 * the file system has none; through a temp file renamed into place, never through a link
 * planted at the name. */
static int keep_one(const trainer *t, txl_err *e)
{
    const char *gz = t->cfg.train.ckpt_gzip ? ".gz" : "";
    char path[CFG_PATH_MAX + 64], tmp[CFG_PATH_MAX + 80], other[CFG_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/" STEP_PREFIX "%08ld.safetensors%s", t->cfg.train.out_dir,
             t->st.step, gz);
    snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return err_set(e, ERR_RUNTIME, "%s: cannot create: %s", tmp, strerror(errno));
    int rc = 0;
    if (unlink(tmp) == 0 && link(t->dir.last_path, tmp) == 0) {
        close(fd);
    } else { /* no hard links here (or the name was taken between the calls): a copy */
        close(fd);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        rc = fd < 0 ? err_set(e, ERR_RUNTIME, "%s: cannot create: %s", tmp, strerror(errno))
                    : copy_into(fd, t->dir.last_path, e);
        if (fd >= 0)
            close(fd);
    }
    if (rc == 0 && rename(tmp, path) != 0)
        rc = err_set(e, ERR_RUNTIME, "%s: %s", path, strerror(errno));
    if (rc) {
        unlink(tmp);
        return -1;
    }
    snprintf(other, sizeof other, "%s/" STEP_PREFIX "%08ld.safetensors%s", t->cfg.train.out_dir,
             t->st.step, *gz ? "" : ".gz");
    unlink(other); /* the same step in the other format (train.ckpt_gzip changed) */
    run_event(t, &(txl_event){.kind = TXL_EV_CHECKPOINT, .step = t->st.step,
                              .max_steps = t->cfg.train.max_steps, .path = path});
    prune(t, t->st.step, t->cfg.train.keep_checkpoints);
    return 0;
}

int run_keep_numbered(trainer *t, txl_err *e)
{
    int rc = dist_is_root() ? keep_one(t, e) : 0;
    if (dist_max_int(rc ? 1 : 0)) {
        if (!rc)
            err_set(e, ERR_RUNTIME, "rank 0 failed to keep the numbered checkpoint of step %ld",
                    t->st.step);
        return -1;
    }
    return 0;
}

void run_remove_numbered(const trainer *t)
{
    DIR *d = opendir(t->cfg.train.out_dir);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        if (numbered_step(de->d_name) >= 0 && unlinkat(dirfd(d), de->d_name, 0) == 0)
            n++;
    if (d)
        closedir(d);
    if (n)
        run_note(t, TXL_EV_NOTE, "--force: removed %d numbered checkpoint%s of the earlier run "
                 "in %s", n, n == 1 ? "" : "s", t->cfg.train.out_dir);
}
