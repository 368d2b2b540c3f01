/* train.c: `txl train` — the training loop (doc/design.md: "Command line", "The model",
 * "Checkpoints").
 *
 * One step = one segment of every stream: forward, backward, global-norm clip, Adam, then
 * the memory advances. With train.grad_accum k the batch_size x k streams of a step run as
 * k micro-batches of batch_size streams (forward, backward adding to the gradient, memory),
 * then one update: the same computation as batch_size x k streams at once, to the round-off
 * of the gradient's summation order. Everything a step touches is planned before step 1;
 * the loop itself never allocates. The run directory holds config.yaml, log.jsonl, last and
 * best checkpoints, and summary.json once the run ends; `last` carries the Adam moments, the
 * memory, the data cursor and the step,
 * so --resume continues bit for bit (dropout masks are a function of seed and step, see
 * common/rng.h, so there is no sequential RNG state to restore). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../common/dist.h"
#include "../common/par.h"
#include "../common/rng.h"
#include "../data/corpus.h"
#include "../data/units.h"
#include "../io/checkpoint.h"
#include "../model/gemm.h"
#include "../model/model.h"
#include "../optim/optim.h"
#include "cli.h"
#include "cmds.h"
#include "../config/config.h"
#include "../eval/evaluate.h"
#include "../eval/terms.h"
#include "../io/train_state.h"

static volatile sig_atomic_t stop_signal = 0;

static void on_signal(int sig) { stop_signal = sig; }

#define MAX_SETS 64

/* train.skip_outlier: the running mean of the gradient norm is the plain mean of the first
 * NORM_WINDOW applied steps, then an exponential average with weight 1/NORM_WINDOW; no
 * step is skipped before NORM_WINDOW steps were applied. */
enum { NORM_WINDOW = 50 };

typedef struct {
    run_config cfg;
    model mdl;
    float *adam_m, *adam_v;
    model_acts *A;            /* [R] the activations of each replica (Bl / R streams) */
    model *rep;               /* [R] replica r > 0: the weights of mdl, its own gradient */
    double *rep_loss;         /* [R] each replica's loss sum of a micro-batch */
    int *rep_m;               /* [R] and the memory rows it leaves */
    size_t *layer_at;         /* [n_layer + 1] where layer l's tensors begin in the flat
                               * gradient (layer_at[n_layer]: its end); before layer 0 the
                               * model-wide tensors */
    int overlap;              /* MPI, one replica, train.comm_overlap: each layer's gradient
                               * sum starts as soon as its backward ends in the last
                               * micro-batch */
    int R;                    /* replicas: this rank's threads, each running Bl / R whole
                               * streams of a micro-batch (1: the threads split each op) */
    model_mem mem;            /* this rank's k x Bl streams (micro-batch j: j Bl .. j Bl + Bl) */
    corpus train_c, valid_c, test_c;
    token_span train_s, valid_s, test_s;
    tok_stream train_ts, valid_ts; /* their tokens (anchors, coordinates: data/tokens.h) */
    batcher bt;
    txl_tok *x, *y;           /* [k B, Lq] of all streams of a step; micro-batch j is rows
                               * j B .. j B + B, of which this rank uses j B + b0 .. + Bl */
    int32_t *co;              /* [k B, Lq, TXL_N_COORDS] their coordinates, or NULL */
    int B, k;                 /* streams per micro-batch (train.batch_size), micro-batches per
                               * update (train.grad_accum) */
    int Bl, b0;               /* streams of this rank in a micro-batch, the first of them
                               * (data parallelism) */
    model_mem gmem;           /* rank 0 of several: all k B streams' memory, for `last` */
    terms_pass terms;         /* rank 0, train.term_stats_interval > 0: the terms events' pass */
    FILE *log;
    int log_errno;            /* rank 0: why an event could not be written to log (the first
                               * failure; 0: none): the run stops (run_ends) and exits 1 */
    long log_fail_step;       /* the step of that event */
    char last_path[1100], best_path[1100], log_path[1100];
    train_state st;
    int quiet, tty;
    long run_steps;       /* --steps: stop after this many steps in this invocation (0 = off) */
    int threads;          /* OpenMP threads of this rank */
    long last_step;       /* the step held_path holds: written by this run, or the file this
                           * run resumed from (out_dir's last, in either format); -1 if neither */
    char held_path[1100]; /* that file: last_path, or the resumed one */
    const char *resumed_from; /* --resume's checkpoint (the file), or NULL */
    int lock_fd;          /* out_dir/.txl.lock, flock'ed for the whole run (rank 0); -1 */
    double t_start;
    /* the plan's sizes, in floats: of the model (w, and alike g, m, v) and of the activation
     * arena; the parameter count. Set by plan_model, or by dry_plan without allocating. */
    size_t par_floats, act_floats, n_weights;
} trainer;

static void trainer_free(trainer *t)
{
    free(t->x);
    free(t->y);
    free(t->co);
    tok_stream_free(&t->train_ts);
    tok_stream_free(&t->valid_ts);
    free(t->adam_m);
    free(t->adam_v);
    mem_free(&t->mem);
    mem_free(&t->gmem);
    for (int r = 0; t->A && r < t->R; r++) {
        acts_free(&t->A[r]);
        if (r > 0)
            model_replica_free(&t->rep[r]);
    }
    free(t->A);
    free(t->rep);
    free(t->rep_loss);
    free(t->rep_m);
    free(t->layer_at);
    terms_free(&t->terms);
    model_free(&t->mdl);
    corpus_close(&t->train_c);
    corpus_close(&t->valid_c);
    corpus_close(&t->test_c);
    if (t->log)
        fclose(t->log);
    if (t->lock_fd >= 0)
        close(t->lock_fd); /* releases the lock */
}

/* mkdir -p */
static int make_dirs(const char *path, txl_err *e)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return err_set(e, ERR_INPUT, "%s: cannot create directory %s: %s", path, buf,
                           strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return err_set(e, ERR_INPUT, "train.out_dir %s: cannot create: %s", path, strerror(errno));
    struct stat sb;
    if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return err_set(e, ERR_INPUT, "train.out_dir %s: exists and is not a directory", path);
    /* fail now, not after an hour of training, if checkpoints cannot be written */
    char probe[1100];
    snprintf(probe, sizeof probe, "%s/.txl-write-test.XXXXXX", buf);
    int fd = mkstemp(probe);
    if (fd < 0)
        return err_set(e, ERR_INPUT, "train.out_dir %s: not writable: %s", path, strerror(errno));
    close(fd);
    unlink(probe);
    return 0;
}

/* The pid holding an flock on fd's file, from /proc/locks (Linux); 0 if unknown. */
static long lock_holder(int fd)
{
    struct stat st;
    FILE *f = fstat(fd, &st) == 0 ? fopen("/proc/locks", "r") : NULL;
    char line[256];
    long pid = 0;
    while (f && !pid && fgets(line, sizeof line, f)) {
        long p;
        unsigned maj, min;
        unsigned long long ino;
        /* "1: FLOCK  ADVISORY  WRITE 8387 fe:00:10952806 0 EOF" (waiters: "1: -> FLOCK") */
        if (sscanf(line, "%*d: FLOCK %*s %*s %ld %x:%x:%llu", &p, &maj, &min, &ino) == 4 &&
            ino == (unsigned long long)st.st_ino && makedev(maj, min) == st.st_dev)
            pid = p;
    }
    if (f)
        fclose(f);
    return pid;
}

/* One run per out_dir: an exclusive flock on out_dir/.txl.lock, held until the process ends
 * (trainer_free). The file stays empty (the holder's pid comes from /proc/locks), so taking
 * the lock changes nothing in the directory but its creation. */
static int lock_out_dir(trainer *t, txl_err *e)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/.txl.lock", t->cfg.train.out_dir);
    int fd = open(path, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return errno == ELOOP
                   ? err_set(e, ERR_INPUT, "%s: a symbolic link; txl writes no file of out_dir "
                             "through a link", path)
                   : err_set(e, ERR_INPUT, "%s: cannot open the lock file: %s", path,
                             strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        long pid = err == EWOULDBLOCK ? lock_holder(fd) : 0;
        close(fd);
        if (err != EWOULDBLOCK)
            return err_set(e, ERR_INPUT, "%s: cannot lock: %s", path, strerror(err));
        if (pid > 0)
            return err_set(e, ERR_INPUT, "train.out_dir %s is in use by another txl train (pid "
                           "%ld holds %s); wait for it to end, or use another out_dir",
                           t->cfg.train.out_dir, pid, path);
        return err_set(e, ERR_INPUT, "train.out_dir %s is in use by another txl train (it holds "
                       "%s); wait for it to end, or use another out_dir", t->cfg.train.out_dir,
                       path);
    }
    t->lock_fd = fd;
    return 0;
}

/* Temp files a killed run of this out_dir may have left: config.yaml.tmp, summary.json.tmp,
 * checkpoint temps
 * (st_write: NAME.tmp.XXXXXX) and make_dirs' probe. Under the lock no writer owns them. */
static int is_stale_temp(const char *name)
{
    static const char *const prefix[] = {"last.safetensors.gz.tmp.", "last.safetensors.tmp.",
                                         "best.safetensors.gz.tmp.", "best.safetensors.tmp.",
                                         ".txl-write-test."};
    if (strcmp(name, "config.yaml.tmp") == 0 || strcmp(name, "summary.json.tmp") == 0 ||
        strcmp(name, "log.jsonl.tmp") == 0)
        return 1;
    for (size_t i = 0; i < sizeof prefix / sizeof prefix[0]; i++) {
        size_t n = strlen(prefix[i]);
        if (strncmp(name, prefix[i], n) == 0 && strlen(name + n) == 6) /* mkstemp's XXXXXX */
            return 1;
    }
    return 0;
}

static void remove_stale_temps(const trainer *t)
{
    DIR *d = opendir(t->cfg.train.out_dir);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        if (is_stale_temp(de->d_name) && unlinkat(dirfd(d), de->d_name, 0) == 0)
            n++;
    if (d)
        closedir(d);
    if (n && !t->quiet)
        fprintf(stderr, "txl train: removed %d temp file%s an earlier run left in %s\n", n,
                n == 1 ? "" : "s", t->cfg.train.out_dir);
}

/* Files of out_dir are opened without following a link: a planted link must not make txl
 * write or truncate its target (config.yaml and the checkpoints are renamed into place,
 * which replaces a link; log.jsonl and the temp files are opened with O_NOFOLLOW). */
static int open_err(txl_err *e, const char *path)
{
    if (errno == ELOOP)
        return err_set(e, ERR_INPUT, "%s: a symbolic link; txl writes no file of out_dir "
                       "through a link", path);
    return err_set(e, ERR_RUNTIME, "%s: cannot open: %s", path, strerror(errno));
}

/* A resumed run appends to log.jsonl. When that file has other names (a run directory
 * copied with `cp -al` or an `rsync --link-dest` snapshot shares its files with the
 * original), appending would write into the other run's log too: the run continues in a
 * copy of its own, written beside it and renamed into place (the other files of out_dir
 * are renamed into place anyway). */
