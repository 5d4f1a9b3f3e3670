/*
 * typelayout.c - byte layouts of MPI datatypes (typelayout.h): built once
 * per type from its constructor (MPI_Type_get_envelope / _get_contents,
 * recursively), cached on the type as an attribute of a keyval of the
 * library's own, reference-counted.
 */
#include "interpose/typelayout.h"

#include <stdlib.h>
#include <string.h>

#include "interpose/interpose.h"

static int mxi_layout_keyval = MPI_KEYVAL_INVALID;

/* ------------------------------------------------------------ chunks */

typedef struct {
    mxa_chunk_t *c;
    size_t n, cap;
    int err; /* MPI error code once something failed */
} mxi_chunks_t;

static void mxi_chunks_add(mxi_chunks_t *v, int64_t off, uint64_t len)
{
    if (len == 0 || v->err != MPI_SUCCESS)
        return;
    if (v->n > 0 && v->c[v->n - 1].off + (int64_t)v->c[v->n - 1].len == off) {
        v->c[v->n - 1].len += len; /* adjacent in memory and in type-map order */
        return;
    }
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 16;
        mxa_chunk_t *c = realloc(v->c, cap * sizeof(*c));
        if (!c) {
            v->err = MPI_ERR_NO_MEM;
            return;
        }
        v->c = c;
        v->cap = cap;
    }
    /* packed right after the previous chunk (MPI_Pack's order) */
    uint64_t pos = v->n ? v->c[v->n - 1].pos + v->c[v->n - 1].len : 0;
    v->c[v->n++] = (mxa_chunk_t){.off = off, .len = len, .pos = pos};
}

static int mxi_type_is_named(MPI_Datatype t)
{
    int ni, na, nd, comb;
    return PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) == MPI_SUCCESS &&
           comb == MPI_COMBINER_NAMED;
}

static int64_t mxi_type_extent(MPI_Datatype t)
{
    MPI_Aint lb, ext;
    if (PMPI_Type_get_extent(t, &lb, &ext) != MPI_SUCCESS)
        return 0;
    return (int64_t)ext;
}

/* Subarray: every element of the sub-block in type-map order (the last
 * dimension fastest in C order, the first in Fortran order). */
static int mxi_flatten(MPI_Datatype t, int64_t base, mxi_chunks_t *v, int depth);
static int mxi_flatten_subarray(const int *ints, MPI_Datatype old, int64_t base, mxi_chunks_t *v,
                                int depth)
{
    int nd = ints[0];
    const int *sizes = ints + 1, *subsizes = ints + 1 + nd, *starts = ints + 1 + 2 * nd;
    int order = ints[1 + 3 * nd];
    if (nd <= 0 || nd > 32)
        return MPI_ERR_TYPE;
    int64_t stride[32], ext = mxi_type_extent(old);
    int idx[32];
    uint64_t total = 1;
    for (int k = 0; k < nd; k++) {
        if (subsizes[k] <= 0)
            return MPI_SUCCESS; /* an empty sub-block */
        total *= (uint64_t)subsizes[k];
        idx[k] = 0;
    }
    if (order == MPI_ORDER_C) {
        stride[nd - 1] = 1;
        for (int k = nd - 2; k >= 0; k--)
            stride[k] = stride[k + 1] * sizes[k + 1];
    } else {
        stride[0] = 1;
        for (int k = 1; k < nd; k++)
            stride[k] = stride[k - 1] * sizes[k - 1];
    }
    for (uint64_t e = 0; e < total; e++) {
        int64_t lin = 0;
        for (int k = 0; k < nd; k++)
            lin += (int64_t)(starts[k] + idx[k]) * stride[k];
        int rc = mxi_flatten(old, base + lin * ext, v, depth + 1);
        if (rc != MPI_SUCCESS)
            return rc;
        /* next index tuple: the fastest dimension first */
        for (int j = 0; j < nd; j++) {
            int k = order == MPI_ORDER_C ? nd - 1 - j : j;
            if (++idx[k] < subsizes[k])
                break;
            idx[k] = 0;
        }
    }
    return MPI_SUCCESS;
}

