/*
 * A Hugging Face checkpoint as llama.cpp metadata, following the vendored
 * llama.cpp's convert_hf_to_gguf.py (conversion/base.py TextModel,
 * llama.py LlamaModel, qwen.py Qwen2/Qwen3/Qwen2Moe/Qwen3MoeModel) with
 * --outtype bf16: the same keys and values, tensor names, shapes and
 * types (F32 for 1-D tensors, norms and the MoE router; BF16 otherwise).
 * No Python runs: config.json and the tokenizer files are read here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ws_llama_hf.h"

static const struct arch {
    const char *hf;   /* config.json "architectures"[0] */
    const char *name; /* general.architecture */
    int permute_qk;   /* LlamaModel.undo_permute: q/k rows reordered for llama.cpp's rope */
} ARCHS[] = {
    {"LlamaForCausalLM", "llama", 1},
    {"MistralForCausalLM", "llama", 1},
    {"Qwen2ForCausalLM", "qwen2", 0},
    {"Qwen3ForCausalLM", "qwen3", 0},
    {"Qwen3MoeForCausalLM", "qwen3moe", 0},
};

/* Per-layer tensors: Hugging Face suffix after "model.layers.N.", GGUF
 * suffix after "blk.N.", and which of q (1) or k (2) llama permutes. */
static const struct {
    const char *hf, *gguf;
    int qk;
} LAYER[] = {
    {"input_layernorm.weight", "attn_norm.weight", 0},       {"post_attention_layernorm.weight", "ffn_norm.weight", 0},
    {"self_attn.q_proj.weight", "attn_q.weight", 1},          {"self_attn.q_proj.bias", "attn_q.bias", 1},
    {"self_attn.k_proj.weight", "attn_k.weight", 2},          {"self_attn.k_proj.bias", "attn_k.bias", 2},
    {"self_attn.v_proj.weight", "attn_v.weight", 0},          {"self_attn.v_proj.bias", "attn_v.bias", 0},
    {"self_attn.o_proj.weight", "attn_output.weight", 0},     {"self_attn.o_proj.bias", "attn_output.bias", 0},
    {"self_attn.q_norm.weight", "attn_q_norm.weight", 0},     {"self_attn.k_norm.weight", "attn_k_norm.weight", 0},
    {"mlp.gate_proj.weight", "ffn_gate.weight", 0},           {"mlp.up_proj.weight", "ffn_up.weight", 0},
    {"mlp.down_proj.weight", "ffn_down.weight", 0},           {"mlp.gate.weight", "ffn_gate_inp.weight", 0},
};
static const char *const EXPERT[] = {"gate_proj.weight", "up_proj.weight", "down_proj.weight"};
static const char *const EXPERT_GGUF[] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};

int ws_hf_is_checkpoint(const char *path) {
    char p[4096];
    struct stat st;
    snprintf(p, sizeof p, "%s/config.json", path);
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && stat(p, &st) == 0;
}

struct ctx {
    struct gguf_context *meta;
    const ws_json *cfg;
    const struct arch *arch;
    char *error;
    size_t error_size;
    ws_status s;
};

static void refuse(struct ctx *c, ws_status s, const char *what, const char *name) {
    if (c->s == WS_OK) {
        c->s = s;
        snprintf(c->error, c->error_size, what, name);
    }
}

/* The first of `keys` config.json holds (convert's find_hparam), or NULL. */
static const ws_json *find(const ws_json *obj, const char *const *keys) {
    for (; *keys; keys++) {
        const ws_json *v = ws_json_get(obj, *keys);
        if (v && v->type != WS_JSON_NULL) return v;
    }
    return NULL;
}

static void key_of(struct ctx *c, char *key, size_t n, const char *suffix) {
    snprintf(key, n, "%s.%s", c->arch->name, suffix);
}