static int unshare_log(const char *path, txl_err *e)
{
    struct stat sb;
    int in = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0)
        return errno == ENOENT ? 0 : open_err(e, path);
    if (fstat(in, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_nlink <= 1) {
        close(in);
        return 0;
    }
    char tmp[1200], buf[65536];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    unlink(tmp); /* ours: out_dir is locked */
    int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    int rc = out < 0 ? -1 : 0;
    while (rc == 0) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -1 : 0;
            break;
        }
        for (ssize_t w = 0, k; rc == 0 && w < n;)
            if ((k = write(out, buf + w, (size_t)(n - w))) >= 0)
                w += k;
            else if (errno != EINTR)
                rc = -1;
    }
    int err = errno;
    if (rc == 0 && fsync(out) != 0)
        rc = -1, err = errno;
    if (out >= 0 && close(out) != 0 && rc == 0)
        rc = -1, err = errno;
    close(in);
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -1, err = errno;
    if (rc) {
        if (out >= 0)
            unlink(tmp);
        return err_set(e, ERR_RUNTIME, "%s: it has %ld other names (a copy made with hard "
                       "links), and a copy of its own could not be written: %s", path,
                       (long)sb.st_nlink - 1, strerror(err));
    }
    return 0;
}

/* log.jsonl: appended to on --resume (in a file of its own: unshare_log); a new run starts a
 * new file (an old one, or a link, is removed first). */
static FILE *open_log(const char *path, int resume, txl_err *e)
{
    if (resume && unshare_log(path, e))
        return NULL;
    if (!resume && unlink(path) != 0 && errno != ENOENT) {
        err_set(e, ERR_RUNTIME, "%s: cannot remove the old log: %s", path, strerror(errno));
        return NULL;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC |
                            (resume ? 0 : O_EXCL), 0644);
    /* a run killed while writing a line left it without its newline: the next event starts
     * on a line of its own (readers skip the cut line) */
    struct stat sb;
    char lastc = '\n';
    if (fd >= 0 && fstat(fd, &sb) == 0 && sb.st_size > 0 &&
        pread(fd, &lastc, 1, sb.st_size - 1) == 1 && lastc != '\n' && write(fd, "\n", 1) != 1) {
        err_set(e, ERR_RUNTIME, "%s: cannot append: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    FILE *f = fd >= 0 ? fdopen(fd, "a") : NULL;
    if (!f) {
        open_err(e, path);
        if (fd >= 0)
            close(fd);
    }
    return f;
}

/* Writes out_dir/NAME through NAME.tmp (created anew, never through a link), fsync and
 * rename: a crash leaves the old file or the new one, and a link planted at NAME is
 * replaced, not followed. put writes the content and returns nonzero on failure. */
static int write_out_file(const char *dir, const char *name,
                          int (*put)(FILE *f, const void *arg), const void *arg, txl_err *e)
{
    char path[1100], tmp[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    unlink(tmp); /* ours: out_dir is locked */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return open_err(e, tmp);
    }
    int rc = put(f, arg);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0)
        rc = -1;
    if (fclose(f) != 0)
        rc = -1;
    if (rc || rename(tmp, path) != 0) {
        unlink(tmp);
        return err_set(e, ERR_RUNTIME, "%s: cannot write: %s", path, strerror(errno));
    }
    return 0;
}

static int put_config(FILE *f, const void *c) { return cfg_write_yaml(c, f); }

static int write_config_yaml(const run_config *c, txl_err *e)
{
    return write_out_file(c->train.out_dir, "config.yaml", put_config, c, e);
}

/* The train/valid/test spans from data.* (data/corpus.h: data_open_splits). */
static int open_data(trainer *t, txl_err *e)
{
    const data_config *d = &t->cfg.data;
    data_paths p = {d->train, d->valid, d->test, d->split};
    corpus *files[3] = {&t->train_c, &t->valid_c, &t->test_c};
    token_span sp[3];
    if (data_open_splits(&p, files, sp, e))
        return -1;
    t->train_s = sp[SPLIT_TRAIN];
    t->valid_s = sp[SPLIT_VALID];
    t->test_s = sp[SPLIT_TEST];
    if (cfg_tokens(&t->cfg, t->train_s, &t->train_ts, e))
        return err_wrap(e, "data.train");
    if (t->valid_s.n && cfg_tokens(&t->cfg, t->valid_s, &t->valid_ts, e))
        return err_wrap(e, "the valid split");
    return 0;
}

static int write_checkpoint(trainer *t, const char *path, const model_mem *mem,
                            double valid_loss, txl_err *e);

/* After PATH (out_dir/last or best in this run's format) was written, the same checkpoint
 * in the other format is an older one (train.ckpt_gzip was switched): removed, so that
 * neither `--resume DIR` nor `eval DIR` can take it. */
static void remove_other_format(const trainer *t, const char *path)
{
    char other[1200];
    size_t n = strlen(path);
    if (n > 3 && strcmp(path + n - 3, ".gz") == 0)
        snprintf(other, sizeof other, "%.*s", (int)(n - 3), path);
    else
        snprintf(other, sizeof other, "%s.gz", path);
    if (unlink(other) == 0) {
        if (!t->quiet)
            fprintf(stderr, "%stxl train: removed %s, the older checkpoint in the other format "
                    "(train.ckpt_gzip changed)\n", t->tty ? "\r\033[K" : "", other);
    } else if (errno != ENOENT) {
        fprintf(stderr, "txl train: warning: cannot remove %s, an older checkpoint in the other "
                "format: %s (readers of the run directory take the later step)\n", other,
                strerror(errno));
    }
}

/* What `last` holds, for messages about a stop: "PATH still holds step N", or that this run
 * wrote none. */
static void last_desc(const trainer *t, char *buf, size_t cap)
{
    char before[CKPT_PATH_MAX];
    txl_err e = {0};
    if (t->last_step >= 0)
        snprintf(buf, cap, "%s still holds step %ld", t->held_path, t->last_step);
    else if (ckpt_in_run(t->cfg.train.out_dir, "last", before, sizeof before, &e) > 0)
        snprintf(buf, cap, "no checkpoint was written (%s is the one from before this run)",
                 before);
    else
        snprintf(buf, cap, "no checkpoint was written (there is no %s)", t->last_path);
}

/* A checkpoint must never hold a non-finite weight or Adam moment (a blow-up shows in the
 * weights one step before the loss turns NaN). One pass over w, m and v, on the bits (an
 * all-ones exponent is inf or NaN; integer ops vectorise). 0 if all are finite; else -1
 * with the message. */
static int check_finite(const trainer *t, txl_err *e)
{
    const float *arr[3] = {t->mdl.w, t->adam_m, t->adam_v};
    static const char *const what[3] = {"a weight", "an Adam moment (m)", "an Adam moment (v)"};
    size_t n = t->mdl.n_floats;
    uint32_t bad = 0;
    for (int a = 0; a < 3; a++)
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &arr[a][i], sizeof u);
            bad |= (u & 0x7f800000u) == 0x7f800000u;
        }
    if (!bad)
        return 0;
    int a = 0;
    size_t i = 0;
    for (; a < 3; a++) {
        for (i = 0; i < n && isfinite(arr[a][i]); i++)
            ;
        if (i < n)
            break;
    }
    const char *name = "?";
    for (int k = 0; k < t->mdl.n_params; k++)
        if (i >= t->mdl.table[k].offset && i < t->mdl.table[k].offset + t->mdl.table[k].numel)
            name = t->mdl.table[k].name;
    char held[1300];
    last_desc(t, held, sizeof held);
    return err_set(e, ERR_RUNTIME, "step %ld: %s of tensor '%s' is %g after the update; "
                   "stopping without writing a checkpoint, so %s. Lower train.lr or set "
                   "train.clip.", t->st.step, what[a], name, (double)arr[a][i], held);
}

/* The memory of all k B streams in global order on rank 0 (collective): micro-batch j's
 * streams j B .. j B + B come from the ranks in rank order, Bl each, states and coordinates. */
static void gather_mem(trainer *t)
{
    const model_mem *mm = &t->mem;
    int root = dist_is_root();
    size_t rows = (size_t)mm->M * mm->d, nco = (size_t)mm->M * TXL_N_COORDS;
    for (int j = 0; j < t->k; j++) {
        model_mem src = mem_slice(mm, j * t->Bl, t->Bl);
        model_mem dst = root ? mem_slice(&t->gmem, j * t->B, t->B) : src;
        for (int l = 0; l < mm->n_layer; l++)
            dist_gather_f32(mem_layer(&src, l), t->Bl * rows, root ? mem_layer(&dst, l) : NULL);
        if (mm->coords)
            dist_gather_i32(src.coords, t->Bl * nco, root ? dst.coords : NULL);
    }
    t->gmem.m = mm->m;
}

/* Every rank calls this (the memory gather is collective); rank 0 writes; all return the
 * same status. */
static int save_checkpoint(trainer *t, const char *path, int with_state, double valid_loss,
                           txl_err *e)
{
    if (check_finite(t, e)) /* every rank holds the same weights: all stop alike */
        return -1;
    const model_mem *mem = &t->mem; /* one process: already all streams, in order */
    if (with_state && dist_self()->size > 1) {
        gather_mem(t);
        mem = &t->gmem;
    }
    int rc = dist_is_root() ? write_checkpoint(t, path, with_state ? mem : NULL, valid_loss, e) : 0;
    if (dist_max_int(rc ? 1 : 0)) {
        if (!rc)
            err_set(e, ERR_RUNTIME, "%s: rank 0 failed to write the checkpoint", path);
        return -1;
    }
    if (dist_is_root())
        remove_other_format(t, path);
    if (with_state) {
        t->last_step = t->st.step;
        snprintf(t->held_path, sizeof t->held_path, "%s", path);
    }
    return 0;
}

static int write_checkpoint(trainer *t, const char *path, const model_mem *mem,
                            double valid_loss, txl_err *e)
{
    char *cfg_yaml = cfg_to_yaml(&t->cfg);
    if (!cfg_yaml)
        return err_set(e, ERR_RUNTIME, "out of memory serialising the config");
    train_state s = t->st;
    s.elapsed += sys_now() - t->t_start;
    s.valid_loss = valid_loss;
    train_state_meta sm;
    train_state_format(&s, &sm);
    const char *meta[6 + 2 * TRAIN_STATE_KEYS + 1] = {
        "format", "txl/1",
        "config", cfg_yaml,
        "rng", "counter-based: dropout masks = hash(seed, step, site, index)",
    };
    memcpy(meta + 6, sm.kv, sizeof sm.kv);
    int rc = ckpt_save(path, &t->mdl, mem ? t->adam_m : NULL, mem ? t->adam_v : NULL, mem,
                       meta, t->cfg.train.ckpt_gzip ? 1 : 0, e);
    free(cfg_yaml);
    return rc;
}

/* After an event was written to log: a failed write (a full disk, an I/O error) is kept,
 * and the run stops at the next step's agreement (run_ends) rather than go on losing
 * events with exit 0. */
static void log_flush(trainer *t)
{
    errno = 0;
    if ((fflush(t->log) != 0 || ferror(t->log)) && !t->log_errno) {
        t->log_errno = errno ? errno : EIO;
        t->log_fail_step = t->st.step;
    }
}

