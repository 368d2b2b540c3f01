/* run.h: the trainer of run/ (the files that run a training: run_dir.c, the run
 * directory; restore.c, checkpoints written and read; schedule.c, the lr schedule; plan.c,
 * the data, the model and the sizes; step.c, one training step; trainer.c, the loop and
 * its events). include/txl.h's
 * txl_trainer is one of these (api/train.c). Not for the rest of txl. */
#ifndef TXL_RUN_H
#define TXL_RUN_H

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
#include "../common/sys.h"
#include "../config/config.h"
#include "../io/ckpt_open.h"
#include "../eval/evaluate.h"
#include "../eval/terms.h"
#include "../io/train_state.h"
#include "overlap.h"


/* train.skip_outlier: the running mean of the gradient norm is the plain mean of the first
 * NORM_WINDOW applied steps, then an exponential average with weight 1/NORM_WINDOW; no
 * step is skipped before NORM_WINDOW steps were applied. */
enum { NORM_WINDOW = 50 };

/* The data of a run (plan.c, run/vocab.c): the splits, the vocabulary, their tokens, the
 * train batcher and a step's batch. */
typedef struct {
    corpus train_c, valid_c, test_c;
    token_span train_s, valid_s, test_s;
    vocab *vocab;             /* the run's vocabulary (word, bpe; NULL: bytes): run/vocab.c */
    tok_stream train_ts, valid_ts; /* their tokens (anchors, coordinates: data/tokens.h) */
    batcher bt;
    txl_tok *x, *y;           /* [k B, Lq] of all streams of a step; micro-batch j is rows
                               * j B .. j B + B, of which this rank uses j B + b0 .. + Bl */
    int32_t *co;              /* [k B, Lq, TXL_N_COORDS] their coordinates, or NULL */
} run_data;

/* A step's streams and who runs them (plan.c, step.c): micro-batches, this rank's share of
 * each (data parallelism over MPI ranks), its replicas (one per thread) and its memory. */
typedef struct {
    int B, k;                 /* streams per micro-batch (train.batch_size), micro-batches per
                               * update (train.grad_accum) */
    int Bl, b0;               /* streams of this rank in a micro-batch, the first of them */
    int threads;              /* OpenMP threads of this rank */
    int R;                    /* replicas: this rank's threads, each running Bl / R whole
                               * streams of a micro-batch (1: the threads split each op) */
    model_acts *A;            /* [R] the activations of each replica (Bl / R streams) */
    model *rep;               /* [R] replica r > 0: the weights of mdl, its own gradient */
    double *rep_loss;         /* [R] each replica's loss sum of a micro-batch */
    int *rep_m;               /* [R] and the memory rows it leaves */
    size_t *layer_at;         /* [n_layer + 1] where layer l's tensors begin in the flat
                               * gradient (layer_at[n_layer]: its end); before layer 0 the
                               * model-wide tensors */
    int overlap;              /* MPI, one replica, train.comm_overlap: each layer's gradient
                               * sum starts as soon as its backward ends in the last
                               * micro-batch (this step's: auto decides by trying) */
    overlap_auto ovl;         /* train.comm_overlap: on, off, or auto's trial (overlap.c) */
    model_mem mem;            /* this rank's k x Bl streams (micro-batch j: j Bl .. j Bl + Bl) */
    model_mem gmem;           /* rank 0 of several: all k B streams' memory, for `last` */
} run_streams;

/* The optimiser's state besides the weights: Adam's moments, laid out as mdl's table. */
typedef struct {
    float *m, *v;
} run_adam;

/* The run directory's files (run_dir.c) and its lock. */
typedef struct {
    char last_path[1100], best_path[1100], log_path[1100];
    long last_step;           /* the step held_path holds: written by this run, or the file
                               * this run resumed from (out_dir's last, in either format); -1
                               * if neither */
    char held_path[1100];     /* that file: last_path, or the resumed one */
    int lock_fd;              /* out_dir/.txl.lock, flock'ed for the whole run (rank 0); -1 */
} run_dir;

/* A sink of a run's events (events.c): a callback and its context. */
typedef struct {
    void (*fn)(void *ctx, const txl_event *ev);
    void *ctx;
} run_sink;

/* The sinks of a run, in the order each event reaches them (rank 0): log.jsonl's, which
 * run_start_run registers once the file is open, then the caller's opts.on_event. */
enum { RUN_SINK_LOG, RUN_SINK_CALLER, RUN_SINKS };

/* log.jsonl, rank 0's (log.c). */
typedef struct {
    FILE *f;
    int err;                  /* why an event could not be written (the first failure; 0:
                               * none): the run stops (run_ends) and exits 1 */
    long fail_step;           /* the step of that event */
} run_log;

/* What the run continues (restore.c, schedule.c). */
typedef struct {
    const char *from;         /* --resume's checkpoint (the file), or NULL */
    train_config ck_train;    /* the train section the checkpoint was trained with */
    char sched_note[768];     /* a resume that changed the lr schedule: what it does now
                               * (the banner's), else "" */
} run_resume;

/* The plan's sizes, in floats: of the model (w, and alike g, m, v) and of the activation
 * arena; the parameter count. Set by plan_model, or by dry_plan without allocating. */
typedef struct {
    size_t par_floats, act_floats, n_weights;
} run_sizes;