/* Write {arch}.suffix as u32 from the first of `keys`; 0 if absent. */
static int64_t set_u32(struct ctx *c, const char *suffix, const char *const *keys, int required) {
    const ws_json *v = find(c->cfg, keys);
    if (!v) {
        if (required) refuse(c, WS_ERR_FORMAT, "config.json has no %s", keys[0]);
        return 0;
    }
    if (!v->is_integer || v->integer < 0 || v->integer > UINT32_MAX) {
        refuse(c, WS_ERR_FORMAT, "config.json: %s is not an unsigned 32-bit integer", keys[0]);
        return 0;
    }
    char key[128];
    key_of(c, key, sizeof key, suffix);
    gguf_set_val_u32(c->meta, key, (uint32_t)v->integer);
    return v->integer;
}

static void set_f32(struct ctx *c, const char *suffix, const ws_json *v, const char *what) {
    if (!v) return;
    if (v->type != WS_JSON_NUMBER) {
        refuse(c, WS_ERR_FORMAT, "config.json: %s is not a number", what);
        return;
    }
    char key[128];
    key_of(c, key, sizeof key, suffix);
    gguf_set_val_f32(c->meta, key, (float)v->number); /* gguf-py packs a Python float as float32: round to nearest */
}

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* TextModel.set_gguf_parameters and the architecture's additions. */
static void hparams(struct ctx *c) {
    gguf_set_val_str(c->meta, "general.architecture", c->arch->name);
    set_u32(c, "block_count", KEYS("n_layers", "num_hidden_layers", "n_layer", "num_layers"), 1);
    set_u32(c, "context_length", KEYS("max_position_embeddings", "n_ctx", "n_positions", "max_length", "max_sequence_length", "model_max_length"), 0);
    int64_t n_embd = set_u32(c, "embedding_length", KEYS("hidden_size", "n_embd", "dim"), 1);
    set_u32(c, "feed_forward_length", KEYS("prefix_dense_intermediate_size", "dense_intermediate_size", "intermediate_size", "n_inner", "hidden_dim"), 0);
    int64_t n_head = set_u32(c, "attention.head_count", KEYS("num_attention_heads", "n_head", "n_heads"), 1);
    set_u32(c, "attention.head_count_kv", KEYS("num_key_value_heads", "n_kv_heads"), 0);
    const ws_json *causal = ws_json_get(c->cfg, "is_causal");
    if (causal && causal->type == WS_JSON_BOOL && !causal->boolean) refuse(c, WS_ERR_UNSUPPORTED, "config.json: is_causal false%s", "");

    const ws_json *rope = find(c->cfg, KEYS("rope_parameters", "rope_scaling"));
    if (rope && rope->type != WS_JSON_OBJECT) refuse(c, WS_ERR_FORMAT, "config.json: %s is not an object", "rope_parameters");
    if (ws_json_get(rope, "full_attention") || ws_json_get(rope, "sliding_attention") || ws_json_get(rope, "mrope_section")) {
        refuse(c, WS_ERR_UNSUPPORTED, "config.json: per-layer-type or multimodal rope parameters are not supported%s", "");
    }
    const ws_json *rt = find(rope, KEYS("rope_type", "type"));
    const char *rope_type = rt && rt->type == WS_JSON_STRING ? rt->string : NULL;
    const ws_json *factor = ws_json_get(rope, "factor");
    char key[128];
    if (!rope_type || !strcmp(rope_type, "default") || !strcmp(rope_type, "dynamic")) {
        /* nothing written (dynamic: handled by the HunYuan class only) */
    } else if ((!strcmp(rope_type, "linear") || !strcmp(rope_type, "yarn")) && factor) {
        key_of(c, key, sizeof key, "rope.scaling.type");
        gguf_set_val_str(c->meta, key, rope_type);
        set_f32(c, "rope.scaling.factor", factor, "rope factor");
        if (!strcmp(rope_type, "yarn")) {
            const ws_json *orig = ws_json_get(rope, "original_max_position_embeddings");
            if (!orig || !orig->is_integer) refuse(c, WS_ERR_FORMAT, "config.json: yarn rope without %s", "original_max_position_embeddings");
            key_of(c, key, sizeof key, "rope.scaling.original_context_length");
            if (orig && orig->is_integer) gguf_set_val_u32(c->meta, key, (uint32_t)orig->integer);
            set_f32(c, "rope.scaling.yarn_ext_factor", ws_json_get(rope, "extrapolation_factor"), "extrapolation_factor");
            set_f32(c, "rope.scaling.yarn_attn_factor", find(rope, KEYS("attention_factor", "attn_factor")), "attention_factor");
            set_f32(c, "rope.scaling.yarn_beta_fast", ws_json_get(rope, "beta_fast"), "beta_fast");
            set_f32(c, "rope.scaling.yarn_beta_slow", ws_json_get(rope, "beta_slow"), "beta_slow");
        }
    } else if (strcmp(rope_type, "linear") != 0 && strcmp(rope_type, "yarn") != 0) {
        /* llama3 needs the rope_freqs tensor convert computes; longrope and others more */
        refuse(c, WS_ERR_UNSUPPORTED, "config.json: rope type '%s' is not supported by the adapter", rope_type);
    }
    const ws_json *theta = ws_json_get(rope, "rope_theta");
    if (!theta) theta = find(c->cfg, KEYS("global_rope_theta", "rope_global_theta", "rope_theta_global", "rope_theta", "rotary_emb_base"));
    set_f32(c, "rope.freq_base", theta, "rope_theta");
    if (find(c->cfg, KEYS("local_rope_theta", "rope_local_theta", "rope_theta_local", "swa_rope_theta", "rope_local_base_freq"))) {
        refuse(c, WS_ERR_UNSUPPORTED, "config.json: a sliding-window rope theta is not supported%s", "");
    }
    set_f32(c, "attention.layer_norm_rms_epsilon", find(c->cfg, KEYS("rms_norm_eps", "norm_eps")), "rms_norm_eps");
    set_f32(c, "attention.layer_norm_epsilon", find(c->cfg, KEYS("layer_norm_eps", "layer_norm_epsilon", "norm_epsilon")), "layer_norm_eps");
    set_u32(c, "expert_count", KEYS("num_local_experts", "num_experts", "n_routed_experts"), 0);
    set_u32(c, "expert_used_count", KEYS("num_experts_per_tok", "num_experts_per_token", "top_k_experts"), 0);
    set_u32(c, "expert_group_count", KEYS("n_group"), 0);
    set_u32(c, "expert_group_used_count", KEYS("topk_group"), 0);
    if (find(c->cfg, KEYS("score_function", "scoring_func", "score_func", "moe_router_activation", "moe_router_activation_func", "expert_selection_fn"))) {
        refuse(c, WS_ERR_UNSUPPORTED, "config.json: an expert gating function is not supported%s", "");
    }
    int64_t head_dim = set_u32(c, "attention.key_length", KEYS("head_dim"), 0);
    set_u32(c, "attention.value_length", KEYS("head_dim"), 0);
    gguf_set_val_u32(c->meta, "general.file_type", 32); /* LlamaFileType.MOSTLY_BF16 */
    gguf_set_val_u32(c->meta, "general.quantization_version", 2);
    if (!strcmp(c->arch->name, "llama")) {
        set_u32(c, "vocab_size", KEYS("vocab_size"), 1);
        key_of(c, key, sizeof key, "rope.dimension_count");
        gguf_set_val_u32(c->meta, key, (uint32_t)(head_dim ? head_dim : (n_head ? n_embd / n_head : 0)));
    }
    if (!strcmp(c->arch->name, "qwen3moe")) { /* Qwen2MoeModel */
        set_u32(c, "expert_feed_forward_length", KEYS("moe_intermediate_size"), 0);
        set_u32(c, "expert_shared_feed_forward_length", KEYS("shared_expert_intermediate_size"), 0);
    }
}

