/*
 * hpgmg/comm.c - communication programs (see comm.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#ifndef HPGMG_NO_MPIX
#include "mpix_acc.h"
#endif

#include "comm.h"
#if defined(HG_HAVE_CUDA) && !defined(HPGMG_NO_MPIX)
#define HG_KI 1
#include "cuda_iface.h"
#endif

/* tags: one per program kind (every level has its own communicator) */
#define TAG_EXCHANGE 10
#define TAG_RESTRICT 20
#define TAG_INTERP 30

typedef struct {
    int peer;       /* world rank */
    int key1, key2; /* canonical order inside a message */
    int size;       /* doubles */
    hg_tile_t t;
} entry_t;

typedef struct {
    entry_t *e;
    int n, cap;
} elist_t;

static void push(elist_t *l, int peer, int key1, int key2, int size, const hg_tile_t *t)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->e = realloc(l->e, sizeof(entry_t) * l->cap);
    }
    entry_t *e = &l->e[l->n++];
    e->peer = peer;
    e->key1 = key1;
    e->key2 = key2;
    e->size = size;
    e->t = *t;
}

static int cmp_entry(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    if (x->peer != y->peer)
        return x->peer < y->peer ? -1 : 1;
    if (x->key1 != y->key1)
        return x->key1 < y->key1 ? -1 : 1;
    if (x->key2 != y->key2)
        return x->key2 < y->key2 ? -1 : 1;
    return 0;
}

static hg_tile_t *tiles_to_mem(const hg_tile_t *t, int n, hg_mem_t mem)
{
    hg_tile_t *p = hg_alloc(sizeof(hg_tile_t) * (size_t)(n ? n : 1), mem);
    if (n)
        memcpy(p, t, sizeof(hg_tile_t) * n);
    return p;
}

/* group sorted entries by peer; assign buffer offsets; *tiles gets the tiles */
static int group(hg_level_t *owner, elist_t *l, int is_send, int **rank, int **count, int **off,
                 size_t *total, hg_tile_t **tiles)
{
    if (l->n > 1)
        qsort(l->e, (size_t)l->n, sizeof(entry_t), cmp_entry); /* l->e may be NULL */
    *rank = malloc(sizeof(int) * (l->n ? l->n : 1));
    *count = malloc(sizeof(int) * (l->n ? l->n : 1));
    *off = malloc(sizeof(int) * (l->n ? l->n : 1));
    hg_tile_t *t = malloc(sizeof(hg_tile_t) * (l->n ? l->n : 1));
    int np = 0;
    size_t o = 0;
    for (int i = 0; i < l->n; i++) {
        entry_t *e = &l->e[i];
        if (i == 0 || e->peer != l->e[i - 1].peer) {
            (*rank)[np] = owner->comm_rank[e->peer];
            (*off)[np] = (int)o;
            (*count)[np] = 0;
            np++;
        }
        t[i] = e->t;
        if (is_send)
            t[i].doff = (int)o;
        else
            t[i].soff = (int)o;
        (*count)[np - 1] += e->size;
        o += e->size;
    }
    *total = o;
    *tiles = t;
    return np;
}

static int max_blk(const hg_tile_t *t, int n)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        if (t[i].bi * t[i].bj * t[i].bk > m)
            m = t[i].bi * t[i].bj * t[i].bk;
    return m;
}

static void finalize(hg_prog_t *P, hg_level_t *owner, hg_level_t *src, hg_level_t *dst, int tag,
                     elist_t *send, elist_t *recv, const hg_tile_t *local, int nlocal)
{
    memset(P, 0, sizeof(*P));
    P->built = 1;
    P->tag = tag;
    P->owner = owner;
    P->src = src;
    P->dst = dst;
    hg_tile_t *ts, *tr;
    P->n_send =
        group(owner, send, 1, &P->send_rank, &P->send_count, &P->send_off, &P->send_total, &ts);
    P->n_recv =
        group(owner, recv, 0, &P->recv_rank, &P->recv_count, &P->recv_off, &P->recv_total, &tr);
    P->n_pack = send->n;
    P->n_unpack = recv->n;
    P->n_local = nlocal;
    P->pack = tiles_to_mem(ts, send->n, HG_MEM_HOST);
    P->unpack = tiles_to_mem(tr, recv->n, HG_MEM_HOST);
    P->local = tiles_to_mem(local, nlocal, HG_MEM_HOST);
    P->max_pack = max_blk(ts, send->n);
    P->max_unpack = max_blk(tr, recv->n);
    P->max_local = max_blk(local, nlocal);
    free(ts);
    free(tr);
    P->send_host = hg_alloc(sizeof(double) * (P->send_total ? P->send_total : 1), HG_MEM_HOST);
    P->recv_host = hg_alloc(sizeof(double) * (P->recv_total ? P->recv_total : 1), HG_MEM_HOST);
    P->req = malloc(sizeof(MPI_Request) * (size_t)(P->n_send + P->n_recv + 1));
    P->stat = malloc(sizeof(MPI_Status) * (size_t)(P->n_send + P->n_recv + 1));
    for (int i = 0; i < P->n_send + P->n_recv; i++)
        P->req[i] = MPI_REQUEST_NULL;
    free(send->e);
    free(recv->e);
}

/* cells [lo, lo+len) of the ghost region of direction d on the receiving box,
 * and of the matching interior region on the sending box */
