// tpc-generate's scheduler (see tpc_generate.h): between steps, the results of the step just run
// go to their requests, finished requests are written and leave their slots, waiting requests take
// free slots, and the next step's kind and inputs are set.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_generate.h"
#include "tpc_run_load.h"

static void tpc__set(tprt_tensor_t* t, int64_t i, double v) {
  switch (t->dtype) {
    case TPRT_DTYPE_I32: ((int32_t*)t->data)[i] = (int32_t)v; break;
    case TPRT_DTYPE_I64: ((int64_t*)t->data)[i] = (int64_t)v; break;
    default: ((float*)t->data)[i] = (float)v; break;
  }
}

// The request id of the Philox stream: the line's integer "id" in [0, 2^32), else its index.
static uint32_t tpc__stream_id(const tpc_request_t* r) {
  if (r->id) {
    char* end = NULL;
    long long v = strtoll(r->id, &end, 10);
    if (end && !*end && v >= 0 && v <= 0xFFFFFFFFll) return (uint32_t)v;
  }
  return (uint32_t)r->index;
}

static void tpc__finish(tpc_gen_t* g, int64_t s, const char* why) {
  tpc_request_t* r = &g->reqs[g->slot_req[s]];
  r->finish = why;
  if (g->self == 0) tpc_gen_write_result(g->out, r, g->tokenizer);
  g->slot_req[s] = -1;
  ++g->done;
}

void tpc__progress(tpc_gen_t* g, bool last) {
  if (g->self != 0) return;
  double now = tpc_now();
  if (!last && now - g->last_report < 2.0) return;
  g->last_report = now;
  fprintf(stderr, "tpc-generate: %lld/%lld requests done, %lld tokens drawn; prefill %.1f tokens/s, decode %.1f "
          "tokens/s\n", (long long)g->done, (long long)g->nreqs, (long long)g->decode_tokens,
          g->prefill_s > 0 ? (double)g->prefill_tokens / g->prefill_s : 0.0,
          g->decode_s > 0 ? (double)g->decode_tokens / g->decode_s : 0.0);
}

// The results of the step just run, then the next step's kind and inputs.
int tpc__schedule(tpc_gen_t* g) {
  if (g->kind != K_STOP && g->steps > 0) {
    double dt = tpc_now() - g->t_step;
    int64_t n = 0;
    if (g->kind == K_DECODE) {
      const int32_t* tok = g->token_host;
      const float* loss = g->loss_host;
      for (int64_t s = 0; s < g->slots; ++s) {
        if (g->slot_req[s] < 0) continue;
        tpc_request_t* r = &g->reqs[g->slot_req[s]];
        ++n;
        if (tok[s] < 0) {
          snprintf(r->error, sizeof r->error, "no token could be drawn at position %lld: every logit is -inf or NaN",
                   (long long)r->len);
          tpc__finish(g, s, "error");
          continue;
        }
        r->logprobs[r->len - r->prompt_len] = -loss[s];
        r->tokens[r->len++] = tok[s];
        if (r->eos >= 0 && tok[s] == r->eos)
          tpc__finish(g, s, "stop");
        else if (r->len - r->prompt_len == r->max_new)
          tpc__finish(g, s, "length");
      }
      g->decode_s += dt;
      g->decode_tokens += n;
    } else {
      n = g->chunk;
      g->prefill_s += dt;
      g->prefill_tokens += n;
      g->prefill_at += g->chunk;
    }
    if (g->json && g->self == 0)
      fprintf(g->json, "{\"step\": %lld, \"kind\": \"%s\", \"tokens\": %lld, \"ms\": %.4f}\n", (long long)g->steps,
              g->kind == K_DECODE ? "decode" : "prefill", (long long)n, dt * 1e3);
    tpc__progress(g, false);
  }
  // A request being prefilled goes on; else a free slot takes the next request.
  if (g->prefilling >= 0 && g->prefill_at >= g->reqs[g->prefilling].prompt_len - 1) g->prefilling = -1;
  while (g->prefilling < 0 && g->next_req < g->nreqs) {
    int64_t s = 0;
    while (s < g->slots && g->slot_req[s] >= 0) ++s;
    if (s == g->slots) break;
    g->slot_req[s] = g->next_req++;
    if (g->reqs[g->slot_req[s]].prompt_len >= 2) {
      g->prefilling = g->slot_req[s];
      g->prefill_at = 0;
      g->slot = s;
    }
  }
  g->t_step = tpc_now();
  ++g->steps;
  if (g->prefilling >= 0) {
    const tpc_request_t* r = &g->reqs[g->prefilling];
    tprt_tensor_t* in = g->in[F_PREFILL];
    for (int64_t i = 0; i < g->chunk; ++i) {
      int64_t p = g->prefill_at + i;
      tpc__set(&in[R_IDS], i, p < r->prompt_len - 1 ? r->tokens[p] : 0);
      tpc__set(&in[R_POSITIONS], i, p < g->cache ? p : g->cache - 1);
    }
    tpc__set(&in[R_CACHE_LEN], 0, (double)g->prefill_at);
    return g->kind = K_PREFILL;
  }
  bool any = false;
  tprt_tensor_t* in = g->in[F_DECODE];
  for (int64_t s = 0; s < g->slots; ++s) {
    const tpc_request_t* r = g->slot_req[s] >= 0 ? &g->reqs[g->slot_req[s]] : NULL;
    any = any || r;
    // An empty slot decodes a dummy token (greedy, row 0 of its cache); its results are ignored.
    tpc__set(&in[R_IDS], s, r ? r->tokens[r->len - 1] : 0);
    tpc__set(&in[R_POSITIONS], s, r ? (double)(r->len - 1) : 0);
    tpc__set(&in[R_CACHE_LEN], s, r ? (double)(r->len - 1) : 0);
    tpc__set(&in[R_SEED], s, r ? (double)r->seed : 0);
    tpc__set(&in[R_REQUEST], s, r ? tpc__stream_id(r) : 0);
    tpc__set(&in[R_TEMPERATURE], s, r ? r->temperature : 0.0);
    tpc__set(&in[R_TOP_K], s, r ? r->top_k : 0);
    tpc__set(&in[R_TOP_P], s, r ? r->top_p : 1.0);
  }
  if (!any) --g->steps;
  return g->kind = any ? K_DECODE : K_STOP;
}

