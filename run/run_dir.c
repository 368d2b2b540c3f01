/* run_dir.c: the run directory (doc/design.md, "Command line"): created and locked for one
 * run, its files written atomically and never through a link, where a resumed run writes,
 * and what a new or resumed run may not write over. */
#include "run.h"

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
    t->dir.lock_fd = fd;
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
        strcmp(name, "log.jsonl.tmp") == 0 || run_numbered_temp(name))
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
    if (n)
        run_note(t, TXL_EV_NOTE, "removed %d temp file%s an earlier run left in %s", n,
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
FILE *run_open_log(const char *path, int resume, txl_err *e)
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
int run_write_out_file(const char *dir, const char *name,
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

int run_write_config_yaml(const run_config *c, txl_err *e)
{
    return run_write_out_file(c->train.out_dir, "config.yaml", put_config, c, e);
}

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

int run_same_file(const char *a, const char *b)
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
int run_resume_in_place(trainer *t, const char *resume, int explicit_out_dir, txl_err *e)
{
    char dir[CFG_PATH_MAX], was[CFG_PATH_MAX];
    if (!resume || explicit_out_dir)
        return 0;
    if (!ckpt_run_dir(resume, dir, sizeof dir) || run_same_file(dir, t->cfg.train.out_dir))
        return 0;
    snprintf(was, sizeof was, "%s", t->cfg.train.out_dir);
    txl_err why = {0};
    if (cfg_set_text(&t->cfg, "train", "out_dir", dir, resume, &why)) { /* not the config's */
        const char *m = strstr(why.msg, "train.out_dir: ");
        return err_set(e, ERR_INPUT, "%s is in the run directory %.200s, which cannot be "
                       "train.out_dir (%s); --set train.out_dir=DIR continues the run there",
                       resume, dir, m ? m + 15 : why.msg);
    }
    run_note(t, TXL_EV_NOTE, "continuing in %s, where %s is (its config names train.out_dir "
             "%s; --set train.out_dir=DIR continues elsewhere)", dir, resume, was);
    return 0;
}

/* A new run refuses a directory that holds one: a last checkpoint or a log.jsonl (a run
 * that stopped before its first checkpoint; a link counts too). 1 with the error set. */
int run_holds_run(const trainer *t, txl_err *e)
{
    struct stat st;
    const char *dir = t->cfg.train.out_dir;
    if (access(t->dir.last_path, F_OK) == 0) {
        err_set(e, ERR_INPUT, "train.out_dir %s already holds a run (%s); use --resume %s to "
                "continue it, --force to start over, or --set train.out_dir=... for a new one",
                dir, t->dir.last_path, t->dir.last_path);
        return 1;
    }
    if (lstat(t->dir.log_path, &st) == 0) {
        err_set(e, ERR_INPUT, "train.out_dir %s already holds a run (%s, without a "
                "checkpoint); use --force to start over, or --set train.out_dir=... for a new "
                "one", dir, t->dir.log_path);
        return 1;
    }
    return 0;
}

/* A resumed run writes into out_dir (last, best, log.jsonl): refused, unless --force, when
 * that writes over another checkpoint: out_dir's last is not the file resumed (another run's,
 * or a later one of this run: resuming best, or an older copy, would rewind it), or, without
 * a last, out_dir holds another run's log. 1 with the error set. */
int run_resume_overwrites(const trainer *t, const char *resume, txl_err *e)
{
    char cur[CKPT_PATH_MAX], dir[CFG_PATH_MAX];
    const char *out = t->cfg.train.out_dir;
    struct stat sb;
    int has = ckpt_in_run(out, "last", cur, sizeof cur, e);
    if (has < 0)
        return 1;
    if (has && run_same_file(cur, resume))
        return 0;
    if (has) {
        err_set(e, ERR_INPUT, "train.out_dir %s holds %s (step %lld), not the checkpoint "
                "resumed (%s, step %lld): continuing there would write over that run's last, "
                "best and log; --set train.out_dir=DIR continues %s in a new directory, "
                "--force writes over %s", out, cur, ckpt_file_step(cur), resume,
                ckpt_file_step(resume), resume, out);
        return 1;
    }
    if (lstat(t->dir.log_path, &sb) == 0 &&
        !(ckpt_run_dir(resume, dir, sizeof dir) && run_same_file(dir, out))) {
        err_set(e, ERR_INPUT, "train.out_dir %s holds another run (%s, without a checkpoint): "
                "--set train.out_dir=DIR continues %s in a new directory, --force writes over "
                "it", out, t->dir.log_path, resume);
        return 1;
    }
    return 0;
}

/* resume_overwrites for a real run: under out_dir's lock, after the checkpoint was read (a
 * damaged one is named first); rank 0 decides for all. */
int run_check_resume_target(const trainer *t, const char *resume, int force, txl_err *e)
{
    int rc = resume && !force && dist_is_root() && run_resume_overwrites(t, resume, e);
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
void run_set_paths(trainer *t)
{
    const char *dir = t->cfg.train.out_dir;
    const char *ext = t->cfg.train.ckpt_gzip ? ".safetensors.gz" : ".safetensors";
    snprintf(t->dir.last_path, sizeof t->dir.last_path, "%s/last%s", dir, ext);
    snprintf(t->dir.best_path, sizeof t->dir.best_path, "%s/best%s", dir, ext);
    snprintf(t->dir.log_path, sizeof t->dir.log_path, "%s/log.jsonl", dir);
}

int run_prepare_out_dir(trainer *t, const char *resume, int force, txl_err *e)
{
    const char *dir = t->cfg.train.out_dir;
    run_set_paths(t);
    if (!resume && !force && run_holds_run(t, e)) /* before creating anything */
        return -1;
    int rc = dist_is_root() ? make_dirs(dir, e) || lock_out_dir(t, e) : 0;
    if (rc == 0 && dist_is_root()) {
        if (!resume && !force && run_holds_run(t, e)) /* again, under the lock */
            rc = -1;
        else
            remove_stale_temps(t);
        if (rc == 0 && !resume && force) /* starting over: no checkpoint of the old run left */
            run_remove_numbered(t);
    }
    if (dist_max_int(rc ? 1 : 0)) {
        if (!rc)
            err_set(e, ERR_INPUT, "train.out_dir %s: rank 0 could not prepare it", dir);
        return -1;
    }
    return 0;
}

/* summary.json describes the end of the latest invocation: a run that starts removes the
 * one of the invocation before (its end event stays in log.jsonl), so a run that dies
 * leaves none. */
int run_remove_summary(const trainer *t, txl_err *e)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/summary.json", t->cfg.train.out_dir);
    if (unlink(path) != 0 && errno != ENOENT)
        return err_set(e, ERR_RUNTIME, "%s: cannot remove the previous summary: %s", path,
                       strerror(errno));
    return 0;
}