/* Append the chunks of one element of t at offset base. */
static int mxi_flatten(MPI_Datatype t, int64_t base, mxi_chunks_t *v, int depth)
{
    int ni, na, nd, comb;
    if (depth > 64)
        return MPI_ERR_TYPE;
    if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS)
        return MPI_ERR_TYPE;
    if (comb == MPI_COMBINER_NAMED) {
        int size;
        if (PMPI_Type_size(t, &size) != MPI_SUCCESS)
            return MPI_ERR_TYPE;
        mxi_chunks_add(v, base, (uint64_t)size);
        return v->err;
    }
    int *ints = malloc(sizeof(int) * (size_t)(ni + 1));
    MPI_Aint *aints = malloc(sizeof(MPI_Aint) * (size_t)(na + 1));
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)(nd + 1));
    int rc = ints && aints && types ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    if (rc == MPI_SUCCESS &&
        PMPI_Type_get_contents(t, ni, na, nd, ints, aints, types) != MPI_SUCCESS)
        rc = MPI_ERR_TYPE;
    int got_types = rc == MPI_SUCCESS;
    int64_t ext0 = rc == MPI_SUCCESS && nd > 0 ? mxi_type_extent(types[0]) : 0;
    if (rc == MPI_SUCCESS) {
        switch (comb) {
        case MPI_COMBINER_DUP:
        case MPI_COMBINER_RESIZED: /* lb and extent set the stride, applied by the caller */
            rc = mxi_flatten(types[0], base, v, depth + 1);
            break;
        case MPI_COMBINER_CONTIGUOUS:
            for (int i = 0; i < ints[0] && rc == MPI_SUCCESS; i++)
                rc = mxi_flatten(types[0], base + (int64_t)i * ext0, v, depth + 1);
            break;
        case MPI_COMBINER_VECTOR:
        case MPI_COMBINER_HVECTOR: {
            int64_t stride =
                comb == MPI_COMBINER_VECTOR ? (int64_t)ints[2] * ext0 : (int64_t)aints[0];
            for (int i = 0; i < ints[0] && rc == MPI_SUCCESS; i++)
                for (int j = 0; j < ints[1] && rc == MPI_SUCCESS; j++)
                    rc = mxi_flatten(types[0], base + i * stride + (int64_t)j * ext0, v, depth + 1);
            break;
        }
        case MPI_COMBINER_INDEXED:
        case MPI_COMBINER_HINDEXED: {
            int n = ints[0];
            for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
                int64_t d = comb == MPI_COMBINER_INDEXED ? (int64_t)ints[1 + n + i] * ext0
                                                         : (int64_t)aints[i];
                for (int j = 0; j < ints[1 + i] && rc == MPI_SUCCESS; j++)
                    rc = mxi_flatten(types[0], base + d + (int64_t)j * ext0, v, depth + 1);
            }
            break;
        }
        case MPI_COMBINER_INDEXED_BLOCK:
        case MPI_COMBINER_HINDEXED_BLOCK: {
            int n = ints[0], bl = ints[1];
            for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
                int64_t d = comb == MPI_COMBINER_INDEXED_BLOCK ? (int64_t)ints[2 + i] * ext0
                                                               : (int64_t)aints[i];
                for (int j = 0; j < bl && rc == MPI_SUCCESS; j++)
                    rc = mxi_flatten(types[0], base + d + (int64_t)j * ext0, v, depth + 1);
            }
            break;
        }
        case MPI_COMBINER_STRUCT: {
            int n = ints[0];
            for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
                int64_t ext = mxi_type_extent(types[i]);
                for (int j = 0; j < ints[1 + i] && rc == MPI_SUCCESS; j++)
                    rc = mxi_flatten(types[i], base + (int64_t)aints[i] + (int64_t)j * ext, v,
                                     depth + 1);
            }
            break;
        }
        case MPI_COMBINER_SUBARRAY:
            rc = mxi_flatten_subarray(ints, types[0], base, v, depth);
            break;
        default:
            MXU_LOG(MXU_LOG_WARN,
                    "datatype constructor %d (e.g. darray or a Fortran 90 type) has no "
                    "stream-ordered layout",
                    comb);
            rc = MPI_ERR_TYPE;
        }
    }
    if (got_types)
        for (int i = 0; i < nd; i++)
            if (!mxi_type_is_named(types[i]))
                PMPI_Type_free(&types[i]);
    free(ints);
    free(aints);
    free(types);
    return rc != MPI_SUCCESS ? rc : v->err;
}