static void log_json(trainer *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_json(trainer *t, const char *fmt, ...)
{
    if (!t->log || !dist_is_root())
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(t->log, fmt, ap);
    va_end(ap);
    fputc('\n', t->log);
    log_flush(t);
}

/* The tokens' meaning: anchors and the document separator decide what the ids and the
 * coordinates are, so a checkpoint continues only with the same ones. 1 and the message
 * when they differ. */
static int data_tokens_differ(const run_config *ck, const run_config *now, char *why,
                              size_t cap)
{
    char a[32], b[32];
    units_anchor_list((unsigned)ck->data.anchors, a, sizeof a);
    units_anchor_list((unsigned)now->data.anchors, b, sizeof b);
    if (ck->data.anchors != now->data.anchors)
        snprintf(why, cap, "data.anchors differ from the checkpoint's (token ids would change "
                 "meaning): checkpoint %s, now %s", a, b);
    else if (strcmp(ck->data.doc_separator, now->data.doc_separator) != 0)
        snprintf(why, cap, "data.doc_separator differs from the checkpoint's (documents "
                 "would start elsewhere)");
    else
        return 0;
    return 1;
}

/* A run continues only with the streams of its checkpoint: the memory and the data cursor
 * are per stream, and the streams of a step are train.batch_size x train.grad_accum (how
 * they split into micro-batches may change: a stream's memory, data and dropout masks
 * depend on its global index alone). 1 and the message when they differ. */
static int streams_differ(const train_config *ck, const train_config *now, char *why,
                          size_t cap)
{
    long long a = (long long)ck->batch_size * ck->grad_accum;
    long long b = (long long)now->batch_size * now->grad_accum;
    if (a == b)
        return 0;
    if (ck->grad_accum == now->grad_accum && ck->grad_accum == 1)
        snprintf(why, cap, "train.batch_size %d differs from the checkpoint's %d (the memory "
                 "and data cursor are per stream)", now->batch_size, ck->batch_size);
    else
        snprintf(why, cap, "train.batch_size x train.grad_accum = %d x %d = %lld streams "
                 "differ from the checkpoint's %d x %d = %lld (the memory and data cursor are "
                 "per stream: keep the product)", now->batch_size, now->grad_accum, b,
                 ck->batch_size, ck->grad_accum, a);
    return 1;
}

/* The checkpoint's memory of all k B streams: this rank's streams of each micro-batch (one
 * process: all of them at once). */
static int load_mem(trainer *t, const st_file *f, txl_err *e)
{
    int total = t->k * t->B;
    if (dist_self()->size == 1)
        return ckpt_load_mem(f, &t->mem, 0, total, e);
    for (int j = 0; j < t->k; j++) {
        model_mem s = mem_slice(&t->mem, j * t->Bl, t->Bl);
        if (ckpt_load_mem(f, &s, (size_t)j * t->B + (size_t)t->b0, total, e))
            return -1;
        t->mem.m = s.m;
    }
    return 0;
}

/* Restores everything --resume needs from `last`; the model config must be identical. dry
 * (--dry-run, no model allocated): the checks and the state, no tensors. */
static int load_resume(trainer *t, const char *path, int dry, txl_err *e)
{
    st_file f;
    if (st_open(&f, path, e))
        return -1;
    run_config ck;
    cfg_defaults(&ck);
    train_state st = t->st;
    const char *text = st_meta(&f, "config");
    int rc = 0;
    if (!text)
        rc = err_set(e, ERR_INPUT, "%s: no 'config' in the metadata (not a txl checkpoint)", path);
    else if (cfg_load_meta(&ck, text, path, e) || train_state_read(&st, &f, e))
        rc = -1;
    if (rc == 0) {
        char diff[1024];
        if (data_tokens_differ(&ck, &t->cfg, diff, sizeof diff))
            rc = err_set(e, ERR_INPUT, "--resume %s: %s", path, diff);
        else if (cfg_diff_model(&ck.model, &t->cfg.model, diff, sizeof diff) > 0)
            rc = err_set(e, ERR_INPUT, "--resume %s: the model config differs from the "
                         "checkpoint's (checkpoint vs now): %s", path, diff);
        else if (streams_differ(&ck.train, &t->cfg.train, diff, sizeof diff))
            rc = err_set(e, ERR_INPUT, "--resume %s: %s", path, diff);
        else if (st.train_tokens != t->train_ts.n)
            rc = err_set(e, ERR_INPUT, "--resume %s: the train split has %zu tokens, the "
                         "checkpoint was trained on %zu (different corpus or split?)", path,
                         t->train_ts.n, st.train_tokens);
        else if (ckpt_check_meta(&f, &t->cfg, t->n_weights, e))
            rc = -1;
    }
    /* the header against the model and its whole state before the data is read (dry: the
     * table alone) */
    model tab = {0};
    const model_config *m = &t->cfg.model;
    ckpt_state cs = {.streams = t->k * t->B, .mem_len = m->mem_len,
                     .coords = pos_get(m->pos)->needs_coords, .exact = 1};
    if (rc == 0 && ((dry && model_init_table(&tab, m, e)) ||
                    ckpt_check_header(dry ? &tab : &t->mdl, &f, &cs, e) ||
                    st_read_data(&f, e)))
        rc = -1;
    model_free(&tab);
    if (rc == 0 && !dry && (ckpt_load_weights(&t->mdl, &f, e) ||
                            ckpt_load_optim(&t->mdl, &f, t->adam_m, t->adam_v, e) ||
                            load_mem(t, &f, e)))
        rc = -1;
    if (rc == 0 && st.data_pos >= t->bt.n)
        rc = err_set(e, ERR_INPUT, "%s: metadata 'data_pos' %zu is past the end of the streams "
                     "(%zu)", path, st.data_pos, t->bt.n);
    if (rc == 0) {
        st.seed = t->cfg.train.seed; /* the config's, which --set may change */
        t->st = st;
    }
    st_free(&f);
    return rc;
}

/* --init-from: the checkpoint's weights, whose shapes the config must have; dry
 * (--dry-run): the checks only (the checkpoint is read whole and validated). */
static int load_init_from(trainer *t, const char *path, int dry, txl_err *e)
{
    st_file f;
    run_config ck;
    model src;
    if (cli_load_checkpoint(path, "train", t->quiet, &f, &ck, &src, e))
        return -1;
    char diff[1024];
    int rc = 0;
    /* weights must fit: shape keys must agree; lengths, dropout, clamp may change */
    model_config a = ck.model, b = t->cfg.model;
    a.tgt_len = b.tgt_len;
    a.mem_len = b.mem_len;
    a.dropout = b.dropout;
    a.dropatt = b.dropatt;
    a.clamp_len = b.clamp_len;
    a.pre_lnorm = b.pre_lnorm;
    if (data_tokens_differ(&ck, &t->cfg, diff, sizeof diff))
        rc = err_set(e, ERR_INPUT, "--init-from %s: %s", path, diff);
    else if (cfg_diff_model(&a, &b, diff, sizeof diff) > 0)
        rc = err_set(e, ERR_INPUT, "--init-from %s: parameter shapes differ from the config "
                     "(checkpoint vs config): %s", path, diff);
    else if (!dry)
        rc = ckpt_load_weights(&t->mdl, &f, e);
    model_free(&src);
    st_free(&f);
    return rc;
}

/* Bytes of the memory this process holds: its k x Bl streams (and, on rank 0 of several,
 * the gathered copy of all k B streams). */
static double mem_bytes(const trainer *t)
{
    const model_config *m = &t->cfg.model;
    return mem_plan_bytes(m, t->k * t->Bl, m->mem_len) +
           (t->gmem.buf ? mem_plan_bytes(m, t->k * t->B, m->mem_len) : 0);
}

static int valid_batch(const trainer *t);

/* Bytes of a validation pass on this rank (planned at each validation, beside everything
 * else): activations, memory and the memory's keys of its streams. */
static double valid_bytes(const trainer *t)
{
    const model_config *m = &t->cfg.model;
    int B = valid_batch(t), nr = dist_self()->size;
    if (t->valid_ts.n < 2)
        return 0;
    if (B % nr == 0)
        B /= nr;
    double act = 0;
    txl_err e;
    if (acts_plan_floats(m, B, m->tgt_len, m->mem_len, 0, &act, &e))
        act = 0;
    return (act + (double)kv_cache_plan_floats(m, B, m->mem_len, m->tgt_len)) * 4 +
           mem_plan_bytes(m, B, m->mem_len);
}

/* Estimated resident memory of this process in MiB: weights, gradients (one per replica),
 * 2 Adam moments,
 * the planned activations (for one micro-batch), the memory, the term pass's (activations
 * and memory, train.term_stats_interval), a validation pass's, and ~20 MiB of code and
 * libraries. */
static double plan_mib(const trainer *t)
{
    const model_config *m = &t->cfg.model;
    double act = (double)t->act_floats * 4 + valid_bytes(t);
    double par = (double)t->par_floats * 4 * (3 + t->R);
    const eval_pass *tp[2] = {&t->terms.plan.p, &t->terms.plan.tail};
    for (int i = 0; i < 2; i++)
        act += ((double)tp[i]->A.arena_floats + (double)kv_cache_floats(&tp[i]->kv)) * 4 +
               (tp[i]->mem.buf ? mem_plan_bytes(m, tp[i]->mem.B, tp[i]->mem.M) : 0);
    return (par + act + mem_bytes(t)) / 1048576.0 + 20;
}

static void print_plan(const trainer *t)
{
    const run_config *c = &t->cfg;
    const model_config *m = &c->model;
    size_t act = t->act_floats * 4, par = t->par_floats * 4 * (size_t)(3 + t->R);
    char accum[48] = "";
    if (t->k > 1)
        snprintf(accum, sizeof accum, " x %d accum", t->k);
    fprintf(stderr,
            "txl train: %s, %d layers, d_model %d, %d heads x %d, d_inner %d, %.2fM params\n"
            "  tokens/step %lld (batch %d%s x tgt_len %d), mem_len %d, pre_lnorm %s, "
            "dropout %g\n"
            "  memory: params+grads+adam %.1f MiB, activations %.1f MiB, mem %.1f MiB "
            "(estimate %.0f MiB)\n"
            "  data: train %zu bytes (%s), valid %zu, test %zu; OpenBLAS core %s\n"
            "  out_dir %s\n",
            pos_scheme_name(m->pos), m->n_layer, m->d_model, m->n_head, m->d_head,
            m->d_inner, t->n_weights / 1e6, (long long)t->k * t->B * m->tgt_len,
            t->B, accum, m->tgt_len, m->mem_len, m->pre_lnorm ? "yes" : "no",
            m->dropout, par / 1048576.0, act / 1048576.0, mem_bytes(t) / 1048576.0,
            plan_mib(t), t->train_s.n, t->train_s.path,
            t->valid_s.n, t->test_s.n, sys_blas_core(), c->train.out_dir);
    if (t->resumed_from)
        fprintf(stderr, "  resuming at step %ld of %ld from %s\n", t->st.step,
                c->train.max_steps, t->resumed_from);
}

/* The streams of a pass over the valid split: train.batch_size, fewer when the split is
 * tiny (each stream needs an input and its target). */
static int valid_batch(const trainer *t)
{
    int B = t->cfg.train.batch_size;
    while (B > 1 && t->valid_ts.n / (size_t)B < 2)
        B /= 2;
    return B;
}

/* Validation over the valid split (distributed like training); *loss is NaN without one. */
static int run_valid(trainer *t, double *loss, txl_err *e)
{
    *loss = NAN;
    if (t->valid_ts.n == 0)
        return 0;
    const model_config *m = &t->cfg.model;
    eval_opts o = {.batch = valid_batch(t), .tgt_len = m->tgt_len,
                   .mem_len = m->mem_len, .max_tokens = (size_t)t->cfg.train.eval_tokens,
                   .progress = t->tty && !t->quiet && dist_is_root(), .label = "valid",
                   .distributed = 1};
    eval_result r;
    if (eval_stream(&t->mdl, m, &t->valid_ts, &o, &r, e))
        return -1;
    log_json(t, "{\"event\":\"eval\",\"split\":\"valid\",\"step\":%ld,\"loss\":%.6f,"
                "\"bpc\":%.6f,\"ppl\":%.4f,\"tokens\":%zu,\"bytes\":%zu,\"anchor_tokens\":%zu,"
                "\"anchor_bits\":%.2f,\"elapsed_s\":%.1f}",
             t->st.step, r.loss, r.loss / M_LN2, exp(r.loss), r.tokens, r.bytes,
             r.anchor_tokens, r.anchor_bits, t->st.elapsed + sys_now() - t->t_start);
    if (!t->quiet && dist_is_root())
        fprintf(stderr, "%sstep %ld: valid loss %.4f, bpc %.4f (%zu bytes, %.1fs)\n",
                t->tty ? "\r\033[K" : "", t->st.step, r.loss, r.loss / M_LN2, r.bytes,
                r.seconds);
    *loss = r.loss;
    return 0;
}

/* The loop's bookkeeping: the schedule, Adam's settings, and what the log lines need. */
typedef struct {
    lr_schedule sched;
    adam_hparams ah;
    long first_step;       /* where this invocation started (--steps counts from here) */
    double t_log;          /* time of the last log line */
    long long tok_log;     /* tokens trained since then */
    double comm_log;       /* communication seconds at the last log line */
    double exposed_log;    /* and exposed ones (dist_exposed_seconds) */
    double gemm_log;       /* GEMM thread-seconds at the last log line */
    double loss, norm, lr; /* of the last step: mean loss (nats), gradient norm, lr */
    size_t ntok;           /* tokens of the last step (the whole batch) */
    int stop;              /* the stop signal all ranks agreed on (0: none yet); every
                            * collective decision reads this, never stop_signal itself,
                            * which a signal may change on one rank at any moment */
} loop_state;

static void loop_init(trainer *t, loop_state *ls)
{
    const train_config *tc = &t->cfg.train;
    memset(ls, 0, sizeof *ls);
    ls->sched = (lr_schedule){.kind = tc->schedule, .lr = tc->lr, .lr_min = tc->lr_min,
                              .warmup = tc->warmup_steps, .max_steps = tc->max_steps};
    ls->ah = (adam_hparams){.beta1 = tc->beta1, .beta2 = tc->beta2, .eps = tc->eps,
                            .weight_decay = tc->weight_decay,
                            .decoupled = tc->optimizer == OPT_ADAMW};
    ls->first_step = t->st.step;
    ls->t_log = sys_now();
    ls->comm_log = dist_comm_seconds();
    ls->exposed_log = dist_exposed_seconds();
    ls->gemm_log = gemm_thread_seconds();
    ls->loss = ls->norm = NAN;
    t->bt.pos = t->st.data_pos;
}

/* The next segment of every stream (its length); at the end of a pass over the train
 * split the next epoch starts over with fresh memory. -1 (every rank alike) when the corpus
 * cannot be read (truncated under txl, say): the state is then the last step's (epoch and
 * memory untouched, so the checkpoint stop_keeping_last writes resumes at this same end and
 * holds the memory, which a checkpoint to resume always does: ckpt_check_header). */
static int next_batch(trainer *t, txl_err *e)
{
    int len = batcher_next(&t->bt, t->x, t->y, t->co, e), wrapped = len == 0;
    if (wrapped) {
        t->bt.pos = 0;
        len = batcher_next(&t->bt, t->x, t->y, t->co, e);
    }
    if (dist_max_int(len < 0))
        return -1;
    if (wrapped) {
        t->st.epoch++;
        mem_reset(&t->mem);
    }
    return len;
}

/* Reading the data failed mid-run (the batcher or the validation pass). The weights are
 * those of the last completed step: `last` is brought up to it when it holds an older
 * one, and the message says which step it holds. */
static int stop_keeping_last(trainer *t, txl_err *e)
{
    if (!e->msg[0])
        err_set(e, ERR_INPUT, "another rank could not read the corpus");
    size_t n = strlen(e->msg);
    txl_err we = {0};
    if (t->last_step != t->st.step && save_checkpoint(t, t->last_path, 1, NAN, &we)) {
        snprintf(e->msg + n, sizeof e->msg - n, "; writing %s failed too: %s", t->last_path,
                 we.msg);
        return -1;
    }
    char held[1300];
    last_desc(t, held, sizeof held);
    snprintf(e->msg + n, sizeof e->msg - n, "; %s", held);
    return -1;
}

/* A far outlier of the gradient norm (train.skip_outlier) gets no update: the data and the
 * memory move on. Every rank holds the same global norm, so all decide alike. */
static int is_outlier(const trainer *t, double norm)
{
    const train_config *tc = &t->cfg.train;
    return tc->skip_outlier > 0 && t->st.norm_count >= NORM_WINDOW &&
           norm > tc->skip_outlier * t->st.norm_mean;
}

static void skip_update(trainer *t, long step, double norm)
{
    t->st.skipped++;
    log_json(t, "{\"event\":\"skip\",\"step\":%ld,\"grad_norm\":%.6g,"
                "\"mean_norm\":%.6g,\"skipped\":%ld}",
             step, norm, t->st.norm_mean, t->st.skipped);
    if (!t->quiet && dist_is_root())
        fprintf(stderr, "%sstep %ld: skipped, gradient norm %.4g > %g x its mean %.4g "
                "(%ld skipped so far)\n", t->tty ? "\r\033[K" : "", step, norm,
                t->cfg.train.skip_outlier, t->st.norm_mean, t->st.skipped);
}

/* Global-norm clipping (as a scale inside Adam) and the Adam step; then the running mean
 * of the applied steps' gradient norms. */
static void apply_update(trainer *t, const loop_state *ls, long step, double norm, double lr)
{
    adam_step_scaled(t->mdl.w, t->mdl.g, clip_coef(norm, t->cfg.train.clip), t->adam_m,
                     t->adam_v, t->mdl.n_floats, step, lr, &ls->ah);
    t->st.norm_count++;
    double w = t->st.norm_count < NORM_WINDOW ? 1.0 / (double)t->st.norm_count
                                              : 1.0 / NORM_WINDOW;
    t->st.norm_mean += w * (norm - t->st.norm_mean);
}

/* mdl's gradient += those of replicas 1 .. R - 1, in that order, each element summed by
 * one thread */
static void sum_replica_grads(trainer *t)
{
    size_t n = t->mdl.n_floats;
    float *g = t->mdl.g;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float s = g[i];
        for (int r = 1; r < t->R; r++)
            s += t->rep[r].g[i];
        g[i] = s;
    }
}