/* A run: its config and options, the model and its optimiser, the data, the streams, the
 * run directory and log, the state that checkpoints hold, and what it resumed. */
typedef struct {
    run_config cfg;
    const txl_train_opts *opts; /* the caller's: events, progress, the command line */
    long run_steps;           /* --steps: stop after this many steps in this invocation (0 =
                               * off) */
    model mdl;
    run_adam adam;
    run_data data;
    run_streams streams;
    run_sizes sizes;
    int precision;            /* train.precision as resolved here: PREC_FP32 or PREC_BF16 */
    const char *prec_kernel;  /* the bf16 kernel ("amx", "avx512_bf16"), or "" */
    terms_pass terms;         /* rank 0, train.term_stats_interval > 0: the terms events' pass */
    run_dir dir;
    run_log log;
    run_sink sinks[RUN_SINKS];
    run_resume resume;
    train_state st;
    double valid_bpc;         /* bits per byte of the last validation (run_valid) */
    double t_start;
} trainer;

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


/* The events of a run, to its sinks in order (rank 0 only): run_event as it is; run_note a
 * text event (TXL_EV_NOTE or TXL_EV_WARN) formatted like printf. */
void run_event(const trainer *t, const txl_event *ev);
/* log.c: the sink that writes log.jsonl (ctx: the run's run_log). */
void run_log_sink(void *ctx, const txl_event *ev);
void run_note(const trainer *t, txl_event_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Asks the loop to stop after the current step (a signal handler may call it). */
void run_request_stop(int sig);

/* train.precision resolved on this machine and gemm()'s precision set to it (before
 * anything is written: bf16 on a CPU without it is ERR_INPUT, exit 2). */
int run_set_precision(trainer *t, txl_err *e);

/* The trainer's cross-file functions (documented at their definitions). */
int run_check_resume_target(const trainer *t, const char *resume, int force, txl_err *e);
int run_holds_run(const trainer *t, txl_err *e);
FILE *run_open_log(const char *path, int resume, txl_err *e);
int run_prepare_out_dir(trainer *t, const char *resume, int force, txl_err *e);
int run_remove_summary(const trainer *t, txl_err *e);
int run_resume_in_place(trainer *t, const char *resume, int explicit_out_dir, txl_err *e);
int run_resume_overwrites(const trainer *t, const char *resume, txl_err *e);
int run_same_file(const char *a, const char *b);
void run_set_paths(trainer *t);
int run_write_config_yaml(const run_config *c, txl_err *e);
void run_last_desc(const trainer *t, char *buf, size_t cap);
int run_restore_run(trainer *t, const char *resume, const char *init_from,
                       const char *origin, int dry, txl_err *e);
int run_save_checkpoint(trainer *t, const char *path, int with_state, double valid_loss,
                           txl_err *e);
int run_stop_keeping_last(trainer *t, txl_err *e);
void run_loop_init(trainer *t, loop_state *ls);
/* schedule.c: the lr schedule of a train section shaped by the state; the lr of a step;
 * a resume's change of the schedule (t->sched_note says what it does now). */
lr_schedule run_schedule(const train_config *tc, const train_state *st);
double run_step_lr(const trainer *t, const lr_schedule *sched, long step);
int run_resume_schedule(trainer *t, txl_err *e);
/* numbered.c (train.keep_checkpoints): last kept as out_dir/step-NNNNNNNN (every rank
 * calls it; all return the same status); the numbered checkpoints of an earlier run
 * removed (a --force start over); whether a name is a numbered checkpoint's temp file. */
int run_keep_numbered(trainer *t, txl_err *e);
void run_remove_numbered(const trainer *t);
int run_numbered_temp(const char *name);
int run_train_step(trainer *t, loop_state *ls, txl_err *e);
int run_dry_plan(trainer *t, txl_err *e);
int run_plan_data(trainer *t, const char *origin, const char *resume, const char *init_from,
                  txl_err *e);
/* The run's vocabulary (run/vocab.c): --resume's or --init-from's checkpoint's, data.vocab's,
 * or built from the train split; attached to t->cfg (NULL for bytes). */
int run_plan_vocab(trainer *t, const char *resume, const char *init_from, txl_err *e);
double run_plan_mib(const trainer *t);
int run_plan_model(trainer *t, txl_err *e);
/* What plan.c allocated of the data and the streams, freed (safe on a zeroed struct). */
void run_data_free(run_data *d);
void run_streams_free(run_streams *s);
int run_plan_terms(trainer *t, txl_err *e);
char *run_print_dry_run(const trainer *t, const char *cfg_path, const char *resume,
                        const char *init_from);
void run_print_plan(const trainer *t, FILE *f);
int run_valid_batch(const trainer *t);
void run_add_num(cJSON *o, const char *key, const char *fmt, double x);
char *run_dry_run(trainer *t, const char *cfg_path, const char *resume, const char *init_from,
                  int force, txl_err *e);
int run_resolve_config(trainer *t, const char *resume, int explicit_out_dir, const char *origin,
                       txl_err *e);
int run_write_out_file(const char *dir, const char *name,
                       int (*put)(FILE *f, const void *arg), const void *arg, txl_err *e);
int run_start_run(trainer *t, int resume, txl_err *e);
int run_train_loop(trainer *t, txl_err *e);
void run_trainer_free(trainer *t);

#endif