/* ------------------------------------------------------------ layouts */

/* Are l's chunks regular (equal lengths at a constant stride)? Sets
 * reg_len (0: no), reg_off and reg_stride. */
static void mxi_layout_regular(mxi_layout_t *l)
{
    l->reg_len = 0;
    l->reg_off = l->reg_stride = 0;
    if (l->n == 0 || l->c[0].len == 0)
        return;
    int64_t stride = l->n > 1 ? l->c[1].off - l->c[0].off : 0;
    for (size_t i = 1; i < l->n; i++)
        if (l->c[i].len != l->c[0].len || l->c[i].off - l->c[i - 1].off != stride)
            return;
    l->reg_len = l->c[0].len;
    l->reg_off = l->c[0].off;
    l->reg_stride = stride;
}

static mxi_layout_t *mxi_layout_build(MPI_Datatype dt, int *rc)
{
    int size;
    MPI_Aint lb, ext;
    if (PMPI_Type_size(dt, &size) != MPI_SUCCESS ||
        PMPI_Type_get_extent(dt, &lb, &ext) != MPI_SUCCESS) {
        *rc = MPI_ERR_TYPE;
        return NULL;
    }
    mxi_chunks_t v = {NULL, 0, 0, MPI_SUCCESS};
    *rc = mxi_flatten(dt, 0, &v, 0);
    uint64_t sum = 0;
    for (size_t i = 0; i < v.n; i++)
        sum += v.c[i].len;
    if (*rc == MPI_SUCCESS && sum != (uint64_t)size) {
        MXU_LOG(MXU_LOG_WARN, "datatype layout of %llu bytes for a type of %d: not supported",
                (unsigned long long)sum, size);
        *rc = MPI_ERR_TYPE;
    }
    mxi_layout_t *l = NULL;
    if (*rc == MPI_SUCCESS) {
        l = malloc(sizeof(*l) + v.n * sizeof(mxa_chunk_t));
        if (!l)
            *rc = MPI_ERR_NO_MEM;
    }
    if (l) {
        __atomic_store_n(&l->refs, 1, __ATOMIC_RELAXED);
        l->size = (uint64_t)size;
        l->extent = (int64_t)ext;
        l->dev_ctx = l->dev_chunks = NULL;
        l->n = v.n;
        if (v.n)
            memcpy(l->c, v.c, v.n * sizeof(mxa_chunk_t));
        mxi_layout_regular(l);
    }
    free(v.c);
    return l;
}

static int mxi_layout_copy(MPI_Datatype oldtype, int keyval, void *extra, void *in, void *out,
                           int *flag)
{
    (void)oldtype;
    (void)keyval;
    (void)extra;
    mxi_layout_t *l = in;
    __atomic_fetch_add(&l->refs, 1, __ATOMIC_RELAXED); /* a dup has the same layout */
    *(void **)out = l;
    *flag = 1;
    return MPI_SUCCESS;
}

static int mxi_layout_delete(MPI_Datatype type, int keyval, void *val, void *extra)
{
    (void)type;
    (void)keyval;
    (void)extra;
    mxi_layout_put(val);
    return MPI_SUCCESS;
}

void mxi_layout_init(void)
{
    if (PMPI_Type_create_keyval(mxi_layout_copy, mxi_layout_delete, &mxi_layout_keyval, NULL) !=
        MPI_SUCCESS)
        mxi_layout_keyval = MPI_KEYVAL_INVALID; /* layouts are then built at every use */
}

static mxi_layout_t *mxi_bytes_layout; /* mxi_layout_bytes_get's, made at first use */