/* model_backward's hook in the last micro-batch of a step (t->overlap): layer l's gradient
 * is final, so its sum over the ranks starts while the layers below run; the sums started
 * before it get a chance to progress. */
static void layer_grads_done(void *ctx, int l)
{
    trainer *t = ctx;
    dist_isum_f32(t->mdl.g + t->layer_at[l], t->layer_at[l + 1] - t->layer_at[l]);
    dist_poll();
}

/* The step's gradient summed over the ranks: with overlap, the layers' sums are under way
 * (accumulate), so the model-wide tensors' sum, then the wait; otherwise one sum. */
static void sum_over_ranks(trainer *t)
{
    if (t->overlap) {
        dist_sum_f32(t->mdl.g, t->layer_at[0]);
        dist_wait();
    } else {
        dist_sum_f32(t->mdl.g, t->mdl.n_floats);
    }
}

/* Replica r's part of micro-batch j: streams r Br .. r Br + Br of this rank's Bl, forward,
 * backward (into its gradient), its memory advanced. Returns its loss sum (nats). */
static double replica_pass(trainer *t, const fwd_opts *o0, int j, int r, int len, size_t ntok,
                           int *m)
{
    int Br = t->Bl / t->R;
    size_t first = (size_t)j * t->B + (size_t)t->b0 + (size_t)r * Br, off = first * (size_t)len;
    model_mem mj = mem_slice(&t->mem, j * t->Bl + r * Br, Br);
    mj.m = *m;
    fwd_opts o = *o0;
    o.coords = t->co ? t->co + off * TXL_N_COORDS : NULL;
    model *mdl = r ? &t->rep[r] : &t->mdl;
    model_acts *A = &t->A[r];
    A->b_offset = first;
    double loss = model_forward(mdl, A, &mj, t->x + off, t->y + off, len, &o);
    model_backward(mdl, A, &mj, 1.0f / (float)ntok);
    model_mem_update(A, &mj);
    *m = mj.m;
    return loss;
}

/* The forward and backward of every micro-batch of the step (segments of length len),
 * each adding to the gradient scaled by 1 / ntok, the tokens of all k B streams; each
 * micro-batch's memory advances as soon as its backward is done (the update does not change
 * it). Micro-batch j is global streams j B .. j B + B; this rank runs its Bl of them with
 * dropout masks drawn by global stream (A.b_offset), R replicas side by side, Bl / R
 * streams each, each with the whole of its thread: the threads meet once per micro-batch,
 * so a thread the OS deschedules on a busy machine delays the step by its own share only
 * (one fork and join per op, with a core taken, waits for the slower thread at every op).
 * The replicas' gradients are then added to mdl's in replica order (the order of MPI's
 * ranks: R replicas compute what R ranks do). Returns this rank's loss sum (nats). */
static double accumulate(trainer *t, const fwd_opts *o, int len, size_t ntok)
{
    double loss = 0;
    int m0 = t->mem.m, m = m0; /* every micro-batch starts from the rows the step started with */
    for (int j = 0; j < t->k; j++) {
        if (t->R == 1) {
            m = m0;
            t->A[0].layer_grads_done = t->overlap && j == t->k - 1 ? layer_grads_done : NULL;
            loss += replica_pass(t, o, j, 0, len, ntok, &m);
            continue;
        }
#pragma omp parallel for schedule(static, 1) num_threads(t->R)
        for (int r = 0; r < t->R; r++) {
            t->rep_m[r] = m0;
            t->rep_loss[r] = replica_pass(t, o, j, r, len, ntok, &t->rep_m[r]);
        }
        for (int r = 0; r < t->R; r++)
            loss += t->rep_loss[r];
        m = t->rep_m[0];
    }
    t->mem.m = m;
    if (t->R > 1)
        sum_replica_grads(t);
    return loss;
}

/* One step: zero the gradients, forward and backward of the micro-batches (advancing their
 * memory), sum the gradient over the ranks, the NaN guard, clip + Adam (or skip an
 * outlier), advance the state. */
static int train_step(trainer *t, loop_state *ls, txl_err *e)
{
    const train_config *tc = &t->cfg.train;
    int len = next_batch(t, e);
    if (len < 0)
        return stop_keeping_last(t, e);
    long step = t->st.step + 1;
    fwd_opts o = {.training = 1, .drop_key = rng_key(tc->seed, (uint64_t)step)};
    for (int r = 0; r < t->R; r++) /* once per update: the backward adds to the gradient */
        model_zero_grads(r ? &t->rep[r] : &t->mdl);
    size_t ntok = (size_t)t->k * t->B * len; /* all streams of the step: each rank and each
                                              * micro-batch scales by the global count */
    double loss = accumulate(t, &o, len, ntok);
    sum_over_ranks(t); /* every rank: the global gradient */
    dist_sum_f64(&loss, 1);
    loss /= (double)ntok;
    double norm = grad_norm(t->mdl.g, t->mdl.n_floats); /* clipping happens in adam */
    if (!isfinite(loss) || !isfinite(norm)) {
        char held[1300];
        last_desc(t, held, sizeof held);
        return err_set(e, ERR_RUNTIME, "step %ld: the %s is %s (loss %g, gradient norm %g); "
                       "stopping without writing a checkpoint, so %s. Lower train.lr or set "
                       "train.clip.", step, isfinite(loss) ? "gradient" : "loss",
                       isnan(isfinite(loss) ? norm : loss) ? "NaN" : "infinite", loss, norm,
                       held);
    }
    double lr = lr_at(&ls->sched, step);
    if (is_outlier(t, norm))
        skip_update(t, step, norm);
    else
        apply_update(t, ls, step, norm, lr);
    t->st.step = step;
    t->st.tokens += (long long)ntok;
    t->st.data_pos = t->bt.pos;
    t->st.log_sum += loss;
    t->st.log_n++;
    ls->tok_log += (long long)ntok;
    ls->loss = loss;
    ls->norm = norm;
    ls->lr = lr;
    ls->ntok = ntok;
    return 0;
}