void ws_map_free(struct ws_map *map) {
    for (size_t i = 0; i < map->n; i++) free(map->entries[i].src);
    free(map->entries);
    map->entries = NULL;
    map->n = 0;
}

struct ws_map_entry *ws_map_find(const struct ws_map *map, const char *name) {
    for (size_t i = 0; i < map->n; i++) {
        if (!strcmp(map->entries[i].name, name)) return &map->entries[i];
    }
    return NULL;
}

/* The entry for `name`, made with n_src unset sources if new. */
static struct ws_map_entry *entry(struct ctx *c, struct ws_map *map, const char *name, size_t n_src) {
    struct ws_map_entry *e = ws_map_find(map, name);
    if (e) return e;
    struct ws_map_entry *grown = realloc(map->entries, (map->n + 1) * sizeof *grown);
    size_t *src = malloc(n_src * sizeof *src);
    if (!grown || !src) {
        free(src);
        if (grown) map->entries = grown;
        refuse(c, WS_ERR_OUT_OF_MEMORY, "no memory for tensor %s", name);
        return NULL;
    }
    map->entries = grown;
    e = &map->entries[map->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    for (size_t k = 0; k < n_src; k++) src[k] = (size_t)-1;
    e->src = src;
    e->n_src = n_src;
    return e;
}

/* Map weightstream tensor `index` (Hugging Face name `hf`) to its GGUF tensor. */
static void map_tensor(struct ctx *c, struct ws_map *map, size_t index, const char *hf, int64_t n_expert, uint32_t n_head, uint32_t n_kv) {
    char name[GGML_MAX_NAME + 32];
    int bid = -1, xid = -1, which = -1, qk = 0, n = 0;
    size_t len = strlen(hf);
    if (len >= 20 && !strcmp(hf + len - 20, ".rotary_emb.inv_freq")) return; /* convert drops these */
    if (!strcmp(hf, "model.embed_tokens.weight")) {
        snprintf(name, sizeof name, "token_embd.weight");
    } else if (!strcmp(hf, "model.norm.weight")) {
        snprintf(name, sizeof name, "output_norm.weight");
    } else if (!strcmp(hf, "lm_head.weight")) {
        snprintf(name, sizeof name, "output.weight");
    } else if (sscanf(hf, "model.layers.%d.%n", &bid, &n) == 1 && n > 0 && bid >= 0) {
        const char *rest = hf + n;
        int e = -1, m = 0;
        for (size_t i = 0; i < sizeof LAYER / sizeof LAYER[0] && which < 0; i++) {
            if (!strcmp(rest, LAYER[i].hf)) {
                snprintf(name, sizeof name, "blk.%d.%s", bid, LAYER[i].gguf);
                qk = c->arch->permute_qk ? LAYER[i].qk : 0;
                which = (int)i;
            }
        }
        if (which < 0 && sscanf(rest, "mlp.experts.%d.%n", &e, &m) == 1 && m > 0 && e >= 0) {
            for (int w = 0; w < 3; w++) {
                if (!strcmp(rest + m, EXPERT[w])) {
                    snprintf(name, sizeof name, "blk.%d.%s", bid, EXPERT_GGUF[w]);
                    xid = e;
                    which = w;
                }
            }
        }
        if (which < 0) {
            refuse(c, WS_ERR_UNSUPPORTED, "tensor '%s' has no llama.cpp counterpart the adapter knows", hf);
            return;
        }
    } else {
        refuse(c, WS_ERR_UNSUPPORTED, "tensor '%s' has no llama.cpp counterpart the adapter knows", hf);
        return;
    }
    if (xid >= 0 && xid >= n_expert) {
        refuse(c, WS_ERR_FORMAT, "tensor '%s': expert beyond config.json's expert count", hf);
        return;
    }
    struct ws_map_entry *e = entry(c, map, name, xid >= 0 ? (size_t)n_expert : 1);
    if (!e) return;
    if (e->src[xid >= 0 ? xid : 0] != (size_t)-1) {
        refuse(c, WS_ERR_FORMAT, "tensor '%s' appears twice", hf);
        return;
    }
    e->src[xid >= 0 ? xid : 0] = index;
    e->permute_heads = qk == 1 ? n_head : qk == 2 ? n_kv : 0;
}

/* convert's type for a GGUF tensor: F32 for 1-D ones, norms and the router. */
static enum ggml_type type_of(const char *name, uint32_t n_dims) {
    size_t n = strlen(name);
    int norm = n >= 12 && !strcmp(name + n - 12, "_norm.weight");
    return n_dims <= 1 || norm || strstr(name, ".ffn_gate_inp.") ? GGML_TYPE_F32 : GGML_TYPE_BF16;
}

/* Declare every mapped tensor; every expert of a stack present and alike. */
static void declare_all(struct ctx *c, ws_checkpoint *ckpt, struct ws_map *map) {
    for (size_t i = 0; i < map->n && c->s == WS_OK; i++) {
        struct ws_map_entry *e = &map->entries[i];
        ws_tensor_info info, other;
        for (size_t k = 0; k < e->n_src; k++) {
            if (e->src[k] == (size_t)-1) {
                char what[160];
                snprintf(what, sizeof what, "%s (expert %zu)", e->name, k);
                refuse(c, WS_ERR_NOT_FOUND, "the checkpoint lacks a tensor of %s", what);
                return;
            }
        }
        ws_tensor_info_at(ckpt, e->src[0], &info);
        for (size_t k = 1; k < e->n_src; k++) {
            ws_tensor_info_at(ckpt, e->src[k], &other);
            if (other.n_dims != info.n_dims || memcmp(other.shape, info.shape, sizeof info.shape) != 0) {
                refuse(c, WS_ERR_FORMAT, "experts of %s differ in shape", e->name);
                return;
            }
        }
        enum ggml_type type = type_of(e->name, info.n_dims);
        int copyable = ws_tensor_nbytes(ckpt, e->src[0], WS_DTYPE_F32) || ws_tensor_nbytes(ckpt, e->src[0], WS_DTYPE_F16);
        if (!info.loadable && !(type == GGML_TYPE_F32 && copyable)) {
            char what[200];
            snprintf(what, sizeof what, "tensor '%s' (%s)", info.name, info.dtype);
            refuse(c, WS_ERR_UNSUPPORTED, "%s cannot be loaded: weightstream does not produce it", what);
            return;
        }
        uint64_t shape[WS_MAX_DIMS + 1];
        uint32_t n_dims = info.n_dims;
        if (e->n_src > 1) { /* torch.stack(experts): a new outermost dimension */
            shape[0] = e->n_src;
            memcpy(shape + 1, info.shape, info.n_dims * sizeof info.shape[0]);
            n_dims++;
        } else {
            memcpy(shape, info.shape, info.n_dims * sizeof info.shape[0]);
        }
        c->s = ws_gguf_declare(c->meta, e->name, type, shape, n_dims, c->error, c->error_size);
    }
}

/* Qwen3Model._is_qwen3_reranker: "# qwen3-reranker" in README.md, or the
 * directory's or _name_or_path's name, lowercased. */
static int is_reranker(const char *dir, const ws_json *cfg) {
    char path[4096], *readme = NULL;
    size_t n = 0, got;
    snprintf(path, sizeof path, "%s/README.md", dir);
    FILE *f = fopen(path, "rb");
    for (char *grown; f && (grown = realloc(readme, n + 65537)) != NULL && (got = fread((readme = grown) + n, 1, 65536, f)) > 0;) n += got;
    if (f) fclose(f);
    const ws_json *np = ws_json_get(cfg, "_name_or_path");
    const char *hints[] = {dir, np && np->type == WS_JSON_STRING ? np->string : "", readme ? readme : ""};
    if (readme) readme[n] = '\0';
    int found = 0;
    for (int h = 0; h < 3 && !found; h++) {
        char *lower = malloc(strlen(hints[h]) + 1);
        for (size_t i = 0; lower && (i == 0 || hints[h][i - 1]); i++) lower[i] = (char)(hints[h][i] >= 'A' && hints[h][i] <= 'Z' ? hints[h][i] + 32 : hints[h][i]);
        found = lower && (h == 2 ? strstr(lower, "# qwen3-reranker") || strstr(lower, "# qwen3-vl-reranker")
                                 : strstr(lower, "qwen3-reranker") || strstr(lower, "qwen3-vl-reranker"));
        free(lower);
    }
    free(readme);
    return found;
}

ws_status ws_hf_metadata(const char *dir, ws_checkpoint *ckpt, struct gguf_context **meta, struct ws_map *map,
                         char *error, size_t error_size) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    ws_json *cfg = ws_json_read_file(path, error, error_size);
    if (!cfg) return WS_ERR_FORMAT;
    struct stat st;
    struct ctx c = {gguf_init_empty(), cfg, NULL, error, error_size, WS_OK};
    const ws_json *archs = ws_json_get(cfg, "architectures");
    const char *hf = archs && archs->type == WS_JSON_ARRAY && archs->n > 0 && archs->items[0].type == WS_JSON_STRING ? archs->items[0].string : NULL;
    for (size_t i = 0; hf && i < sizeof ARCHS / sizeof ARCHS[0]; i++) {
        if (!strcmp(hf, ARCHS[i].hf)) c.arch = &ARCHS[i];
    }
    if (!c.meta) {
        refuse(&c, WS_ERR_OUT_OF_MEMORY, "cannot create the metadata%s", "");
    } else if (!c.arch) {
        snprintf(path, sizeof path, "%s", hf ? hf : "(config.json names none)");
        refuse(&c, WS_ERR_UNSUPPORTED, "architecture %s is not supported by the adapter (Llama, Mistral, Qwen2, Qwen3, Qwen3-MoE are)", path);
    } else if (ws_json_get(cfg, "text_config")) {
        refuse(&c, WS_ERR_UNSUPPORTED, "config.json has a text_config (a multimodal model): not supported%s", "");
    } else if (c.arch->name[0] == 'q' && (snprintf(path, sizeof path, "%s/modules.json", dir), stat(path, &st) == 0)) {
        /* Qwen2Model._try_set_pooling_type: a sentence-transformers embedding model */
        refuse(&c, WS_ERR_UNSUPPORTED, "%s: a sentence-transformers pooling model (convert writes a pooling type): not supported", path);
    } else if (!strcmp(c.arch->name, "qwen3") && is_reranker(dir, cfg)) {
        /* Qwen3Model._is_qwen3_reranker: convert writes a rank-pooling head */
        refuse(&c, WS_ERR_UNSUPPORTED, "%s: a Qwen3 reranker (convert writes its classifier head): not supported", dir);
    } else {
        hparams(&c);
    }
    memset(map, 0, sizeof *map);
    if (c.s == WS_OK) {
        const ws_json *ne = find(cfg, KEYS("num_local_experts", "num_experts", "n_routed_experts"));
        /* present and integral: hparams() checked them */
        const ws_json *nh = find(cfg, KEYS("num_attention_heads", "n_head", "n_heads")), *nkv = find(cfg, KEYS("num_key_value_heads", "n_kv_heads"));
        uint32_t n_head = (uint32_t)nh->integer, n_kv = nkv && nkv->is_integer ? (uint32_t)nkv->integer : n_head;
        size_t count = ws_tensor_count(ckpt);
        for (size_t i = 0; i < count && c.s == WS_OK; i++) {
            ws_tensor_info info;
            ws_tensor_info_at(ckpt, i, &info);
            map_tensor(&c, map, i, info.name, ne && ne->is_integer ? ne->integer : 0, n_head, n_kv);
        }
        struct ws_map_entry *embd = ws_map_find(map, "token_embd.weight");
        if (c.s == WS_OK && embd && !ws_map_find(map, "output.weight")) {
            /* Tied embeddings: convert writes no output.weight and llama.cpp
             * then multiplies by token_embd; the adapter declares it as that. */
            size_t src = embd->src[0];
            struct ws_map_entry *out = entry(&c, map, "output.weight", 1);
            if (out) out->src[0] = src;
        }
        declare_all(&c, ckpt, map);
    }
    if (c.s == WS_OK) {
        const ws_json *nv = ws_json_get(cfg, "vocab_size");
        c.s = ws_hf_vocab(dir, cfg, nv && nv->is_integer ? nv->integer : 0, !strcmp(c.arch->name, "llama"), c.meta, error, error_size);
    }
    ws_json_free(cfg);
    if (c.s != WS_OK) {
        ws_map_free(map);
        if (c.meta) gguf_free(c.meta);
        c.meta = NULL;
    }
    *meta = c.meta;
    return c.s;
}