void mxi_layout_finalize(void)
{
    if (mxi_layout_keyval != MPI_KEYVAL_INVALID)
        PMPI_Type_free_keyval(&mxi_layout_keyval);
    /* its own reference: operations still holding one free it last */
    mxi_layout_put(__atomic_exchange_n(&mxi_bytes_layout, NULL, __ATOMIC_ACQ_REL));
}

int mxi_layout_get(MPI_Datatype dt, mxi_layout_t **out)
{
    int named = mxi_type_is_named(dt);
    void *val = NULL;
    int flag = 0;
    if (!named && mxi_layout_keyval != MPI_KEYVAL_INVALID &&
        PMPI_Type_get_attr(dt, mxi_layout_keyval, &val, &flag) == MPI_SUCCESS && flag) {
        mxi_layout_t *l = val;
        __atomic_fetch_add(&l->refs, 1, __ATOMIC_RELAXED);
        *out = l;
        return MPI_SUCCESS;
    }
    int rc;
    mxi_layout_t *l = mxi_layout_build(dt, &rc);
    if (!l)
        return rc;
    /* cached on derived types (one more reference, the attribute's) */
    if (!named && mxi_layout_keyval != MPI_KEYVAL_INVALID) {
        __atomic_fetch_add(&l->refs, 1, __ATOMIC_RELAXED);
        if (PMPI_Type_set_attr(dt, mxi_layout_keyval, l) != MPI_SUCCESS)
            __atomic_fetch_sub(&l->refs, 1, __ATOMIC_RELAXED);
    }
    *out = l;
    return MPI_SUCCESS;
}

void mxi_layout_put(mxi_layout_t *l)
{
    if (l && __atomic_sub_fetch(&l->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(l);
}

int mxi_layout_contiguous(const mxi_layout_t *l)
{
    return l->n == 1 && l->c[0].off == 0 && l->c[0].len == l->size && (int64_t)l->size == l->extent;
}

mxi_layout_t *mxi_layout_bytes_get(void)
{
    if (!__atomic_load_n(&mxi_bytes_layout, __ATOMIC_ACQUIRE)) {
        mxi_layout_t *l = calloc(1, sizeof(*l) + sizeof(mxa_chunk_t));
        if (!l)
            return NULL;
        l->refs = 1; /* mxi_bytes_layout's, dropped at finalize */
        l->size = 1;
        l->extent = 1;
        l->n = 1;
        l->c[0] = (mxa_chunk_t){.off = 0, .len = 1, .pos = 0};
        mxi_layout_regular(l);
        mxi_layout_t *none = NULL;
        if (!__atomic_compare_exchange_n(&mxi_bytes_layout, &none, l, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            free(l);
    }
    mxi_layout_t *l = __atomic_load_n(&mxi_bytes_layout, __ATOMIC_ACQUIRE);
    if (l)
        __atomic_add_fetch(&l->refs, 1, __ATOMIC_RELAXED);
    return l;
}

/* Host memory: the host executors' chunk walk (pack_proto.h), on the
 * layout's own chunks; contiguous bytes at once. */
static void mxi_layout_move(const mxi_layout_t *l, void *buf, void *packed, int count,
                            uint64_t bytes, int unpack)
{
    uint64_t all = mxi_layout_bytes(l, count);
    if (bytes > all)
        bytes = all;
    if (mxi_layout_contiguous(l)) {
        if (bytes)
            memcpy(unpack ? buf : packed, unpack ? packed : buf, (size_t)bytes);
        return;
    }
    mxa_pack_args_t a = mxi_layout_pack_args(l, buf, packed, (void *)l->c, count, unpack);
    mxa_pack_host(&a, bytes);
}

void mxi_layout_pack(const mxi_layout_t *l, const void *buf, int count, void *packed)
{
    mxi_layout_move(l, (void *)(uintptr_t)buf, packed, count, UINT64_MAX, 0);
}

void mxi_layout_unpack(const mxi_layout_t *l, const void *packed, uint64_t bytes, void *buf,
                       int count)
{
    mxi_layout_move(l, buf, (void *)(uintptr_t)packed, count, bytes, 1);
}