/* Whether a stop signal has come, as all ranks agree (it may reach one rank first): the
 * agreed signal goes into ls->stop, which is what every later decision of the step reads. */
static int stop_requested(loop_state *ls)
{
    int agreed = dist_max_int(stop_signal);
    if (agreed && !ls->stop)
        ls->stop = agreed;
    return ls->stop != 0;
}

#ifdef TXL_MPI
/* TXL_TEST_SIGNAL=RANK:STEP (tests/mpi/signal_race.sh): that rank raises SIGTERM right
 * after the step's stop agreement, the moment at which a real signal reaching one rank
 * used to split the ranks' decisions. */
static void test_signal_hook(long step)
{
    const char *v = getenv("TXL_TEST_SIGNAL");
    int rank;
    long at;
    if (v && sscanf(v, "%d:%ld", &rank, &at) == 2 && rank == dist_self()->rank && at == step)
        raise(SIGTERM);
}
#else
static void test_signal_hook(long step) { (void)step; }
#endif

/* Whether this step ends the invocation: max_steps, the time budget, --steps, a signal, or
 * an event that could not be written to log.jsonl (rank 0's). All ranks must agree (a
 * signal or the clock may reach one rank first): the signal counts as agreed by
 * stop_requested, the rest by one more reduction. */
static int run_ends(const trainer *t, loop_state *ls, double run_s)
{
    const train_config *tc = &t->cfg.train;
    long step = t->st.step;
    stop_requested(ls);
    test_signal_hook(step);
    return dist_max_int(step == tc->max_steps ||
                        (tc->max_minutes > 0 && run_s >= tc->max_minutes * 60) ||
                        (t->run_steps > 0 && step - ls->first_step >= t->run_steps) ||
                        t->log_errno != 0) ||
           ls->stop;
}

/* A log line (log.jsonl, and the progress line on stderr) for the steps since the last. */
static void log_progress(trainer *t, loop_state *ls, double now, double run_s)
{
    const train_config *tc = &t->cfg.train;
    long step = t->st.step;
    double mean = t->st.log_sum / t->st.log_n;
    double span = now - ls->t_log > 1e-9 ? now - ls->t_log : 1e-9;
    double tps = ls->tok_log / span;
    double gemm_share = (gemm_thread_seconds() - ls->gemm_log) / (span * par_max_threads());
    double eta = (double)(tc->max_steps - step) * ls->ntok / (tps > 0 ? tps : 1);
    if (tc->max_minutes > 0 && tc->max_minutes * 60 - run_s < eta)
        eta = tc->max_minutes * 60 - run_s;
    log_json(t, "{\"event\":\"train\",\"step\":%ld,\"tokens\":%lld,\"loss\":%.6f,"
                "\"bpc\":%.6f,\"lr\":%.6g,\"grad_norm\":%.6g,\"tok_per_s\":%.1f,"
                "\"elapsed_s\":%.1f,\"step_loss\":%.9g,\"comm_s\":%.4f,"
                "\"comm_exposed_s\":%.4f,\"gemm_share\":%.4f}",
             step, t->st.tokens, mean, mean / M_LN2, ls->lr, ls->norm, tps,
             t->st.elapsed + run_s, ls->loss, dist_comm_seconds() - ls->comm_log,
             dist_exposed_seconds() - ls->exposed_log, gemm_share);
    ls->comm_log = dist_comm_seconds();
    ls->exposed_log = dist_exposed_seconds();
    ls->gemm_log = gemm_thread_seconds();
    if (!t->quiet && dist_is_root()) {
        char etas[32], els[32];
        sys_fmt_duration(etas, sizeof etas, eta);
        sys_fmt_duration(els, sizeof els, t->st.elapsed + run_s);
        fprintf(stderr, "%sstep %ld/%ld | loss %.4f | bpc %.4f | lr %.3g | %.0f tok/s | "
                "ETA %s | %s%s", t->tty ? "\r\033[K" : "", step, tc->max_steps, mean,
                mean / M_LN2, ls->lr, tps, etas, els, t->tty ? "" : "\n");
        fflush(stderr);
    }
    t->st.log_sum = 0;
    t->st.log_n = 0;
    ls->t_log = now;
    ls->tok_log = 0;
}

/* A terms event every train.term_stats_interval steps (doc/design.md, "The model":
 * Diagnostics): rank 0 runs the planned term pass, the first TERM_STATS_SEGMENTS segments
 * of the valid split from an empty memory with this step's weights (eval --term-stats on a
 * checkpoint of this step prints the same layers), and logs one object per layer. The
 * pass has its own activations and memory: training's state is not touched. */
static int log_terms(trainer *t, txl_err *e)
{
    const run_config *c = &t->cfg;
    long step = t->st.step;
    if (c->train.term_stats_interval <= 0 || step % c->train.term_stats_interval != 0)
        return 0;
    double t0 = sys_now();
    int rc = dist_is_root() ? terms_run(&t->terms, e) : 0;
    if (dist_max_int(rc ? 1 : 0)) /* the valid split could not be read */
        return stop_keeping_last(t, e);
    if (!dist_is_root() || !t->log)
        return 0;
    const eval_opts *o = &t->terms.plan.o;
    fprintf(t->log, "{\"event\":\"terms\",\"step\":%ld,\"split\":\"valid\",\"batch\":%d,"
            "\"tgt_len\":%d,\"mem_len\":%d,\"segments\":%zu,\"seconds\":%.3f,\"layers\":[",
            step, o->batch, o->tgt_len, o->mem_len, t->terms.segments, sys_now() - t0);
    for (int l = 0; l < c->model.n_layer; l++) {
        if (l)
            fputc(',', t->log);
        terms_print_layer(t->log, &c->model, &t->terms.st[l], l, 1);
    }
    fputs("]}\n", t->log);
    log_flush(t);
    return 0;
}

/* Validation when due (a new best loss writes best), then `last` when due. A signal that
 * came after run_ends (during validation, say) ends the run here too: *at_end becomes 1 and
 * last holds this step. */
static int eval_and_save(trainer *t, loop_state *ls, int *at_end, txl_err *e)
{
    const train_config *tc = &t->cfg.train;
    long step = t->st.step;
    double vloss = NAN;
    if ((tc->eval_interval > 0 && step % tc->eval_interval == 0) || (*at_end && !ls->stop)) {
        if (run_valid(t, &vloss, e))
            return stop_keeping_last(t, e);
        if (vloss < t->st.best_valid) {
            t->st.best_valid = vloss;
            if (save_checkpoint(t, t->best_path, 0, vloss, e))
                return -1;
        }
    }
    if (((tc->ckpt_interval > 0 && step % tc->ckpt_interval == 0) || *at_end) &&
        save_checkpoint(t, t->last_path, 1, vloss, e))
        return -1;
    if (!*at_end && stop_requested(ls)) { /* one more agreement: all ranks stop alike */
        *at_end = 1;
        if (t->last_step != step && save_checkpoint(t, t->last_path, 1, vloss, e))
            return -1;
    }
    return 0;
}

/* A number rounded as fmt prints it ("%.6f": 6 decimals), or null when it is not finite
 * (no NaN or Infinity in JSON). */
static void add_num(cJSON *o, const char *key, const char *fmt, double x)
{
    char buf[64];
    if (!isfinite(x)) {
        cJSON_AddNullToObject(o, key);
        return;
    }
    snprintf(buf, sizeof buf, fmt, x);
    cJSON_AddNumberToObject(o, key, strtod(buf, NULL));
}

/* An event line of log.jsonl from a cJSON object (whose first key is "event"). */
static void log_obj(trainer *t, const cJSON *o)
{
    char *s = o && t->log && dist_is_root() ? cJSON_PrintUnformatted(o) : NULL;
    if (s) {
        fprintf(t->log, "%s\n", s);
        log_flush(t);
    }
    free(s);
}

/* Why the run ended: "max_steps", "--steps", "max_minutes" (the time budget), the signal
 * ("SIGINT", "SIGTERM", "SIGHUP"), or "log_error" (log.jsonl could not be written). */
static const char *end_reason(const trainer *t, const loop_state *ls, int exit_sig)
{
    if (exit_sig)
        return exit_sig == SIGINT ? "SIGINT" : exit_sig == SIGHUP ? "SIGHUP" : "SIGTERM";
    if (t->log_errno)
        return "log_error";
    if (t->st.step >= t->cfg.train.max_steps)
        return "max_steps";
    if (t->run_steps > 0 && t->st.step - ls->first_step >= t->run_steps)
        return "--steps";
    return "max_minutes"; /* the only other way run_ends ends a run (on some rank) */
}

/* The result of the run: stdout's line, summary.json and the end event. */
static void add_summary(cJSON *o, const trainer *t, const loop_state *ls, const char *reason)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    cJSON_AddNumberToObject(o, "step", (double)t->st.step);
    cJSON_AddNumberToObject(o, "tokens", (double)t->st.tokens);
    add_num(o, "train_loss", "%.6f", ls->loss);
    add_num(o, "grad_norm", "%.6g", ls->norm);
    cJSON_AddNumberToObject(o, "skipped_steps", (double)t->st.skipped);
    add_num(o, "best_valid_loss", "%.6f", t->st.best_valid);
    add_num(o, "best_valid_bpc", "%.6f", t->st.best_valid / M_LN2);
    cJSON_AddStringToObject(o, "checkpoint", t->last_path);
    add_num(o, "peak_rss_mb", "%.1f", ru.ru_maxrss / 1024.0);
    add_num(o, "elapsed_s", "%.1f", t->st.elapsed + sys_now() - t->t_start);
    cJSON_AddStringToObject(o, "reason", reason);
}

static int put_text(FILE *f, const void *text) { return fputs(text, f) < 0; }

/* The result line on stdout, out_dir/summary.json (the same object) and the end event of
 * log.jsonl; after a signal, where the run stopped. The exit code: 128 + the signal, else
 * 0, or 1 when summary.json or an event of log.jsonl could not be written (main makes a 0
 * into 1 when the line did not reach stdout: summary.json still holds it). */