static void recv_range(int d, int n, int g, int *lo, int *len)
{
    if (d < 0) {
        *lo = -g;
        *len = g;
    } else if (d > 0) {
        *lo = n;
        *len = g;
    } else {
        *lo = 0;
        *len = n;
    }
}
static void send_range(int d, int n, int g, int *lo, int *len)
{
    if (d < 0) {
        *lo = n - g;
        *len = g;
    } else if (d > 0) {
        *lo = 0;
        *len = g;
    } else {
        *lo = 0;
        *len = n;
    }
}

void hg_build_exchange(hg_mg_t *mg, hg_level_t *L, int shape)
{
    hg_prog_t *P = &L->exchange[shape];
    if (L->comm == MPI_COMM_NULL)
        return;
    elist_t send = {0}, recv = {0};
    hg_tile_t *local = malloc(sizeof(hg_tile_t) * 26 * (size_t)(L->nb ? L->nb : 1));
    int nlocal = 0;
    const int n = L->box_dim, g = L->ghosts, B = L->boxes_in;
    for (int b = 0; b < L->nb; b++) {
        const int bi = L->low[3 * b] / n, bj = L->low[3 * b + 1] / n, bk = L->low[3 * b + 2] / n;
        for (int d = 0; d < 27; d++) {
            const int di = hg_dir_di(d), dj = hg_dir_dj(d), dk = hg_dir_dk(d);
            if (!hg_shape_has(shape, di, dj, dk))
                continue;
            hg_tile_t t;
            memset(&t, 0, sizeof(t));
            /* receive: ghost region d of my box b comes from the box at b+d */
            int ni = bi + di, nj = bj + dj, nk = bk + dk;
            if (ni >= 0 && nj >= 0 && nk >= 0 && ni < B && nj < B && nk < B) {
                int nid = ni + B * (nj + B * nk);
                int lo_i, lo_j, lo_k;
                recv_range(di, n, g, &t.ti, &t.bi);
                recv_range(dj, n, g, &t.tj, &t.bj);
                recv_range(dk, n, g, &t.tk, &t.bk);
                send_range(di, n, g, &lo_i, &t.bi);
                send_range(dj, n, g, &lo_j, &t.bj);
                send_range(dk, n, g, &lo_k, &t.bk);
                t.dbox = b;
                if (L->rank_of_box[nid] == mg->my_rank) {
                    t.sbox = L->local_of_box[nid];
                    t.si = lo_i;
                    t.sj = lo_j;
                    t.sk = lo_k;
                    local[nlocal++] = t;
                } else {
                    t.sbox = -1;
                    push(&recv, L->rank_of_box[nid], L->my_id[b], d, t.bi * t.bj * t.bk, &t);
                }
            }
            /* send: my box b is the neighbour in direction d of the box at b-d */
            int ri = bi - di, rj = bj - dj, rk = bk - dk;
            if (ri >= 0 && rj >= 0 && rk >= 0 && ri < B && rj < B && rk < B) {
                int rid = ri + B * (rj + B * rk);
                if (L->rank_of_box[rid] != mg->my_rank) {
                    memset(&t, 0, sizeof(t));
                    send_range(di, n, g, &t.si, &t.bi);
                    send_range(dj, n, g, &t.sj, &t.bj);
                    send_range(dk, n, g, &t.sk, &t.bk);
                    t.sbox = b;
                    t.dbox = -1;
                    push(&send, L->rank_of_box[rid], rid, d, t.bi * t.bj * t.bk, &t);
                }
            }
        }
    }
    finalize(P, L, L, L, TAG_EXCHANGE + shape, &send, &recv, local, nlocal);
    free(local);
}

/* the fine box fid lies in coarse box *cid at coarse cell offset (oi,oj,ok) */
static void fine_to_coarse(const hg_level_t *F, const hg_level_t *C, int fid, int *cid, int *oi,
                           int *oj, int *ok)
{
    const int B = F->boxes_in, r = F->boxes_in / C->boxes_in, c = F->box_dim / 2;
    const int fi = fid % B, fj = (fid / B) % B, fk = fid / (B * B);
    *cid = fi / r + C->boxes_in * (fj / r + C->boxes_in * (fk / r));
    *oi = (fi % r) * c;
    *oj = (fj % r) * c;
    *ok = (fk % r) * c;
}

void hg_build_restriction(hg_mg_t *mg, hg_level_t *F, hg_level_t *C, int kind)
{
    hg_prog_t *P = &F->restriction[kind - HG_T_RESTRICT_CELL];
    if (F->comm == MPI_COMM_NULL)
        return;
    const int c = F->box_dim / 2;
    const int bi = c + (kind == HG_T_RESTRICT_FACE_I), bj = c + (kind == HG_T_RESTRICT_FACE_J),
              bk = c + (kind == HG_T_RESTRICT_FACE_K);
    elist_t send = {0}, recv = {0};
    hg_tile_t *local = malloc(sizeof(hg_tile_t) * (size_t)(F->nb ? F->nb : 1));
    int nlocal = 0;
    /* fine boxes I own: restrict locally or pack for the coarse owner */
    for (int b = 0; b < F->nb; b++) {
        int cid, oi, oj, ok;
        fine_to_coarse(F, C, F->my_id[b], &cid, &oi, &oj, &ok);
        hg_tile_t t;
        memset(&t, 0, sizeof(t));
        t.bi = bi;
        t.bj = bj;
        t.bk = bk;
        t.sbox = b;
        if (C->rank_of_box[cid] == mg->my_rank) {
            t.dbox = C->local_of_box[cid];
            t.ti = oi;
            t.tj = oj;
            t.tk = ok;
            local[nlocal++] = t;
        } else {
            t.dbox = -1;
            push(&send, C->rank_of_box[cid], F->my_id[b], 0, bi * bj * bk, &t);
        }
    }
    /* coarse boxes I own: receive the pieces restricted by other ranks */
    for (int fid = 0; fid < F->num_boxes; fid++) {
        if (F->rank_of_box[fid] == mg->my_rank)
            continue;
        int cid, oi, oj, ok;
        fine_to_coarse(F, C, fid, &cid, &oi, &oj, &ok);
        if (C->rank_of_box[cid] != mg->my_rank)
            continue;
        hg_tile_t t;
        memset(&t, 0, sizeof(t));
        t.bi = bi;
        t.bj = bj;
        t.bk = bk;
        t.sbox = -1;
        t.dbox = C->local_of_box[cid];
        t.ti = oi;
        t.tj = oj;
        t.tk = ok;
        push(&recv, F->rank_of_box[fid], fid, 0, bi * bj * bk, &t);
    }
    finalize(P, F, F, C, TAG_RESTRICT + (kind - HG_T_RESTRICT_CELL), &send, &recv, local, nlocal);
    free(local);
}

