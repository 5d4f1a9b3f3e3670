/*
 * type_layout.c - the library's datatype layouts (src/interpose/typelayout.c)
 * against the MPI library's own MPI_Pack / MPI_Unpack: for every supported
 * constructor and nestings of them, 1-3 elements, the layout's pack gives
 * MPI_Pack's bytes and its unpack MPI_Unpack's buffer, bit for bit; a short
 * unpack fills the first bytes of the type map only; a layout outlives its
 * freed type; a layout is cached on its type; darray (not supported) gives
 * MPI_ERR_TYPE. One rank is enough (run with 1).
 */
#include "common.h"

#include "interpose/typelayout.h"

typedef struct {
    int i;
    double d[2];
    char c;
} rec_t;

/* one type under test: what, and how to build it (committed) */
static MPI_Datatype make(int which, char *what, size_t len)
{
    MPI_Datatype t = MPI_DATATYPE_NULL, a = MPI_DATATYPE_NULL, b = MPI_DATATYPE_NULL;
    switch (which) {
    case 0:
        snprintf(what, len, "vector(5, 2, 4, int)");
        T_MPI(MPI_Type_vector(5, 2, 4, MPI_INT, &t));
        break;
    case 1:
        snprintf(what, len, "hvector(3, 1, -24 B, double) (negative stride)");
        T_MPI(MPI_Type_create_hvector(3, 1, -24, MPI_DOUBLE, &t));
        break;
    case 2: {
        int bl[3] = {2, 1, 3}, d[3] = {5, 0, 9};
        snprintf(what, len, "indexed({2,1,3}, {5,0,9}, short) (out of order)");
        T_MPI(MPI_Type_indexed(3, bl, d, MPI_SHORT, &t));
        break;
    }
    case 3: {
        int bl[2] = {1, 2};
        MPI_Aint d[2] = {40, 3};
        snprintf(what, len, "hindexed({1,2}, {40,3} B, int)");
        T_MPI(MPI_Type_create_hindexed(2, bl, d, MPI_INT, &t));
        break;
    }
    case 4: {
        int d[3] = {7, 1, 4};
        snprintf(what, len, "indexed_block(2, {7,1,4}, float)");
        T_MPI(MPI_Type_create_indexed_block(3, 2, d, MPI_FLOAT, &t));
        break;
    }
    case 5: {
        MPI_Aint d[2] = {16, 0};
        snprintf(what, len, "hindexed_block(3, {16,0} B, char)");
        T_MPI(MPI_Type_create_hindexed_block(2, 3, d, MPI_CHAR, &t));
        break;
    }
    case 6: {
        int bl[3] = {1, 2, 1};
        MPI_Aint d[3] = {offsetof(rec_t, i), offsetof(rec_t, d), offsetof(rec_t, c)};
        MPI_Datatype ty[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
        snprintf(what, len, "struct {int, double[2], char} resized to sizeof");
        T_MPI(MPI_Type_create_struct(3, bl, d, ty, &a));
        T_MPI(MPI_Type_create_resized(a, 0, sizeof(rec_t), &t));
        break;
    }
    case 7: {
        int sizes[3] = {6, 5, 4}, sub[3] = {2, 3, 2}, st[3] = {1, 2, 1};
        snprintf(what, len, "subarray 6x5x4 [1:3, 2:5, 1:3] of double, C order");
        T_MPI(MPI_Type_create_subarray(3, sizes, sub, st, MPI_ORDER_C, MPI_DOUBLE, &t));
        break;
    }
    case 8: {
        int sizes[2] = {7, 5}, sub[2] = {3, 2}, st[2] = {4, 1};
        snprintf(what, len, "subarray 7x5 [4:7, 1:3] of int, Fortran order");
        T_MPI(MPI_Type_create_subarray(2, sizes, sub, st, MPI_ORDER_FORTRAN, MPI_INT, &t));
        break;
    }
    case 9:
        snprintf(what, len, "vector(3, 1, 2) of the struct (nesting)");
        T_MPI(MPI_Type_create_struct(
            3, (int[]){1, 2, 1},
            (MPI_Aint[]){offsetof(rec_t, i), offsetof(rec_t, d), offsetof(rec_t, c)},
            (MPI_Datatype[]){MPI_INT, MPI_DOUBLE, MPI_CHAR}, &a));
        T_MPI(MPI_Type_create_resized(a, 0, sizeof(rec_t), &b));
        T_MPI(MPI_Type_vector(3, 1, 2, b, &t));
        break;
    case 10:
        snprintf(what, len, "contiguous(2) of a column vector(4, 1, 6, double), resized to 8 B");
        T_MPI(MPI_Type_vector(4, 1, 6, MPI_DOUBLE, &a));
        T_MPI(MPI_Type_create_resized(a, 0, 8, &b));
        T_MPI(MPI_Type_contiguous(2, b, &t));
        break;
    case 11:
        snprintf(what, len, "dup of vector(2, 3, 5, long long)");
        T_MPI(MPI_Type_vector(2, 3, 5, MPI_LONG_LONG, &a));
        T_MPI(MPI_Type_dup(a, &t));
        break;
    default:
        return MPI_DATATYPE_NULL;
    }
    T_MPI(MPI_Type_commit(&t));
    if (a != MPI_DATATYPE_NULL)
        T_MPI(MPI_Type_free(&a));
    if (b != MPI_DATATYPE_NULL)
        T_MPI(MPI_Type_free(&b));
    return t;
}

static void check_type(MPI_Datatype t, const char *what)
{
    MPI_Aint lb, ext, tlb, text;
    int size;
    T_MPI(MPI_Type_get_extent(t, &lb, &ext));
    T_MPI(MPI_Type_get_true_extent(t, &tlb, &text));
    T_MPI(MPI_Type_size(t, &size));
    mxi_layout_t *l = NULL;
    T_CHECK(mxi_layout_get(t, &l) == MPI_SUCCESS && l, "%s: no layout", what);
    T_CHECK(l->size == (uint64_t)size && l->extent == (int64_t)ext,
            "%s: layout size %llu extent %lld, type %d, %ld", what, (unsigned long long)l->size,
            (long long)l->extent, size, (long)ext);
    mxi_layout_t *again = NULL;
    T_CHECK(mxi_layout_get(t, &again) == MPI_SUCCESS && again == l,
            "%s: the second look-up built a new layout (not cached)", what);
    mxi_layout_put(again);
    for (int count = 1; count <= 3; count++) {
        /* the buffer spans the true extent of count elements */
        MPI_Aint span = (count - 1) * ext + text;
        size_t nbuf = (size_t)span + 64;
        unsigned char *mem = malloc(nbuf), *memA = calloc(1, nbuf), *memB = calloc(1, nbuf);
        t_fill(mem, nbuf, (uint64_t)(count * 131 + size));
        unsigned char *buf = mem + 32 - tlb, *bufA = memA + 32 - tlb, *bufB = memB + 32 - tlb;
        int psize = 0;
        T_MPI(MPI_Pack_size(count, t, MPI_COMM_SELF, &psize));
        unsigned char *pa = malloc((size_t)psize + 1), *pb = malloc((size_t)psize + 1);
        int pos = 0;
        T_MPI(MPI_Pack(buf, count, t, pa, psize, &pos, MPI_COMM_SELF));
        T_CHECK((uint64_t)pos == mxi_layout_bytes(l, count),
                "%s x %d: MPI_Pack %d bytes, layout %llu", what, count, pos,
                (unsigned long long)mxi_layout_bytes(l, count));
        mxi_layout_pack(l, buf, count, pb);
        T_CHECK(memcmp(pa, pb, (size_t)pos) == 0, "%s x %d: packed bytes differ from MPI_Pack's",
                what, count);
        int upos = 0;
        T_MPI(MPI_Unpack(pa, pos, &upos, bufA, count, t, MPI_COMM_SELF));
        mxi_layout_unpack(l, pa, (uint64_t)pos, bufB, count);
        T_CHECK(memcmp(memA, memB, nbuf) == 0, "%s x %d: unpacked buffer differs from MPI_Unpack's",
                what, count);
        /* a short message: the first half of the packed bytes land where
         * the type map puts them, nothing else is written */
        memset(memB, 0, nbuf);
        uint64_t half = (uint64_t)pos / 2;
        mxi_layout_unpack(l, pa, half, bufB, count);
        mxi_layout_pack(l, bufB, count, pb);
        T_CHECK(memcmp(pa, pb, (size_t)half) == 0, "%s x %d: short unpack: first %llu bytes wrong",
                what, count, (unsigned long long)half);
        for (uint64_t i = half; i < (uint64_t)pos; i++)
            T_CHECK(pb[i] == 0, "%s x %d: short unpack wrote packed byte %llu", what, count,
                    (unsigned long long)i);
        free(mem);
        free(memA);
        free(memB);
        free(pa);
        free(pb);
    }
    mxi_layout_put(l);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "type_layout", 60);
    t_phase("1. constructors against MPI_Pack/MPI_Unpack");
    char what[128];
    int ntypes = 0;
    for (int which = 0;; which++) {
        MPI_Datatype t = make(which, what, sizeof(what));
        if (t == MPI_DATATYPE_NULL)
            break;
        check_type(t, what);
        T_MPI(MPI_Type_free(&t));
        ntypes++;
    }
    T_CHECK(ntypes == 12, "%d types checked", ntypes);

    t_phase("2. a layout outlives its freed type");
    MPI_Datatype t = make(0, what, sizeof(what));
    mxi_layout_t *l = NULL;
    T_CHECK(mxi_layout_get(t, &l) == MPI_SUCCESS, "vector: no layout");
    T_MPI(MPI_Type_free(&t));
    int src[20], dst[10];
    for (int i = 0; i < 20; i++)
        src[i] = i;
    mxi_layout_pack(l, src, 1, dst);
    int want[10] = {0, 1, 4, 5, 8, 9, 12, 13, 16, 17};
    T_CHECK(memcmp(dst, want, sizeof(want)) == 0, "vector packed after the type was freed");
    mxi_layout_put(l);

    t_phase("3. named types and unsupported constructors");
    T_CHECK(mxi_layout_get(MPI_DOUBLE, &l) == MPI_SUCCESS && l->n == 1 && l->size == 8,
            "MPI_DOUBLE: one chunk of 8 bytes");
    mxi_layout_put(l);
    int gs[1] = {12}, distrib[1] = {MPI_DISTRIBUTE_BLOCK}, dargs[1] = {MPI_DISTRIBUTE_DFLT_DARG},
        ps[1] = {1};
    MPI_Datatype da;
    T_MPI(MPI_Type_create_darray(1, 0, 1, gs, distrib, dargs, ps, MPI_ORDER_C, MPI_INT, &da));
    T_MPI(MPI_Type_commit(&da));
    l = NULL;
    T_CHECK(mxi_layout_get(da, &l) == MPI_ERR_TYPE && l == NULL, "darray: expected MPI_ERR_TYPE");
    T_MPI(MPI_Type_free(&da));
    return t_finish();
}