static int finish_run(trainer *t, const loop_state *ls, int exit_sig)
{
    if (t->tty && !t->quiet && dist_is_root())
        fputc('\n', stderr);
    if (!dist_is_root())
        return exit_sig ? 128 + exit_sig : 0;
    const char *reason = end_reason(t, ls, exit_sig);
    cJSON *sum = cJSON_CreateObject(), *end = cJSON_CreateObject();
    if (sum)
        add_summary(sum, t, ls, reason);
    if (end && cJSON_AddStringToObject(end, "event", "end"))
        add_summary(end, t, ls, reason);
    char *line = sum ? cJSON_PrintUnformatted(sum) : NULL;
    char *text = line ? malloc(strlen(line) + 2) : NULL; /* the line and its newline */
    int rc = exit_sig ? 128 + exit_sig : 0;
    txl_err e = {0};
    if (text)
        sprintf(text, "%s\n", line);
    else
        err_set(&e, ERR_RUNTIME, "out of memory writing the summary");
    /* the run's own record first: a reader of stdout that went away ends txl by SIGPIPE at
     * the fputs, which must not take summary.json and the end event with it */
    if (!text || write_out_file(t->cfg.train.out_dir, "summary.json", put_text, text, &e)) {
        fprintf(stderr, "txl train: %s\n", e.msg);
        if (!exit_sig)
            rc = 1;
    }
    log_obj(t, end);
    if (t->log_errno) { /* events are missing from the log: not a success */
        char held[1300];
        last_desc(t, held, sizeof held);
        fprintf(stderr, "txl train: %s: cannot append the events from step %ld on: %s; the run "
                "stopped so that its log loses no more (%s)\n", t->log_path, t->log_fail_step,
                strerror(t->log_errno), held);
        if (!exit_sig)
            rc = 1;
    }
    if (text) {
        fputs(text, stdout);
        cli_stdout_flush(); /* a failure makes the exit code 1 (main) */
    }
    free(text);
    free(line);
    cJSON_Delete(sum);
    cJSON_Delete(end);
    if (exit_sig)
        fprintf(stderr, "txl train: %s: checkpoint written at step %ld (%s); resume with "
                "--resume %s\n", exit_sig == SIGINT   ? "interrupted"
                                  : exit_sig == SIGHUP ? "hung up"
                                                       : "terminated",
                t->last_step, t->last_path, t->last_path);
    return rc;
}

static int train_loop(trainer *t, txl_err *e)
{
    loop_state ls;
    int exit_sig = 0;
    loop_init(t, &ls);
    while (t->st.step < t->cfg.train.max_steps) {
        if (train_step(t, &ls, e))
            return -1;
        double now = sys_now(), run_s = now - t->t_start;
        int at_end = run_ends(t, &ls, run_s);
        if (t->st.step % t->cfg.train.log_interval == 0 || at_end)
            log_progress(t, &ls, now, run_s);
        if (log_terms(t, e) || eval_and_save(t, &ls, &at_end, e))
            return -1;
        if (at_end) {
            exit_sig = ls.stop; /* 0 at max_steps, the time budget or --steps */
            break;
        }
    }
    return finish_run(t, &ls, exit_sig);
}

/* ---------------------------------------------------------------------------------------
 * Setup, in the order cmd_train runs it: config, data, out_dir, model, resume, start. */

/* The directory of a checkpoint file when it is a run directory (it holds config.yaml or
 * log.jsonl, or the file is a last or best checkpoint): 1 and the directory in dir. */
static int ckpt_run_dir(const char *ckpt, char *dir, size_t cap)
{
    static const char *const names[] = {"last.safetensors.gz", "last.safetensors",
                                        "best.safetensors.gz", "best.safetensors"};
    const char *slash = strrchr(ckpt, '/');
    const char *base = slash ? slash + 1 : ckpt;
    size_t n = slash ? (size_t)(slash - ckpt) : 0;
    if (!slash)
        snprintf(dir, cap, ".");
    else if ((size_t)snprintf(dir, cap, "%.*s", n ? (int)n : 1, n ? ckpt : "/") >= cap)
        return 0;
    int named = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        named |= strcmp(base, names[i]) == 0;
    char p[CFG_PATH_MAX + 16];
    snprintf(p, sizeof p, "%s/config.yaml", dir);
    if (named || access(p, F_OK) == 0)
        return 1;
    snprintf(p, sizeof p, "%s/log.jsonl", dir);
    return access(p, F_OK) == 0;
}

static int same_file(const char *a, const char *b)
{
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* --resume writes where its checkpoint is: the run directory it came from, whatever out_dir
 * the checkpoint's config names (a copied or moved run directory still names the original,
 * which the run would otherwise write over). A config file (-c: its train.out_dir, or
 * runs/NAME) or --set train.out_dir names the directory explicitly; a checkpoint outside a
 * run directory keeps its config's. prepare_out_dir then refuses a directory holding
 * another checkpoint. */
static int resume_in_place(trainer *t, const char *cfg_path, const char *resume,
                           const char *const *sets, int nsets, txl_err *e)
{
    char dir[CFG_PATH_MAX], was[CFG_PATH_MAX];
    if (!resume || cfg_path)
        return 0;
    for (int i = 0; i < nsets; i++)
        if (cfg_set_targets(sets[i], "train", "out_dir"))
            return 0;
    if (!ckpt_run_dir(resume, dir, sizeof dir) || same_file(dir, t->cfg.train.out_dir))
        return 0;
    snprintf(was, sizeof was, "%s", t->cfg.train.out_dir);
    txl_err why = {0};
    if (cfg_set_text(&t->cfg, "train", "out_dir", dir, resume, &why)) { /* not the config's */
        const char *m = strstr(why.msg, "train.out_dir: ");
        return err_set(e, ERR_INPUT, "%s is in the run directory %.200s, which cannot be "
                       "train.out_dir (%s); --set train.out_dir=DIR continues the run there",
                       resume, dir, m ? m + 15 : why.msg);
    }
    if (!t->quiet && dist_is_root())
        fprintf(stderr, "txl train: continuing in %s, where %s is (its config names "
                "train.out_dir %s; --set train.out_dir=DIR continues elsewhere)\n", dir, resume,
                was);
    return 0;
}

/* The config: a YAML file, or (--resume alone) the checkpoint's own; then the --set
 * overrides, where a resumed run writes, and validation. */
static int load_config(trainer *t, const char *cfg_path, const char *resume,
                       const char *const *sets, int nsets, txl_err *e)
{
    cfg_defaults(&t->cfg);
    if (cfg_path) {
        if (cfg_load_yaml(&t->cfg, cfg_path, e))
            return -1;
    } else { /* --resume alone: the checkpoint's own config (its header is enough) */
        st_file f;
        if (st_open(&f, resume, e))
            return -1;
        const char *text = st_meta(&f, "config");
        int rc = text ? cfg_load_meta(&t->cfg, text, resume, e)
                      : err_set(e, ERR_INPUT, "%s: no 'config' in the metadata", resume);
        st_free(&f);
        if (rc)
            return -1;
    }
    for (int i = 0; i < nsets; i++)
        if (cfg_set(&t->cfg, sets[i], e))
            return -1;
    if (resume_in_place(t, cfg_path, resume, sets, nsets, e))
        return -1;
    return cfg_validate(&t->cfg, cfg_path ? cfg_path : resume, e);
}

/* A corpus file of data.* that does not exist: the message says how to give one (and, in a
 * source tree, that configs/tiny.yaml's data/kjv.txt comes from `make demo`). Returns -1. */
static int missing_corpus_hint(const trainer *t, txl_err *e)
{
    const data_config *d = &t->cfg.data;
    const char *key[3] = {"train", "valid", "test"}, *path[3] = {d->train, d->valid, d->test};
    struct stat sb;
    size_t n = strlen(e->msg);
    for (int i = 0; i < 3; i++) {
        if (!path[i][0] || strcmp(path[i], "-") == 0 || stat(path[i], &sb) == 0 ||
            errno != ENOENT)
            continue;
        size_t len = strlen(path[i]);
        int kjv = len >= 7 && strcmp(path[i] + len - 7, "kjv.txt") == 0 &&
                  access("scripts/demo.sh", R_OK) == 0; /* a source tree: make demo */
        const char *shipped = "tests/data/tinyshakespeare.txt.gz"; /* in a source tree */
        if (i > 0)
            snprintf(e->msg + n, sizeof e->msg - n, "; --set data.%s=FILE names another file, "
                     "or --set data.%s= cuts the split from data.train (data.split)", key[i],
                     key[i]);
        else
            snprintf(e->msg + n, sizeof e->msg - n, "; %s--set data.train=FILE trains on "
                     "another file%s%s%s",
                     kjv ? "`make demo` creates data/kjv.txt (the King James Bible), or " : "",
                     access(shipped, R_OK) == 0 ? " (such as " : "",
                     access(shipped, R_OK) == 0 ? shipped : "",
                     access(shipped, R_OK) == 0 ? ")" : "");
        break;
    }
    return -1;
}

/* The data: the train/valid/test spans, the train batcher over all batch_size x grad_accum
 * streams of a step, and this rank's streams of each micro-batch. */
static int plan_data(trainer *t, const char *origin, txl_err *e)
{
    int B = t->cfg.train.batch_size, Lq = t->cfg.model.tgt_len, k = t->cfg.train.grad_accum;
    t->B = B;
    t->k = k;
    if (open_data(t, e))
        return missing_corpus_hint(t, e);
    if (batcher_init(&t->bt, &t->train_ts, k * B, Lq, 0, (size_t)Lq + 1, "train", e))
        return k > 1 ? err_wrap(e, "train.batch_size %d x train.grad_accum %d streams", B, k)
                     : -1;
    const dist_t *dd = dist_self();
    if (B % dd->size != 0)
        return err_set(e, ERR_INPUT, "%s: train.batch_size %d cannot be split over %d ranks "
                       "(each rank owns batch_size / ranks whole streams)", origin, B, dd->size);
    t->Bl = B / dd->size;
    t->b0 = dd->rank * t->Bl;
    return 0;
}

/* A new run refuses a directory that holds one: a last checkpoint or a log.jsonl (a run
 * that stopped before its first checkpoint; a link counts too). 1 with the error set. */
static int holds_run(const trainer *t, txl_err *e)
{
    struct stat st;
    const char *dir = t->cfg.train.out_dir;
    if (access(t->last_path, F_OK) == 0) {
        err_set(e, ERR_INPUT, "train.out_dir %s already holds a run (%s); use --resume %s to "
                "continue it, --force to start over, or --set train.out_dir=... for a new one",
                dir, t->last_path, t->last_path);
        return 1;
    }
    if (lstat(t->log_path, &st) == 0) {
        err_set(e, ERR_INPUT, "train.out_dir %s already holds a run (%s, without a "
                "checkpoint); use --force to start over, or --set train.out_dir=... for a new "
                "one", dir, t->log_path);
        return 1;
    }
    return 0;
}

/* A resumed run writes into out_dir (last, best, log.jsonl): refused, unless --force, when
 * that writes over another checkpoint: out_dir's last is not the file resumed (another run's,
 * or a later one of this run: resuming best, or an older copy, would rewind it), or, without
 * a last, out_dir holds another run's log. 1 with the error set. */
static int resume_overwrites(const trainer *t, const char *resume, txl_err *e)
{
    char cur[CKPT_PATH_MAX], dir[CFG_PATH_MAX];
    const char *out = t->cfg.train.out_dir;
    struct stat sb;
    int has = ckpt_in_run(out, "last", cur, sizeof cur, e);
    if (has < 0)
        return 1;
    if (has && same_file(cur, resume))
        return 0;
    if (has) {
        err_set(e, ERR_INPUT, "train.out_dir %s holds %s (step %lld), not the checkpoint "
                "resumed (%s, step %lld): continuing there would write over that run's last, "
                "best and log; --set train.out_dir=DIR continues %s in a new directory, "
                "--force writes over %s", out, cur, ckpt_file_step(cur), resume,
                ckpt_file_step(resume), resume, out);
        return 1;
    }
    if (lstat(t->log_path, &sb) == 0 &&
        !(ckpt_run_dir(resume, dir, sizeof dir) && same_file(dir, out))) {
        err_set(e, ERR_INPUT, "train.out_dir %s holds another run (%s, without a checkpoint): "
                "--set train.out_dir=DIR continues %s in a new directory, --force writes over "
                "it", out, t->log_path, resume);
        return 1;
    }
    return 0;
}