void hg_build_interpolation(hg_mg_t *mg, hg_level_t *F, hg_level_t *C)
{
    hg_prog_t *P = &F->interpolation;
    if (F->comm == MPI_COMM_NULL)
        return;
    const int c = F->box_dim / 2;
    elist_t send = {0}, recv = {0};
    hg_tile_t *local = malloc(sizeof(hg_tile_t) * (size_t)(F->nb ? F->nb : 1));
    int nlocal = 0;
    for (int fid = 0; fid < F->num_boxes; fid++) {
        int cid, oi, oj, ok;
        fine_to_coarse(F, C, fid, &cid, &oi, &oj, &ok);
        const int fown = F->rank_of_box[fid], cown = C->rank_of_box[cid];
        hg_tile_t t;
        memset(&t, 0, sizeof(t));
        if (cown == mg->my_rank) { /* I interpolate: into my fine box, or into a buffer */
            t.bi = c;
            t.bj = c;
            t.bk = c;
            t.sbox = C->local_of_box[cid];
            t.si = oi;
            t.sj = oj;
            t.sk = ok;
            if (fown == mg->my_rank) {
                t.dbox = F->local_of_box[fid];
                local[nlocal++] = t;
            } else {
                t.dbox = -1;
                push(&send, fown, fid, 0, 8 * c * c * c, &t);
            }
        } else if (fown == mg->my_rank) { /* I receive the interpolated fine box */
            t.bi = 2 * c;
            t.bj = 2 * c;
            t.bk = 2 * c;
            t.sbox = -1;
            t.dbox = F->local_of_box[fid];
            push(&recv, cown, fid, 0, 8 * c * c * c, &t);
        }
    }
    finalize(P, F, C, F, TAG_INTERP, &send, &recv, local, nlocal);
    free(local);
}

static hg_tile_t *tiles_to_dev(const hg_tile_t *t, int n)
{
    hg_tile_t *d = hg_alloc(sizeof(hg_tile_t) * (size_t)(n ? n : 1), HG_MEM_DEVICE);
    if (n)
        hg_copy(d, t, sizeof(hg_tile_t) * n);
    return d;
}

static void tiles_args(hg_args_tiles_t *ap, int kind, const hg_tile_t *t, int nt, int max_blk,
                       const hg_level_t *S, int vs, const double *sbuf, hg_level_t *D, int vd,
                       double *dbuf, double prescale)
{
    hg_args_tiles_t a;
    a.max_blk = max_blk;
    a.kind = kind;
    a.t = t;
    a.nt = nt;
    a.src = S->vec[vs];
    a.sbuf = sbuf;
    a.s_js = S->js;
    a.s_ks = S->ks;
    a.s_vol = S->vol;
    a.s_g = S->ghosts;
    a.dst = D->vec[vd];
    a.dbuf = dbuf;
    a.d_js = D->js;
    a.d_ks = D->ks;
    a.d_vol = D->vol;
    a.d_g = D->ghosts;
    a.prescale = prescale;
    *ap = a;
}

static void launch_tiles(hg_exec_t *E, int kind, const hg_tile_t *t, int nt, int max_blk,
                         const hg_level_t *S, int vs, const double *sbuf, hg_level_t *D, int vd,
                         double *dbuf, double prescale)
{
    hg_args_tiles_t a;
    tiles_args(&a, kind, t, nt, max_blk, S, vs, sbuf, D, vd, dbuf, prescale);
    hg_exec_launch(E, HG_K_TILES, &a, sizeof(a));
}

static void check(int rc, const char *what);

#ifdef HG_KI
/* The ki backend's state of a program (cuda_iface.h says how it runs): per
 * peer, a partitioned request pair per tile size (a group) whose partition
 * slot x tiles + j carries tile j of run `slot` of an epoch of K runs; the
 * host starts an epoch and waits for it on the stream once per K runs (its
 * only calls for the program's messages). A program's runs in a CUDA graph
 * take their slots from a device word (comm.h): its epochs span launches. */
struct hg_ki {
    int K;                /* runs per epoch                                         */
    int slot;             /* the next run's slot                                    */
    int open;             /* an epoch is started (its completion not yet enqueued)  */
    int64_t slot_dev_val; /* what the slot word holds in stream order              */
    uint64_t runs;        /* runs so far                                            */
    uint64_t tickets;     /* the kernels' blocks so far                             */
    uint64_t done;        /* their blocks that count in *done so far                */
    uint64_t packs;       /* chunks per pack tile so far                            */
    int n_sg, n_rg;       /* send and receive groups              */
    double **bufs;        /* the groups' buffers (device)         */
    MPI_Request *req;     /* n_sg sends, then n_rg receives       */
    hg_ki_group_t *send_dev, *recv_dev;
    unsigned long long *words_dev; /* packed[n_pack], claim[n_unpack], ready[n_unpack],
                                      ticket, done, then the slot word (graphs) */
    int *err_dev;
    hg_tile_t *pack_dev, *unpack_dev; /* tiles with their group and index in it */
};

