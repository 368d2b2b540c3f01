/* run.h: the trainer of run/ (the files that run a training: run_dir.c, the run
 * directory; restore.c, checkpoints written and read; plan.c, the data, the model and the
 * sizes; step.c, one training step; trainer.c, the loop and its events). include/txl.h's
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
                               * micro-batch (this step's: auto decides by trying) */
    overlap_auto ovl;         /* train.comm_overlap: on, off, or auto's trial (overlap.c) */
    int R;                    /* replicas: this rank's threads, each running Bl / R whole
                               * streams of a micro-batch (1: the threads split each op) */
    model_mem mem;            /* this rank's k x Bl streams (micro-batch j: j Bl .. j Bl + Bl) */
    corpus train_c, valid_c, test_c;
    token_span train_s, valid_s, test_s;
    vocab *vocab;             /* the run's vocabulary (word, bpe; NULL: bytes): run/vocab.c */
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
    double valid_bpc;         /* bits per byte of the last validation (run_valid) */
    const txl_train_opts *opts; /* the caller's: events, progress, the command line */
    long run_steps;       /* --steps: stop after this many steps in this invocation (0 = off) */
    int threads;          /* OpenMP threads of this rank */
    int precision;        /* train.precision as resolved here: PREC_FP32 or PREC_BF16 */
    const char *prec_kernel; /* the bf16 kernel ("amx", "avx512_bf16"), or "" */
    long last_step;       /* the step held_path holds: written by this run, or the file this
                           * run resumed from (out_dir's last, in either format); -1 if neither */
    char held_path[1100]; /* that file: last_path, or the resumed one */
    const char *resumed_from; /* --resume's checkpoint (the file), or NULL */
    train_config ck_train;    /* a resume: the train section the checkpoint was trained with */
    char sched_note[768];     /* a resume that changed the lr schedule: what it does now
                               * (the banner's), else "" */
    int lock_fd;          /* out_dir/.txl.lock, flock'ed for the whole run (rank 0); -1 */
    double t_start;
    /* the plan's sizes, in floats: of the model (w, and alike g, m, v) and of the activation
     * arena; the parameter count. Set by plan_model, or by dry_plan without allocating. */
    size_t par_floats, act_floats, n_weights;
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


/* The events of a run, to the caller's callback (rank 0 only): run_event as it is;
 * run_note a text event (TXL_EV_NOTE or TXL_EV_WARN) formatted like printf. */
void run_event(const trainer *t, const txl_event *ev);
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
lr_schedule run_schedule(const train_config *tc, const train_state *st);
/* numbered.c (train.keep_checkpoints): last kept as out_dir/step-NNNNNNNN (every rank
 * calls it; all return the same status); the numbered checkpoints of an earlier run
 * removed (a --force start over); whether a name is a numbered checkpoint's temp file. */
int run_keep_numbered(trainer *t, txl_err *e);
void run_remove_numbered(const trainer *t);
int run_numbered_temp(const char *name);
int run_train_step(trainer *t, loop_state *ls, txl_err *e);
/* overlap.c: train.comm_overlap planned (after the replicas), and auto's trial after each
 * step (every rank, every step: the ranks agree at the end of each phase) */
void run_overlap_plan(trainer *t);
void run_overlap_step(trainer *t, double step_s, double comm_s);
int run_dry_plan(trainer *t, txl_err *e);
int run_plan_data(trainer *t, const char *origin, const char *resume, const char *init_from,
                  txl_err *e);
/* The run's vocabulary (run/vocab.c): --resume's or --init-from's checkpoint's, data.vocab's,
 * or built from the train split; attached to t->cfg (NULL for bytes). */
int run_plan_vocab(trainer *t, const char *resume, const char *init_from, txl_err *e);
double run_plan_mib(const trainer *t);
int run_plan_model(trainer *t, txl_err *e);
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
void run_log_json(trainer *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void run_log_flush(trainer *t);
int run_write_out_file(const char *dir, const char *name,
                       int (*put)(FILE *f, const void *arg), const void *arg, txl_err *e);
int run_start_run(trainer *t, int resume, txl_err *e);
int run_train_loop(trainer *t, txl_err *e);
void run_trainer_free(trainer *t);

#endif
