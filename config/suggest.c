/* suggest.c: "did you mean": the key an unknown name most likely means (a typo, a key in
 * another section, a prefix) and the names other trainers (nanoGPT, fairseq,
 * Transformer-XL) give txl's keys. */
#include "config_impl.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* Optimal string alignment distance (Levenshtein plus adjacent transpositions, so
 * "d_modle" is one edit from "d_model"). Strings longer than 63 bytes: a large number. */
int cfg_edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63)
        return 1000;
    int d[64][64];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int cost = a[i - 1] != b[j - 1];
            int best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best)
                best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

/* How many edits still look like a typo of a word of this length. */
static int typo_budget(size_t len)
{
    return len <= 3 ? 1 : len <= 6 ? 2 : 3;
}

/* The key the user most likely meant by section.name (section may be NULL or unknown):
 * a close name in the same section, or the same name in another section ("model.lr" ->
 * "train.lr"), or a name it is a prefix of ("warmup" -> "warmup_steps"). NULL if none. */
static const cfg_key *key_suggest(const char *section, const char *name)
{
    const cfg_key *best = NULL;
    int best_d = 1000;
    size_t len = strlen(name);
    for (size_t i = 0; i < CFG_NKEYS; i++) {
        const cfg_key *k = &cfg_keys[i];
        int d = cfg_edit_distance(name, k->name);
        if (len >= 4 && strncmp(k->name, name, len) == 0)
            d = d < 1 ? d : 1;
        d += !section || strcmp(section, k->section) != 0;
        if (d < best_d) {
            best_d = d;
            best = k;
        }
    }
    return best_d <= typo_budget(len) ? best : NULL;
}

/* The names other trainers give txl's keys (their config files and flags, '-' read as
 * '_'), so a user who brings one gets pointed at txl's key. */
static const struct {
    const char *name, *key, *who;
} key_aliases[] = {
    /* nanoGPT (train.py's globals, its config files) */
    {"n_embd", "model.d_model", "nanoGPT"}, {"block_size", "model.tgt_len", "nanoGPT"},
    {"learning_rate", "train.lr", "nanoGPT"}, {"max_iters", "train.max_steps", "nanoGPT"},
    {"lr_decay_iters", "train.max_steps", "nanoGPT"}, {"min_lr", "train.lr_min", "nanoGPT"},
    {"warmup_iters", "train.warmup_steps", "nanoGPT"}, {"grad_clip", "train.clip", "nanoGPT"},
    {"gradient_accumulation_steps", "train.grad_accum", "nanoGPT"},
    {"decay_lr", "train.schedule", "nanoGPT"}, {"dataset", "data.train", "nanoGPT"},
    /* fairseq (transformer_lm, its --flags) */
    {"decoder_layers", "model.n_layer", "fairseq"},
    {"decoder_embed_dim", "model.d_model", "fairseq"},
    {"decoder_ffn_embed_dim", "model.d_inner", "fairseq"},
    {"decoder_attention_heads", "model.n_head", "fairseq"},
    {"tokens_per_sample", "model.tgt_len", "fairseq"},
    {"attention_dropout", "model.dropatt", "fairseq"},
    {"max_update", "train.max_steps", "fairseq"},
    {"warmup_updates", "train.warmup_steps", "fairseq"}, {"clip_norm", "train.clip", "fairseq"},
    {"update_freq", "train.grad_accum", "fairseq"}, {"max_tokens", "train.batch_size", "fairseq"},
    {"save_interval_updates", "train.ckpt_interval", "fairseq"},
    {"keep_interval_updates", "train.keep_checkpoints", "fairseq"},
    {"keep_last_epochs", "train.keep_checkpoints", "fairseq"},
    {"lr_scheduler", "train.schedule", "fairseq"}, {"adam_eps", "train.eps", "fairseq"},
    {"adam_betas", "train.beta1", "fairseq"}, {"save_dir", "train.out_dir", "fairseq"},
    {"validate_interval_updates", "train.eval_interval", "fairseq"},
    /* Transformer-XL (pytorch/train.py's flags; tgt_len, mem_len, n_layer, d_model and most
     * others are txl's names too) */
    {"d_embed", "model.d_model", "Transformer-XL"},
    {"warmup_step", "train.warmup_steps", "Transformer-XL"},
    {"max_step", "train.max_steps", "Transformer-XL"},
    {"scheduler", "train.schedule", "Transformer-XL"}, {"eta_min", "train.lr_min", "Transformer-XL"},
    {"batch_chunk", "train.grad_accum", "Transformer-XL"},
    {"work_dir", "train.out_dir", "Transformer-XL"}, {"optim", "train.optimizer", "Transformer-XL"},
    {"data", "data.train", "Transformer-XL"},
};

int cfg_key_suggest(const char *section, const char *name, char *key, size_t cap, char *why,
                    size_t why_cap)
{
    char norm[64];
    size_t n = 0;
    while (*name == '-')
        name++;
    for (; name[n] && n + 1 < sizeof norm; n++)
        norm[n] = name[n] == '-' ? '_' : (char)tolower((unsigned char)name[n]);
    norm[n] = 0;
    why[0] = 0;
    for (size_t i = 0; i < COUNT(key_aliases); i++)
        if (strcmp(norm, key_aliases[i].name) == 0) {
            snprintf(key, cap, "%s", key_aliases[i].key);
            snprintf(why, why_cap, "%s is %s's name for it", name, key_aliases[i].who);
            return 0;
        }
    const cfg_key *k = key_suggest(section, norm);
    if (!k)
        return -1;
    snprintf(key, cap, "%s.%s", k->section, k->name);
    return 0;
}

/* " (did you mean 'model.d_model'?)", " (did you mean 'train.lr'? learning_rate is
 * nanoGPT's name for it)" or "". */
void cfg_suggest(char *buf, size_t cap, const char *section, const char *name)
{
    char key[64], why[128];
    if (cfg_key_suggest(section, name, key, sizeof key, why, sizeof why) == 0)
        snprintf(buf, cap, " (did you mean '%s'?%s%s)", key, why[0] ? " " : "", why);
    else
        buf[0] = '\0';
}