/* a graph's ki programs, their runs in it and their counters at the end of
 * its capture */
struct hg_ki_gprog {
    hg_prog_t *P;
    int r; /* runs in the graph: slots *slot word + 0 .. r-1 */
    uint64_t runs, tickets, done, packs;
};
struct hg_ki_graph {
    struct hg_ki_gprog *p;
    int n, cap;
};

/* a tile's offset in its side's messages */
static int tile_off(const hg_tile_t *t, int is_send) { return is_send ? t->doff : t->soff; }

static int cmp_int(const void *x, const void *y)
{
    const int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

/* Group the tiles of one side's messages (each message is one peer's, its
 * tiles in the canonical order both sides share) by (peer, size), the
 * groups in (peer, size) order so that both sides init their requests in
 * the same order; each tile gets its group (tile.peer) and its index in it
 * (doff of a pack tile, soff of an unpack tile). A tile's size is its
 * extent in the message. Creates the groups' requests from req[first]. */
static int ki_groups(const hg_prog_t *P, struct hg_ki *k, int is_send, hg_tile_t **tiles_dev,
                     hg_ki_group_t **groups_dev, int first)
{
    const int np = is_send ? P->n_send : P->n_recv;
    const int *off = is_send ? P->send_off : P->recv_off;
    const int *count = is_send ? P->send_count : P->recv_count;
    const int *rank = is_send ? P->send_rank : P->recv_rank;
    const hg_tile_t *t = is_send ? P->pack : P->unpack;
    const int nt = is_send ? P->n_pack : P->n_unpack;
    const size_t cap = (size_t)(nt ? nt : 1);
    hg_tile_t *c = malloc(sizeof(hg_tile_t) * cap);
    hg_ki_group_t *g = calloc(cap, sizeof(*g));
    int *peer_of = calloc(cap, sizeof(int)), *size = calloc(cap, sizeof(int));
    int *gpeer = calloc(cap, sizeof(int));
    for (int i = 0; i < nt; i++) {
        const int o = tile_off(&t[i], is_send);
        int n = 0;
        while (n + 1 < np && o >= off[n + 1])
            n++;
        if (o < off[n] || o >= off[n] + count[n]) {
            fprintf(stderr, "hpgmg-fv: ki: tile %d at %d outside the messages\n", i, o);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        peer_of[i] = n;
    }
    /* extent: up to the next tile of the message (by offset), or its end */
    int(*ord)[2] = malloc(sizeof(*ord) * cap);
    for (int i = 0; i < nt; i++) {
        ord[i][0] = tile_off(&t[i], is_send);
        ord[i][1] = i;
    }
    qsort(ord, (size_t)nt, sizeof(*ord), cmp_int); /* by offset */
    for (int x = 0; x < nt; x++) {
        const int i = ord[x][1], n = peer_of[i];
        const int end =
            x + 1 < nt && peer_of[ord[x + 1][1]] == n ? ord[x + 1][0] : off[n] + count[n];
        size[i] = end - ord[x][0];
    }
    free(ord);
    int ng = 0;
    for (int n = 0; n < np; n++) {
        int *sz = malloc(sizeof(int) * cap), m = 0;
        for (int i = 0; i < nt; i++)
            if (peer_of[i] == n)
                sz[m++] = size[i];
        qsort(sz, (size_t)m, sizeof(int), cmp_int);
        for (int i = 0; i < m; i++)
            if (i == 0 || sz[i] != sz[i - 1]) {
                g[ng] = (hg_ki_group_t){.size = sz[i]};
                gpeer[ng++] = n;
            }
        free(sz);
    }
    for (int i = 0; i < nt; i++) {
        int q = 0;
        while (gpeer[q] != peer_of[i] || g[q].size != size[i])
            q++;
        c[i] = t[i];
        c[i].peer = q;
        if (is_send)
            c[i].doff = g[q].tiles++;
        else
            c[i].soff = g[q].tiles++;
    }
    for (int q = 0; q < ng; q++) {
        const int n = gpeer[q];
        const size_t parts = (size_t)k->K * (size_t)g[q].tiles;
        g[q].base = hg_alloc(sizeof(double) * parts * (size_t)g[q].size, HG_MEM_DEVICE);
        k->bufs[first + q] = g[q].base;
        MPI_Request *r = &k->req[first + q];
        if (is_send)
            check(MPIX_Acc_Psend_init(g[q].base, (int)parts, g[q].size, MPI_DOUBLE, rank[n], P->tag,
                                      P->owner->comm, MPI_INFO_NULL, r),
                  "MPIX_Acc_Psend_init");
        else
            check(MPIX_Acc_Precv_init(g[q].base, (int)parts, g[q].size, MPI_DOUBLE, rank[n], P->tag,
                                      P->owner->comm, MPI_INFO_NULL, r),
                  "MPIX_Acc_Precv_init");
        mpix_acc_dreq_t *d = NULL;
        check(MPIX_Acc_Prequest_get_device(*r, &d), "MPIX_Acc_Prequest_get_device");
        g[q].dreq = d;
    }
    *tiles_dev = tiles_to_dev(c, nt);
    *groups_dev = hg_alloc(sizeof(*g) * cap, HG_MEM_DEVICE);
    hg_copy(*groups_dev, g, sizeof(*g) * cap);
    free(c);
    free(g);
    free(peer_of);
    free(size);
    free(gpeer);
    return ng;
}

static void ki_prepare(hg_mg_t *mg, hg_prog_t *P)
{
    static int loaded;
    if (!loaded) {
        hg_cuda_ki_load();
        loaded = 1;
    }
    struct hg_ki *k = calloc(1, sizeof(*k));
    k->K = mg->ki_runs;
    const int most = P->n_pack + P->n_unpack + 1; /* groups <= tiles */
    k->req = malloc(sizeof(MPI_Request) * (size_t)most);
    k->bufs = calloc((size_t)most, sizeof(double *));
    for (int i = 0; i < most; i++)
        k->req[i] = MPI_REQUEST_NULL;
    k->n_sg = ki_groups(P, k, 1, &k->pack_dev, &k->send_dev, 0);
    k->n_rg = ki_groups(P, k, 0, &k->unpack_dev, &k->recv_dev, k->n_sg);
    k->words_dev = hg_alloc(sizeof(unsigned long long) * (size_t)(P->n_pack + 2 * P->n_unpack + 3),
                            HG_MEM_DEVICE);
    k->slot_dev_val = 0; /* (zero-filled) */
    k->err_dev = hg_alloc(sizeof(int), HG_MEM_DEVICE);
    P->ki = k;
}

static unsigned long long *ki_slot_word(const hg_prog_t *P)
{
    return P->ki->words_dev + P->n_pack + 2 * P->n_unpack + 2;
}

/* start an epoch on the stream */
static void ki_start(hg_prog_t *P, hg_exec_t *E)
{
    struct hg_ki *k = P->ki;
    for (int i = 0; i < k->n_sg + k->n_rg; i++)
        check(MPIX_Acc_Start(E->stream, &k->req[i]), "MPIX_Acc_Start");
    k->open = 1;
}

/* the epoch's completion on the stream (a partial one: the sender first
 * marks the partitions of the runs it did not make) */
static void ki_complete(hg_prog_t *P, hg_exec_t *E)
{
    struct hg_ki *k = P->ki;
    if (k->slot < k->K && P->n_send)
        hg_cuda_ki_fill(E->stream, k->send_dev, k->n_sg, k->slot, k->K, k->err_dev);
        /* (statuses ignored; gcc 12 misreads MPI_STATUSES_IGNORE as a 0-byte array) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
    check(MPIX_Acc_Waitall(E->stream, k->n_sg + k->n_rg, k->req, MPI_STATUSES_IGNORE),
          "MPIX_Acc_Waitall (ki epoch)");
#pragma GCC diagnostic pop
    k->slot = 0;
    k->open = 0;
}

/* a capture's first run of P: P joins the graph's set, its device counters
 * are reset by the graph and the host counts from 0 (comm.h) */
static struct hg_ki_gprog *ki_record(hg_ki_graph_t *kg, hg_prog_t *P)
{
    for (int i = 0; i < kg->n; i++)
        if (kg->p[i].P == P)
            return &kg->p[i];
    if (kg->n == kg->cap) {
        kg->cap = kg->cap ? 2 * kg->cap : 8;
        kg->p = realloc(kg->p, sizeof(*kg->p) * (size_t)kg->cap);
        if (!kg->p) {
            fprintf(stderr, "hpgmg-fv: out of memory (ki graph)\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    kg->p[kg->n] = (struct hg_ki_gprog){.P = P};
    struct hg_ki *k = P->ki;
    if (!k->open) {
        fprintf(stderr,
                "hpgmg-fv: ki: level %d, program tag %d: no epoch open at a graph "
                "capture\n",
                P->owner->id, P->tag);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    hg_cuda_ki_reset(P->owner->exec->stream, k->words_dev,
                     (size_t)(P->n_pack + 2 * P->n_unpack + 2));
    k->runs = k->tickets = k->done = k->packs = 0;
    return &kg->p[kg->n++];
}

static void ki_run(const hg_mg_t *mg, hg_prog_t *P, int vsrc, int vdst, int k_pack, int k_local,
                   int k_unpack, double prescale, const hg_args_bc_t *bc,
                   const hg_args_stencil_t *st, hg_commtimer_t *T)
{
    struct hg_ki *k = P->ki;
    hg_exec_t *E = P->owner->exec;
    struct hg_ki_gprog *g = mg->ki_rec ? ki_record(mg->ki_rec, P) : NULL;
    double t = MPI_Wtime();
    if (!g && !k->open)
        ki_start(P, E);
    T->wait += MPI_Wtime() - t;
    hg_args_ki_t a;
    memset(&a, 0, sizeof(a));
    tiles_args(&a.pack, k_pack, k->pack_dev, P->n_pack, P->max_pack, P->src, vsrc, NULL, P->dst,
               vdst, NULL, 0.0);
    tiles_args(&a.local, k_local, P->local_dev, P->n_local, P->max_local, P->src, vsrc, NULL,
               P->dst, vdst, NULL, prescale);
    tiles_args(&a.unpack, k_unpack, k->unpack_dev, P->n_unpack, P->max_unpack, P->src, vsrc, NULL,
               P->dst, vdst, NULL, prescale);
    a.send = k->send_dev;
    a.recv = k->recv_dev;
    a.packed = k->words_dev;
    a.claim = k->words_dev + P->n_pack;
    a.ready = k->words_dev + P->n_pack + P->n_unpack;
    a.ticket = a.ready + P->n_unpack;
    a.done = a.ticket + 1;
    a.ticket_base = k->tickets;
    if (bc)
        a.bc = *bc;
    if (st)
        a.st = *st;
    a.err = k->err_dev;
    if (g) { /* captured: the slot from the word, whatever the launch */
        if (g->r == k->K) {
            fprintf(stderr,
                    "hpgmg-fv: ki: level %d, program tag %d: more runs in a graph than --ki-runs "
                    "(%d)\n",
                    P->owner->id, P->tag, k->K);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        a.slot = g->r++;
        a.slot_dev = ki_slot_word(P);
    } else {
        a.slot = k->slot;
    }
    a.pdl = mg->pdl;
    a.run = ++k->runs;
    hg_ki_shape_t sh;
    hg_cuda_ki_shape(&a, &sh);
    k->tickets += (uint64_t)sh.blocks;
    a.bc_target = k->done + (uint64_t)sh.pre_bc;
    a.st_target = k->done += (uint64_t)sh.pre_st;
    a.pack_target = k->packs += sh.cp;
    t = MPI_Wtime();
    hg_cuda_ki_run(E->stream, &a, &sh);
    T->pack += MPI_Wtime() - t;
    if (!g && ++k->slot == k->K) {
        t = MPI_Wtime();
        ki_complete(P, E);
        T->wait += MPI_Wtime() - t;
    }
}

static int ki_finish_prog(hg_prog_t *P)
{
    struct hg_ki *k = P->ki;
    if (!k)
        return 0;
    hg_exec_t *E = P->owner->exec;
    hg_exec_use(E);
    if (k->open)
        ki_complete(P, E);
    hg_exec_sync(E);
    int err = 0;
    hg_copy(&err, k->err_dev, sizeof(err));
    if (err)
        fprintf(stderr, "hpgmg-fv: ki: level %d, program tag %d: %d device calls failed\n",
                P->owner->id, P->tag, err);
    return err;
}
#endif /* HG_KI */

int hg_prog_run_bc(hg_mg_t *mg, hg_prog_t *P, int v, const hg_args_bc_t *bc,
                   const hg_args_stencil_t *st, hg_commtimer_t *T)
{
#ifdef HG_KI
    /* (a program has ki state only on a GPU level of the ki backend) */
    if (!P->built || !P->ki || !mg->setup_done || P->owner->backend != HG_BACKEND_KI ||
        mg->skip_exchange || P->n_unpack == 0)
        return 0;
    const double t0 = MPI_Wtime();
    hg_exec_use(P->owner->exec);
    ki_run(mg, P, v, v, HG_T_COPY, HG_T_COPY, HG_T_COPY, 0.0, bc, st, T);
    T->total += MPI_Wtime() - t0;
    return 1;
#else
    (void)mg, (void)P, (void)v, (void)bc, (void)st, (void)T;
    return 0;
#endif
}

#ifdef HG_KI
/* an epoch of P open on its stream (plain: before a capture) */
static void ki_open(hg_prog_t *P)
{
    if (P->ki && !P->ki->open) {
        hg_exec_use(P->owner->exec);
        ki_start(P, P->owner->exec);
    }
}

static void ki_open_level(hg_level_t *L)
{
    for (int s = 0; s < HG_NUM_SHAPES; s++)
        ki_open(&L->exchange[s]);
    for (int r = 0; r < 4; r++)
        ki_open(&L->restriction[r]);
    ki_open(&L->interpolation);
}
#endif

hg_ki_graph_t *hg_comm_ki_capture_begin(hg_mg_t *mg, hg_level_t *L, hg_level_t *C)
{
#ifdef HG_KI
    if (L->backend != HG_BACKEND_KI)
        return NULL;
    /* A captured run starts and completes nothing: its programs' epochs
     * are open before (every program the leg may run: those of its levels
     * only -- every rank active at L captures this leg here, and with C
     * every one of them is active at C too: mg.c --, while a rank captures
     * legs of levels where the peers of other levels' programs are not
     * active: starting those would shift their epochs) */
    ki_open_level(L);
    if (C)
        ki_open_level(C); /* (the interpolation's exchange on C) */
    hg_ki_graph_t *kg = calloc(1, sizeof(*kg));
    if (!kg) {
        fprintf(stderr, "hpgmg-fv: out of memory (ki graph)\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    mg->ki_rec = kg;
    return kg;
#else
    (void)mg, (void)L, (void)C;
    return NULL;
#endif
}

void hg_comm_ki_capture_end(hg_mg_t *mg, hg_ki_graph_t *kg)
{
#ifdef HG_KI
    mg->ki_rec = NULL;
    for (int i = 0; kg && i < kg->n; i++) {
        hg_prog_t *P = kg->p[i].P;
        const struct hg_ki *k = P->ki;
        /* the graph's last node of P: its slot word past the graph's runs */
        hg_cuda_ki_word(P->owner->exec->stream, ki_slot_word(P), (unsigned long long)kg->p[i].r, 1);
        kg->p[i].runs = k->runs;
        kg->p[i].tickets = k->tickets;
        kg->p[i].done = k->done;
        kg->p[i].packs = k->packs;
    }
#else
    (void)mg, (void)kg;
#endif
}

void hg_comm_ki_launch_begin(hg_ki_graph_t *kg)
{
#ifdef HG_KI
    /* per program: an epoch with room for the graph's runs, and its slot
     * word at the next slot (plain stream operations before the launch;
     * usually none: an epoch spans launches) */
    for (int i = 0; kg && i < kg->n; i++) {
        hg_prog_t *P = kg->p[i].P;
        struct hg_ki *k = P->ki;
        hg_exec_t *E = P->owner->exec;
        hg_exec_use(E);
        if (k->open && k->slot + kg->p[i].r > k->K)
            ki_complete(P, E);
        if (!k->open)
            ki_start(P, E);
        if (k->slot_dev_val != k->slot) {
            hg_cuda_ki_word(E->stream, ki_slot_word(P), (unsigned long long)k->slot, 0);
            k->slot_dev_val = k->slot;
        }
    }
#else
    (void)kg;
#endif
}

void hg_comm_ki_launch_end(hg_ki_graph_t *kg)
{
#ifdef HG_KI
    for (int i = 0; kg && i < kg->n; i++) {
        hg_prog_t *P = kg->p[i].P;
        struct hg_ki *k = P->ki;
        k->runs = kg->p[i].runs;
        k->tickets = kg->p[i].tickets;
        k->done = kg->p[i].done;
        k->packs = kg->p[i].packs;
        k->slot += kg->p[i].r; /* (the graph advanced the word alike) */
        k->slot_dev_val = k->slot;
        if (k->slot == k->K) {
            hg_exec_use(P->owner->exec);
            ki_complete(P, P->owner->exec);
        }
    }
#else
    (void)kg;
#endif
}

void hg_comm_ki_graph_free(hg_ki_graph_t *kg)
{
#ifdef HG_KI
    if (kg)
        free(kg->p);
    free(kg);
#else
    (void)kg;
#endif
}

void hg_comm_ki_finish(hg_mg_t *mg)
{
#ifdef HG_KI
    int err = 0;
    for (int l = 0; l < mg->nlevels; l++) {
        hg_level_t *L = mg->levels[l];
        for (int s = 0; s < HG_NUM_SHAPES; s++)
            err += ki_finish_prog(&L->exchange[s]);
        for (int r = 0; r < 4; r++)
            err += ki_finish_prog(&L->restriction[r]);
        err += ki_finish_prog(&L->interpolation);
    }
    if (err)
        MPI_Abort(MPI_COMM_WORLD, 1);
#else
    (void)mg;
#endif
}

void hg_prog_free_ki(hg_prog_t *P)
{
#ifdef HG_KI
    struct hg_ki *k = P->ki;
    if (!k)
        return;
    for (int i = 0; i < k->n_sg + k->n_rg; i++) {
        if (k->req[i] != MPI_REQUEST_NULL)
            check(MPI_Request_free(&k->req[i]), "MPI_Request_free (ki)");
        hg_free(k->bufs[i], HG_MEM_DEVICE);
    }
    free(k->req);
    free(k->bufs);
    hg_free(k->send_dev, HG_MEM_DEVICE);
    hg_free(k->recv_dev, HG_MEM_DEVICE);
    hg_free(k->words_dev, HG_MEM_DEVICE);
    hg_free(k->err_dev, HG_MEM_DEVICE);
    hg_free(k->pack_dev, HG_MEM_DEVICE);
    hg_free(k->unpack_dev, HG_MEM_DEVICE);
    free(k);
    P->ki = NULL;
#else
    (void)P;
#endif
}

static void prepare(hg_mg_t *mg, hg_prog_t *P)
{
    if (!P->built || P->send_gpu)
        return;
    P->gpu_mem = mg->backend == HG_BACKEND_MPI ? HG_MEM_PINNED : HG_MEM_DEVICE;
    P->send_gpu = hg_alloc(sizeof(double) * (P->send_total ? P->send_total : 1), P->gpu_mem);
    P->recv_gpu[0] = hg_alloc(sizeof(double) * (P->recv_total ? P->recv_total : 1), P->gpu_mem);
    if (mg->backend == HG_BACKEND_MPI)
        P->recv_gpu[1] = hg_alloc(sizeof(double) * (P->recv_total ? P->recv_total : 1), P->gpu_mem);
    P->pack_dev = tiles_to_dev(P->pack, P->n_pack);
    P->local_dev = tiles_to_dev(P->local, P->n_local);
    P->unpack_dev = tiles_to_dev(P->unpack, P->n_unpack);
#ifdef HG_KI
    if (P->owner->backend == HG_BACKEND_KI && (P->n_send || P->n_recv))
        ki_prepare(mg, P);
#endif
}

void hg_prog_prepare_gpu(hg_mg_t *mg, hg_level_t *L)
{
    for (int s = 0; s < HG_NUM_SHAPES; s++)
        prepare(mg, &L->exchange[s]);
    for (int r = 0; r < 4; r++)
        prepare(mg, &L->restriction[r]);
    prepare(mg, &L->interpolation);
}

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, s, &len);
        fprintf(stderr, "hpgmg-fv: %s failed: %s\n", what, s);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

void hg_prog_run(hg_mg_t *mg, hg_prog_t *P, int vsrc, int vdst, int k_pack, int k_local,
                 int k_unpack, double prescale, hg_commtimer_t *T)
{
    if (!P->built)
        return;
    hg_level_t *O = P->owner;
    hg_exec_t *E = O->exec;
    /* the setup phase always runs with plain MPI on the host */
    const hg_backend_t be = mg->setup_done ? O->backend : HG_BACKEND_MPI;
    const int gpu = E->kind == HG_EXEC_CUDA;
    double *sbuf = gpu ? P->send_gpu : P->send_host;
    double *rbuf = gpu ? P->recv_gpu[P->parity] : P->recv_host;
    if (gpu && P->recv_gpu[1])
        P->parity ^= 1;
    const MPI_Comm comm = O->comm;
    /* --skip-exchange: a bound without the messages (GPU levels, after set-up) */
    const int msgs = !(mg->skip_exchange && mg->setup_done && gpu);
    int nreq = 0;
    double t0 = MPI_Wtime(), t;
    hg_exec_use(E);
#ifdef HG_KI
    if (P->ki && be == HG_BACKEND_KI && msgs) {
        ki_run(mg, P, vsrc, vdst, k_pack, k_local, k_unpack, prescale, NULL, NULL, T);
        T->total += MPI_Wtime() - t0;
        return;
    }
#endif

    if (P->n_recv && msgs) {
        t = MPI_Wtime();
        for (int n = 0; n < P->n_recv; n++) {
#ifndef HPGMG_NO_MPIX
            if (be == HG_BACKEND_ACC)
                check(MPIX_Acc_Irecv(E->stream, rbuf + P->recv_off[n], P->recv_count[n], MPI_DOUBLE,
                                     P->recv_rank[n], P->tag, comm, &P->req[nreq++]),
                      "MPIX_Acc_Irecv");
            else
#endif
                check(MPI_Irecv(rbuf + P->recv_off[n], P->recv_count[n], MPI_DOUBLE,
                                P->recv_rank[n], P->tag, comm, &P->req[nreq++]),
                      "MPI_Irecv");
        }
        T->recv += MPI_Wtime() - t;
    }
    if (P->n_pack) {
        t = MPI_Wtime();
        launch_tiles(E, k_pack, gpu ? P->pack_dev : P->pack, P->n_pack, P->max_pack, P->src, vsrc,
                     NULL, P->dst, vdst, sbuf, 0.0);
        /* mpi backend: the host must see the packed data before MPI_Isend */
        if (be == HG_BACKEND_MPI)
            hg_exec_sync(E);
        T->pack += MPI_Wtime() - t;
    }
    if (P->n_send && msgs) {
        t = MPI_Wtime();
        for (int n = 0; n < P->n_send; n++) {
#ifndef HPGMG_NO_MPIX
            if (be == HG_BACKEND_ACC)
                check(MPIX_Acc_Isend(E->stream, sbuf + P->send_off[n], P->send_count[n], MPI_DOUBLE,
                                     P->send_rank[n], P->tag, comm, &P->req[nreq++]),
                      "MPIX_Acc_Isend");
            else
#endif
                check(MPI_Isend(sbuf + P->send_off[n], P->send_count[n], MPI_DOUBLE,
                                P->send_rank[n], P->tag, comm, &P->req[nreq++]),
                      "MPI_Isend");
        }
        T->send += MPI_Wtime() - t;
    }
    if (P->n_local) {
        t = MPI_Wtime();
        launch_tiles(E, k_local, gpu ? P->local_dev : P->local, P->n_local, P->max_local, P->src,
                     vsrc, NULL, P->dst, vdst, NULL, prescale);
        T->local += MPI_Wtime() - t;
    }
    if (nreq) {
        t = MPI_Wtime();
#ifndef HPGMG_NO_MPIX
        if (be == HG_BACKEND_ACC) {
            /* statuses ignored: several runs of this program may be pending on the
       * stream.  (gcc 12 misreads MPI_STATUSES_IGNORE as a 0-byte array.) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
            check(MPIX_Acc_Waitall(E->stream, nreq, P->req, MPI_STATUSES_IGNORE),
                  "MPIX_Acc_Waitall");
#pragma GCC diagnostic pop
        } else
#endif
            check(MPI_Waitall(nreq, P->req, P->stat), "MPI_Waitall");
        T->wait += MPI_Wtime() - t;
    }
    if (P->n_unpack) {
        t = MPI_Wtime();
        launch_tiles(E, k_unpack, gpu ? P->unpack_dev : P->unpack, P->n_unpack, P->max_unpack,
                     P->src, vsrc, rbuf, P->dst, vdst, NULL, prescale);
        T->unpack += MPI_Wtime() - t;
    }
    T->total += MPI_Wtime() - t0;
}

void hg_comm_attach_streams(hg_mg_t *mg)
{
#ifndef HPGMG_NO_MPIX
    for (int l = 0; l < mg->nlevels; l++) {
        hg_level_t *L = mg->levels[l];
        if (L->comm == MPI_COMM_NULL || L->exec->kind == HG_EXEC_HOST)
            continue;
        char val[64];
        snprintf(val, sizeof(val), "0x%" PRIxPTR, (uintptr_t)L->exec->stream);
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, MPIX_ACC_INFO_STREAM, val);
        check(MPI_Comm_set_info(L->comm, info), "MPI_Comm_set_info(mpix_acc_stream)");
        MPI_Info_free(&info);
        /* the communicator must now report the hint: without it the MPI calls of
     * the mpi code path would run at once while pack/unpack are queued */
        MPI_Info got;
        char back[64] = "";
        int flag = 0;
        check(MPI_Comm_get_info(L->comm, &got), "MPI_Comm_get_info");
        MPI_Info_get(got, MPIX_ACC_INFO_STREAM, (int)sizeof(back) - 1, back, &flag);
        MPI_Info_free(&got);
        if (!flag || strtoull(back, NULL, 16) != (unsigned long long)(uintptr_t)L->exec->stream) {
            fprintf(stderr,
                    "hpgmg-fv: level %d: communicator is not a stream communicator (%s=%s)\n", l,
                    MPIX_ACC_INFO_STREAM, flag ? back : "<unset>");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
#else
    (void)mg;
#endif
}