/* resume_overwrites for a real run: under out_dir's lock, after the checkpoint was read (a
 * damaged one is named first); rank 0 decides for all. */
static int check_resume_target(const trainer *t, const char *resume, int force, txl_err *e)
{
    int rc = resume && !force && dist_is_root() && resume_overwrites(t, resume, e);
    if (dist_max_int(rc)) {
        if (!rc)
            err_set(e, ERR_INPUT, "train.out_dir %s: rank 0 refused to resume into it",
                    t->cfg.train.out_dir);
        return -1;
    }
    return 0;
}

/* The run directory: one that holds another run is refused (unless --resume or --force);
 * rank 0 creates it, checks that it is writable, locks it for this run and removes the
 * temp files of a killed run; everyone learns whether it worked. */
static void set_paths(trainer *t)
{
    const char *dir = t->cfg.train.out_dir;
    const char *ext = t->cfg.train.ckpt_gzip ? ".safetensors.gz" : ".safetensors";
    snprintf(t->last_path, sizeof t->last_path, "%s/last%s", dir, ext);
    snprintf(t->best_path, sizeof t->best_path, "%s/best%s", dir, ext);
    snprintf(t->log_path, sizeof t->log_path, "%s/log.jsonl", dir);
}

static int prepare_out_dir(trainer *t, const char *resume, int force, txl_err *e)
{
    const char *dir = t->cfg.train.out_dir;
    set_paths(t);
    if (!resume && !force && holds_run(t, e)) /* before creating anything */
        return -1;
    int rc = dist_is_root() ? make_dirs(dir, e) || lock_out_dir(t, e) : 0;
    if (rc == 0 && dist_is_root()) {
        if (!resume && !force && holds_run(t, e)) /* again, under the lock */
            rc = -1;
        else
            remove_stale_temps(t);
    }
    if (dist_max_int(rc ? 1 : 0)) {
        if (!rc)
            err_set(e, ERR_INPUT, "train.out_dir %s: rank 0 could not prepare it", dir);
        return -1;
    }
    return 0;
}

/* Threads: all cores of this machine, shared by its ranks, unless train.threads says. */
static void set_threads(trainer *t)
{
    const dist_t *dd = dist_self();
    int threads = t->cfg.train.threads;
    if (threads <= 0 && dd->local_size > 1) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cores / dd->local_size > 0 ? (int)(cores / dd->local_size) : 1;
    }
    t->threads = cli_threads(threads);
}

/* Replicas: one per thread when they divide this rank's streams, else 1 (the threads
 * split each op of the whole batch). */
static int replicas(const trainer *t)
{
    return t->threads > 1 && t->Bl % t->threads == 0 ? t->threads : 1;
}

/* The replicas (accumulate): the activations of one micro-batch's Bl / R streams each, and
 * for r > 0 a gradient of its own. */
static int plan_replicas(trainer *t, txl_err *e)
{
    const model_config *m = &t->cfg.model;
    t->R = replicas(t);
    t->A = calloc((size_t)t->R, sizeof *t->A);
    t->rep = calloc((size_t)t->R, sizeof *t->rep);
    t->rep_loss = calloc((size_t)t->R, sizeof *t->rep_loss);
    t->rep_m = calloc((size_t)t->R, sizeof *t->rep_m);
    if (!t->A || !t->rep || !t->rep_loss || !t->rep_m)
        return err_set(e, ERR_RUNTIME, "out of memory");
    const model *mdl = &t->mdl;
    t->layer_at = calloc((size_t)m->n_layer + 1, sizeof *t->layer_at);
    if (!t->layer_at)
        return err_set(e, ERR_RUNTIME, "out of memory");
    for (int l = 0; l <= m->n_layer; l++)
        t->layer_at[l] = mdl->n_floats;
    for (int i = mdl->n_params - 1; i >= 0; i--) /* layer l's first tensor */
        if (mdl->table[i].layer >= 0)
            t->layer_at[mdl->table[i].layer] = mdl->table[i].offset;
    const dist_t *dd = dist_self();
    comm_overlap_kind ov = t->cfg.train.comm_overlap;
    t->overlap = dd->size > 1 && t->R == 1 &&
                 (ov == OVERLAP_ON || (ov == OVERLAP_AUTO && dd->local_size < dd->size));
    t->act_floats = 0;
    for (int r = 0; r < t->R; r++) {
        if (acts_init(&t->A[r], m, t->Bl / t->R, m->tgt_len, m->mem_len, 1, e) ||
            (r > 0 && model_replica(&t->rep[r], &t->mdl, e)))
            return -1;
        t->act_floats += t->A[r].arena_floats;
    }
    t->A[0].layer_grads_ctx = t;
    return 0;
}

/* Threads, then everything a step touches, planned before step 1: the model and its
 * gradients, the replicas' activations and gradients, memory, Adam moments, batch
 * buffers; the initial weights. */
static int plan_model(trainer *t, txl_err *e)
{
    const run_config *c = &t->cfg;
    const dist_t *dd = dist_self();
    int M = c->model.mem_len, Lq = c->model.tgt_len, B = t->B, k = t->k;
    set_threads(t);
    if (model_init(&t->mdl, &c->model, e) || model_alloc_grads(&t->mdl, e) ||
        plan_replicas(t, e) || mem_init(&t->mem, &c->model, k * t->Bl, M, e) ||
        (dd->size > 1 && dist_is_root() && mem_init(&t->gmem, &c->model, k * B, M, e)))
        return -1;
    t->adam_m = calloc(t->mdl.n_floats, sizeof(float));
    t->adam_v = calloc(t->mdl.n_floats, sizeof(float));
    int coords = pos_get(c->model.pos)->needs_coords;
    size_t rows = (size_t)k * B * Lq;
    t->x = malloc(rows * sizeof *t->x);
    t->y = malloc(rows * sizeof *t->y);
    t->co = coords ? malloc(rows * TXL_N_COORDS * sizeof *t->co) : NULL;
    if (!t->adam_m || !t->adam_v || !t->x || !t->y || (coords && !t->co))
        return err_set(e, ERR_RUNTIME, "out of memory");
    model_init_weights(&t->mdl, c->train.seed);
    t->par_floats = t->mdl.n_floats;
    t->n_weights = t->mdl.n_weights;
    t->st.train_tokens = t->train_ts.n;
    t->st.seed = c->train.seed;
    t->st.params = t->mdl.n_weights;
    return 0;
}

/* --dry-run: plan_model's sizes without allocating the model or the activations. */
static int dry_plan(trainer *t, txl_err *e)
{
    const model_config *m = &t->cfg.model;
    set_threads(t); /* the attention scratch is per thread */
    t->R = replicas(t);
    model_count mc;
    double act;
    if (model_counts(m, &mc, e) ||
        acts_plan_floats(m, t->Bl / t->R, m->tgt_len, m->mem_len, 1, &act, e))
        return -1;
    t->par_floats = (size_t)mc.floats; /* cfg_validate bounds both */
    t->n_weights = (size_t)mc.weights;
    t->act_floats = (size_t)act * (size_t)t->R;
    t->st.train_tokens = t->train_ts.n;
    t->st.params = t->n_weights;
    return 0;
}

/* Rank 0 plans the pass of the terms events (train.term_stats_interval) before step 1. */
static int plan_terms(trainer *t, txl_err *e)
{
    const run_config *c = &t->cfg;
    int rc = 0;
    if (c->train.term_stats_interval > 0 && dist_is_root())
        rc = t->valid_ts.n < 2
                 ? err_set(e, ERR_INPUT, "train.term_stats_interval: the valid split (%s) has "
                           "%zu tokens; the term statistics need a valid split to run on",
                           t->valid_s.path, t->valid_ts.n)
                 : terms_init(&t->terms, &t->mdl, &c->model, &t->valid_ts, valid_batch(t),
                              c->model.tgt_len, c->model.mem_len, TERM_STATS_SEGMENTS, e);
    if (dist_max_int(rc ? 1 : 0)) {
        if (!rc)
            err_set(e, ERR_RUNTIME, "rank 0 could not plan the term statistics");
        return -1;
    }
    return 0;
}

/* --resume or --init-from; the run must still have steps to go. */
static int restore_run(trainer *t, const char *resume, const char *init_from,
                       const char *origin, int dry, txl_err *e)
{
    char cur[CKPT_PATH_MAX];
    txl_err ignored; /* a damaged other format is resume_overwrites' to name */
    t->last_step = -1;
    if (resume && load_resume(t, resume, dry, e))
        return -1;
    t->resumed_from = resume;
    if (resume && ckpt_in_run(t->cfg.train.out_dir, "last", cur, sizeof cur, &ignored) > 0 &&
        same_file(cur, resume)) { /* resumed from this out_dir's last, in either format */
        t->last_step = t->st.step;
        snprintf(t->held_path, sizeof t->held_path, "%s", resume);
    }
    if (init_from && load_init_from(t, init_from, dry, e))
        return -1;
    if (t->st.step >= t->cfg.train.max_steps)
        return err_set(e, ERR_INPUT, "%s: the run is already at step %ld >= train.max_steps "
                       "%ld (raise it with --set train.max_steps=N)", resume ? resume : origin,
                       t->st.step, t->cfg.train.max_steps);
    return 0;
}

/* summary.json describes the end of the latest invocation: a run that starts removes the
 * one of the invocation before (its end event stays in log.jsonl), so a run that dies
 * leaves none. */
static int remove_summary(const trainer *t, txl_err *e)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/summary.json", t->cfg.train.out_dir);
    if (unlink(path) != 0 && errno != ENOENT)
        return err_set(e, ERR_RUNTIME, "%s: cannot remove the previous summary: %s", path,
                       strerror(errno));
    return 0;
}

/* The start event: the run's size and setting, the txl version and the command line. */
static void log_start(trainer *t, int resume)
{
    const dist_t *dd = dist_self();
    const char *const *argv;
    int argc = cli_cmdline(&argv);
    cJSON *o = dist_is_root() ? cJSON_CreateObject() : NULL;
    if (!o)
        return;
    cJSON_AddStringToObject(o, "event", "start");
    cJSON_AddNumberToObject(o, "step", (double)t->st.step);
    cJSON_AddBoolToObject(o, "resume", resume);
    cJSON_AddNumberToObject(o, "params", (double)t->n_weights);
    cJSON_AddStringToObject(o, "blas_core", sys_blas_core());
    cJSON_AddNumberToObject(o, "train_tokens", (double)t->train_s.n);
    cJSON_AddNumberToObject(o, "valid_tokens", (double)t->valid_s.n);
    cJSON_AddNumberToObject(o, "ranks", dd->size);
    cJSON_AddNumberToObject(o, "threads", t->threads);
    cJSON_AddNumberToObject(o, "replicas", t->R);
    cJSON_AddNumberToObject(o, "grad_accum", t->k);
    cJSON_AddNumberToObject(o, "estimate_mib", round(plan_mib(t)));
    cJSON_AddStringToObject(o, "version", TXL_VERSION);
    cJSON *args = cJSON_AddArrayToObject(o, "argv");
    for (int i = 0; args && i < argc; i++)
        cJSON_AddItemToArray(args, cJSON_CreateString(argv[i]));
    log_obj(t, o);
    cJSON_Delete(o);
}

/* Rank 0 opens log.jsonl and writes config.yaml; the plan on stderr; the start event. */
static int start_run(trainer *t, int resume, txl_err *e)
{
    const dist_t *dd = dist_self();
    int rc = 0;
    if (dist_is_root()) {
        t->log = open_log(t->log_path, resume, e); /* first: it may be a refused link */
        rc = t->log ? write_config_yaml(&t->cfg, e) || remove_summary(t, e) : -1;
    }
    if (dist_max_int(rc ? 1 : 0)) {
        if (!rc)
            err_set(e, ERR_RUNTIME, "rank 0 could not write into %s", t->cfg.train.out_dir);
        return -1;
    }
    if (!t->quiet && dist_is_root()) {
        print_plan(t);
        if (t->R > 1)
            fprintf(stderr, "  threads: %d, each running %d of the batch's streams\n", t->R,
                    t->Bl / t->R);
        if (dd->size > 1)
            fprintf(stderr, "  data parallel: %d ranks x %d streams, %d threads per rank "
                    "(%d ranks on this machine)\n", dd->size, t->Bl, t->threads,
                    dd->local_size);
    }
    log_start(t, resume);
    return 0;
}

/* --dry-run's result: the plan as one JSON object on stdout (rank 0). */
static void print_dry_run(const trainer *t, const char *cfg_path, const char *resume,
                          const char *init_from)
{
    const model_config *m = &t->cfg.model;
    const train_config *tc = &t->cfg.train;
    size_t per_epoch = batcher_segments(&t->bt);
    long steps = tc->max_steps - t->st.step;
    if (t->run_steps > 0 && t->run_steps < steps)
        steps = t->run_steps;
    cJSON *o = cJSON_CreateObject();
    if (!o || !dist_is_root()) {
        cJSON_Delete(o);
        return;
    }
    cJSON_AddItemToObject(o, "config", cfg_path ? cJSON_CreateString(cfg_path) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "resume", resume ? cJSON_CreateString(resume) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "init_from",
                          init_from ? cJSON_CreateString(init_from) : cJSON_CreateNull());
    cJSON_AddStringToObject(o, "out_dir", tc->out_dir);
    cJSON_AddStringToObject(o, "pos_scheme", pos_scheme_name(m->pos));
    cJSON_AddNumberToObject(o, "params", (double)t->n_weights);
    cJSON_AddNumberToObject(o, "estimate_mib", round(plan_mib(t)));
    add_num(o, "params_grads_adam_mib", "%.1f", (3.0 + t->R) * t->par_floats * 4 / 1048576.0);
    add_num(o, "activations_mib", "%.1f", t->act_floats * 4 / 1048576.0);
    cJSON_AddNumberToObject(o, "tokens_per_step", (double)t->k * t->B * m->tgt_len);
    cJSON_AddNumberToObject(o, "grad_accum", t->k);
    cJSON_AddNumberToObject(o, "train_tokens", (double)t->train_ts.n);
    cJSON_AddNumberToObject(o, "valid_tokens", (double)t->valid_ts.n);
    cJSON_AddNumberToObject(o, "train_bytes", (double)t->train_s.n);
    cJSON_AddNumberToObject(o, "valid_bytes", (double)t->valid_s.n);
    cJSON_AddNumberToObject(o, "test_bytes", (double)t->test_s.n);
    cJSON_AddNumberToObject(o, "steps_per_epoch", (double)per_epoch);
    cJSON_AddNumberToObject(o, "start_step", (double)t->st.step);
    cJSON_AddNumberToObject(o, "max_steps", (double)tc->max_steps);
    cJSON_AddNumberToObject(o, "steps", (double)steps);
    add_num(o, "epochs", "%.4f", per_epoch ? (double)tc->max_steps / per_epoch : 0);
    cJSON_AddNumberToObject(o, "threads", t->threads);
    cJSON_AddNumberToObject(o, "replicas", t->R);
    cJSON_AddNumberToObject(o, "ranks", dist_self()->size);
    char *text = cJSON_PrintUnformatted(o);
    if (text)
        printf("%s\n", text);
    free(text);
    cJSON_Delete(o);
}

/* --dry-run: everything a run checks before it writes (the config, the data, out_dir not
 * holding another run, the model's plan, a --resume or --init-from checkpoint), the plan on
 * stderr and as JSON on stdout; out_dir is neither created nor touched, and neither the
 * model nor the activations are allocated. */
static int dry_run(trainer *t, const char *cfg_path, const char *resume, const char *init_from,
                   int force, txl_err *e)
{
    const char *origin = cfg_path ? cfg_path : resume;
    set_paths(t);
    if (plan_data(t, origin, e) || (!resume && !force && holds_run(t, e)) || dry_plan(t, e) ||
        restore_run(t, resume, init_from, origin, 1, e) ||
        (resume && !force && resume_overwrites(t, resume, e)))
        return -1;
    if (!t->quiet && dist_is_root())
        print_plan(t);
    print_dry_run(t, cfg_path, resume, init_from);
    return 0;
}

/* SIGINT, SIGTERM and SIGHUP (a closed terminal) finish the step, write last and end the
 * run with 128 + the signal (train_loop). */
static void catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

typedef struct {
    const char *config, *resume, *init_from;
    cli_strs set;
    long steps;
    int print_config, dry_run, force, quiet;
} train_args;

#define O(f) offsetof(train_args, f)
static const cli_opt train_options[] = {
    {.short_name = "-c", .name = "--config", .type = CLI_FILE, .off = O(config),
     .flags = CLI_ONCE | CLI_CONFIG, .metavar = "FILE", .glob = "*.@(yaml|yml)",
     .help = "YAML config (every key: man txl; examples in configs/); a lone FILE.yaml "
             "argument works too. A bare name (tiny.yaml, tiny) not in the working directory "
             "is taken from the installed configs"},
    {.name = "--set", .type = CLI_STR, .off = O(set), .flags = CLI_REPEAT | CLI_CFG_KEY,
     .cap = MAX_SETS, .metavar = "KEY=VALUE", .needs = "key.path=value",
     .help = "override one key, e.g. --set model.d_model=512 (repeatable)"},
    {.name = "--resume", .type = CLI_FILE, .off = O(resume), .metavar = "CKPT|RUN_DIR",
     .needs = "a checkpoint or run directory", .excludes = "--init-from",
     .glob = "*.@(safetensors|safetensors.gz)",
     .help = "continue a run exactly (weights, Adam, step, data, memory) from a checkpoint "
             "or a run directory's last; without -c the checkpoint's config is used"},
    {.name = "--init-from", .type = CLI_FILE, .off = O(init_from), .metavar = "CKPT",
     .needs = "a checkpoint path", .glob = "*.@(safetensors|safetensors.gz)",
     .help = "start a new run from a checkpoint's weights (fresh optimiser; a run "
             "directory: its best, else last)"},
    {.name = "--steps", .type = CLI_INT, .off = O(steps), .lo = 1, .hi = LONG_MAX, .def = 0,
     .metavar = "N", .def_doc = "",
     .help = "stop after N steps in this invocation (writes last; the schedule still follows "
             "train.max_steps): for time-sliced jobs"},
    {.name = "--print-config", .type = CLI_SWITCH, .off = O(print_config),
     .help = "print the resolved config as YAML and exit"},
    {.name = "--dry-run", .type = CLI_SWITCH, .off = O(dry_run),
     .help = "check the config, the data, out_dir and any --resume/--init-from checkpoint, "
             "print the plan (parameters, memory estimate, tokens, steps per epoch) on stderr "
             "and as JSON on stdout, and exit without writing anything"},
    {.name = "--force", .type = CLI_SWITCH, .off = O(force),
     .help = "start a new run in an out_dir that already holds one; with --resume, continue "
             "into an out_dir that holds another checkpoint (overwriting it)"},
    CLI_OPT_QUIET(O(quiet), "no progress on stderr"),
};
#undef O

const cli_spec train_spec = {
    CLI_OPTS(train_options),
    .about = "Trains a Transformer-XL on a byte-level corpus. Writes into train.out_dir: "
             "config.yaml, log.jsonl, last.safetensors.gz (with optimiser state and memory), "
             "best.safetensors.gz and, at the end, summary.json (the result line of stdout).",
    .notes = "SIGINT/SIGTERM/SIGHUP finish the current step, write last, and exit 130/143/129.",
    .example = "examples: txl train -c configs/tiny_rope.yaml "
               "--set data.train=tests/data/tinyshakespeare.txt.gz --set train.max_steps=500\n"
               "          txl train --resume runs/tiny --set train.max_steps=3000 "
               "--set train.term_stats_interval=250\n"
               "          txl train -c configs/enwik8_base.yaml "
               "--set data.train=tests/data/tinyshakespeare.txt.gz --dry-run",
    .pos_max = 0,
    .pos_extra = "unknown option '%s'",
    .pos_as = "--config", /* `txl train CONFIG.yaml` */
    .pos_glob = "*.@(yaml|yml)",
};

int cmd_train(int argc, char **argv)
{
    train_args a;
    cli_pos pos;
    int parsed = cli_parse(txl_command("train"), argc, argv, &a, &pos);
    if (parsed >= 0)
        return parsed;
    const char *cfg_path = a.config, *resume = a.resume, *init_from = a.init_from;
    const char *const *sets = a.set.v;
    int nsets = a.set.n, quiet = a.quiet, print_config = a.print_config, force = a.force;
    long run_steps = a.steps;
    txl_err e = {0};
    if (!cfg_path && !resume)
        return cli_usage("train", "missing -c CONFIG.yaml");
    char cfg_buf[CFG_PATH_MAX]; /* a bare name: from here or the installed configs */
    if (cfg_path && cli_config_path(cfg_path, "train", quiet, cfg_buf, sizeof cfg_buf, &e))
        return cli_fail("train", &e);
    if (cfg_path)
        cfg_path = cfg_buf;
    char resume_path[CKPT_PATH_MAX]; /* --resume RUN_DIR: its last checkpoint */
    if (resume && cli_ckpt_path(resume, 1, "train", quiet, resume_path, sizeof resume_path, &e))
        return cli_fail("train", &e);
    if (resume)
        resume = resume_path;

    trainer *t = calloc(1, sizeof *t);
    if (!t)
        return fprintf(stderr, "txl train: out of memory\n"), 1;
    t->lock_fd = -1;
    t->quiet = quiet;
    t->run_steps = run_steps;
    t->tty = cli_isatty_stderr();
    t->st.best_valid = INFINITY;
    const char *origin = cfg_path ? cfg_path : resume;
    int rc;
    if (load_config(t, cfg_path, resume, sets, nsets, &e))
        goto fail;
    if (print_config) {
        cfg_write_yaml(&t->cfg, stdout);
        trainer_free(t);
        free(t);
        return 0;
    }
    if (a.dry_run) {
        if (dry_run(t, cfg_path, resume, init_from, force, &e))
            goto fail;
        trainer_free(t);
        free(t);
        return 0;
    }
    if (plan_data(t, origin, &e) || prepare_out_dir(t, resume, force, &e) ||
        plan_model(t, &e) || plan_terms(t, &e) ||
        restore_run(t, resume, init_from, origin, 0, &e) || check_resume_target(t, resume, force, &e) ||
        start_run(t, resume != NULL, &e))
        goto fail;
    catch_signals();
    t->t_start = sys_now();
    rc = train_loop(t, &e);
    if (rc < 0)
        goto fail;
    trainer_free(t);
    free(t);
    return rc;
fail:
    rc = cli_fail("train", &e);
    trainer_free(t);
    free(t);
    return rc;
}
