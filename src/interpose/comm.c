/*
 * comm.c - communicators: matching contexts, rank translation, stream
 * communicator hints (info keys), and the wrappers of the calls that create,
 * free and configure communicators.
 *
 * Every communicator made through a wrapped creation call gets a matching
 * context id agreed with one MPI_Allreduce(MAX) of the members' next free
 * id: any two communicators that share a process get different ids, which is
 * all the tag layout needs.
 */
#include "interpose/interpose.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t mxi_handle_key(const void *handle, size_t size)
{
    uint64_t v = 0;
    memcpy(&v, handle, size < sizeof(v) ? size : sizeof(v));
    return v ^ (UINT64_C(1) << 63); /* never 0, the map's reserved key */
}

mxi_comm_t *mxi_comm_find(MPI_Comm comm)
{
    if (comm == MPI_COMM_NULL)
        return NULL;
    return mxu_locked_map_get(&mxi.comms, MXI_COMM_KEY(comm));
}

static void mxi_comm_destroy(mxi_comm_t *c)
{
    if (!c)
        return;
    if (c->stream)
        atomic_fetch_sub(&mxi.stream_comms, 1);
    mxi_coll_ll_free(c->coll_ll);
    free(c->world_ranks);
    free(c);
}

/* Build the record for comm with the given context id. */
static int mxi_comm_build(MPI_Comm comm, uint32_t ctx, mxi_comm_t **out)
{
    mxi_comm_t *c = calloc(1, sizeof(*c));
    if (!c)
        return mxi_err_code(MXI_E_NO_MEM);
    c->handle = comm;
    c->eager_limit = mxu_config.eager_limit;
    c->recv_post_early = strcmp(mxu_config.recv_post, "early") == 0;
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    PMPI_Comm_rank(comm, &c->ec.rank);
    PMPI_Comm_size(comm, &c->ec.size);
    c->ec.ctx_id = ctx;
    c->supported = !inter && c->ec.size <= MXE_RANK_MAX && ctx < MXE_CTX_COMM_LIMIT;
    if (c->supported && comm != MPI_COMM_WORLD) {
        MPI_Group g, wg;
        c->world_ranks = malloc(sizeof(int) * (size_t)c->ec.size);
        int *ranks = malloc(sizeof(int) * (size_t)c->ec.size);
        if (!c->world_ranks || !ranks) {
            free(ranks);
            mxi_comm_destroy(c);
            return mxi_err_code(MXI_E_NO_MEM);
        }
        for (int i = 0; i < c->ec.size; i++)
            ranks[i] = i;
        PMPI_Comm_group(comm, &g);
        PMPI_Comm_group(MPI_COMM_WORLD, &wg);
        PMPI_Group_translate_ranks(g, c->ec.size, ranks, wg, c->world_ranks);
        PMPI_Group_free(&g);
        PMPI_Group_free(&wg);
        free(ranks);
        for (int i = 0; i < c->ec.size; i++)
            if (c->world_ranks[i] == MPI_UNDEFINED)
                c->supported = 0; /* spans processes outside MPI_COMM_WORLD */
        c->ec.world_ranks = c->world_ranks;
    }
    c->coll_ec = c->ec;
    c->coll_ec.ctx_id = ctx | MXE_CTX_COLL;
    *out = c;
    return MPI_SUCCESS;
}

static int mxi_comm_insert(mxi_comm_t *c)
{
    mxi_comm_t *old = mxu_locked_map_get(&mxi.comms, MXI_COMM_KEY(c->handle));
    if (mxu_locked_map_put(&mxi.comms, MXI_COMM_KEY(c->handle), c) != MXU_OK) {
        mxi_comm_destroy(c);
        return mxi_err_code(MXI_E_NO_MEM);
    }
    mxi_comm_destroy(old); /* a handle value reused after a free we missed */
    return MPI_SUCCESS;
}

void mxi_comm_register_predefined(void)
{
    mxi_comm_t *c;
    if (mxi_comm_build(MPI_COMM_WORLD, 0, &c) == MPI_SUCCESS)
        mxi_comm_insert(c);
    if (mxi_comm_build(MPI_COMM_SELF, 1, &c) == MPI_SUCCESS) {
        /* self: rank 0 is this process */
        if (c->world_ranks)
            c->world_ranks[0] = mxi.world_rank;
        mxi_comm_insert(c);
    }
    atomic_store(&mxi.next_ctx_id, 2);
}

int mxi_comm_register(MPI_Comm comm)
{
    if (!mxi_on() || comm == MPI_COMM_NULL)
        return MPI_SUCCESS;
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    uint32_t ctx = MXE_CTX_MAX + 1; /* intercomms: no context, unsupported */
    if (!inter) {
        unsigned int mine = atomic_load(&mxi.next_ctx_id), agreed = 0;
        MPI_Request req;
        int rc = PMPI_Iallreduce(&mine, &agreed, 1, MPI_UNSIGNED, MPI_MAX, comm, &req);
        if (rc == MPI_SUCCESS)
            rc = mxi_collective_wait(&req, comm, "of communicator creation (context id)", 0);
        if (rc != MPI_SUCCESS)
            return rc;
        ctx = agreed;
        /* next free id: above everything this process has seen */
        unsigned int cur = atomic_load(&mxi.next_ctx_id);
        while (cur < agreed + 1 &&
               !atomic_compare_exchange_weak(&mxi.next_ctx_id, &cur, agreed + 1))
            ;
        if (agreed >= MXE_CTX_COMM_LIMIT)
            MXU_LOG(MXU_LOG_WARN,
                    "matching contexts exhausted (%u communicators made); "
                    "new communicators are not stream-capable",
                    agreed);
    }
    mxi_comm_t *c;
    int rc = mxi_comm_build(comm, ctx, &c);
    if (rc != MPI_SUCCESS)
        return rc;
    return mxi_comm_insert(c);
}

void mxi_comm_forget(MPI_Comm comm)
{
    if (comm == MPI_COMM_NULL)
        return;
    mxi_comm_destroy(mxu_locked_map_remove(&mxi.comms, MXI_COMM_KEY(comm)));
}

void mxi_comm_forget_all(void)
{
    pthread_mutex_lock(&mxi.comms.lock);
    size_t pos = 0;
    uint64_t key;
    void *value;
    while (mxu_hashmap_next(&mxi.comms.map, &pos, &key, &value) >= 0) {
        mxi_comm_destroy(value);
        pos++;
    }
    pthread_mutex_unlock(&mxi.comms.lock);
    mxu_locked_map_destroy(&mxi.comms);
}

/* ------------------------------------------------------------- info keys */

static int mxi_is_our_key(const char *key)
{
    return strcmp(key, MPIX_ACC_INFO_STREAM) == 0 || strcmp(key, MPIX_ACC_INFO_STREAM_ALIAS) == 0 ||
           strcmp(key, MPIX_ACC_INFO_RECV_POST) == 0 ||
           strcmp(key, MPIX_ACC_INFO_EAGER_LIMIT) == 0 || strcmp(key, MPIX_ACC_INFO_MATCH) == 0;
}

/* "0x<hex>" -> handle; "none" -> *none = 1. Returns 0 if malformed. */
static int mxi_parse_stream_value(const char *v, void **handle, int *none)
{
    *none = 0;
    if (strcmp(v, "none") == 0) {
        *none = 1;
        return 1;
    }
    if (v[0] != '0' || (v[1] != 'x' && v[1] != 'X') || v[2] == '\0')
        return 0;
    for (const char *p = v + 2; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')))
            return 0;
    errno = 0;
    unsigned long long x = strtoull(v + 2, NULL, 16);
    if (errno == ERANGE || x > UINTPTR_MAX)
        return 0;
    *handle = (void *)(uintptr_t)x;
    return 1;
}

void mxi_hint_record(mxi_comm_t *c, const char *key, const char *value)
{
    for (int i = 0; i < c->nhints; i++) {
        if (strcmp(c->hints[i].key, key) == 0) {
            snprintf(c->hints[i].value, sizeof(c->hints[i].value), "%s", value);
            return;
        }
    }
    if (c->nhints < MXI_MAX_HINTS) {
        snprintf(c->hints[c->nhints].key, sizeof(c->hints[0].key), "%s", key);
        snprintf(c->hints[c->nhints].value, sizeof(c->hints[0].value), "%s", value);
        c->nhints++;
    }
}

static void mxi_hint_drop(mxi_comm_t *c, const char *key)
{
    for (int i = 0; i < c->nhints; i++) {
        if (strcmp(c->hints[i].key, key) == 0) {
            c->hints[i] = c->hints[--c->nhints];
            return;
        }
    }
}

static void mxi_comm_set_stream_ptr(mxi_comm_t *c, mxa_stream_t *s)
{
    if (!c->stream && s)
        atomic_fetch_add(&mxi.stream_comms, 1);
    else if (c->stream && !s)
        atomic_fetch_sub(&mxi.stream_comms, 1);
    c->stream = s;
}

/* An invalid value: raised through err_comm when applying; when only
 * checking, logged and returned (the caller agrees with the other ranks of
 * its collective call before any rank raises). */
#define MXI_INFO_BAD(check, err_comm, e, ...)                                                      \
    ((check) ? mxi_error(e, __VA_ARGS__) : mxi_raise(err_comm, e, __VA_ARGS__))

/* Validate our keys in info; unless check, then apply them to c (all or
 * nothing). With check, c is only read and no error handler runs. */
static int mxi_comm_info(mxi_comm_t *c, MPI_Info info, MPI_Comm err_comm, int check)
{
    if (info == MPI_INFO_NULL)
        return MPI_SUCCESS;
    char v[MPI_MAX_INFO_VAL + 1];
    int flag;
    /* Validate everything first: apply all or nothing. */
    const char *stream_key = NULL;
    void *handle = NULL;
    int none = 0;
    mxa_stream_t *s = NULL;
    for (int k = 0; k < 2; k++) {
        const char *key = k == 0 ? MPIX_ACC_INFO_STREAM : MPIX_ACC_INFO_STREAM_ALIAS;
        PMPI_Info_get(info, key, MPI_MAX_INFO_VAL, v, &flag);
        if (!flag)
            continue;
        if (!mxi_parse_stream_value(v, &handle, &none))
            return MXI_INFO_BAD(check, err_comm, MXI_E_INFO_VALUE, "%s=\"%s\"", key, v);
        if (!none && check) {
            mxu_status_t st = mxa_stream_lookup(handle, &s);
            if (st == MXU_ERR_INVALID_STREAM)
                return mxi_error(MXI_E_BAD_STREAM, "%s=\"%s\"", key, v);
            if (st != MXU_OK)
                return mxi_status_to_mpi(st);
        } else if (!none) {
            int rc = mxi_stream_resolve(handle, err_comm, &s);
            if (rc != MPI_SUCCESS)
                return rc;
        }
        stream_key = key;
        break;
    }
    char stream_value[MPI_MAX_INFO_VAL + 1] = "";
    if (stream_key)
        PMPI_Info_get(info, stream_key, MPI_MAX_INFO_VAL, stream_value, &flag);

    int early = c->recv_post_early, have_post = 0;
    char post_value[MPI_MAX_INFO_VAL + 1] = "";
    PMPI_Info_get(info, MPIX_ACC_INFO_RECV_POST, MPI_MAX_INFO_VAL, post_value, &flag);
    if (flag) {
        if (strcmp(post_value, "early") == 0)
            early = 1;
        else if (strcmp(post_value, "ordered") == 0)
            early = 0;
        else
            return MXI_INFO_BAD(check, err_comm, MXI_E_INFO_VALUE, "%s=\"%s\"",
                                MPIX_ACC_INFO_RECV_POST, post_value);
        have_post = 1;
    }

    size_t eager = c->eager_limit;
    int have_eager = 0;
    char eager_value[MPI_MAX_INFO_VAL + 1] = "";
    PMPI_Info_get(info, MPIX_ACC_INFO_EAGER_LIMIT, MPI_MAX_INFO_VAL, eager_value, &flag);
    if (flag) {
        if (eager_value[0] == '-' || mxu_parse_size(eager_value, &eager) != MXU_OK)
            return MXI_INFO_BAD(check, err_comm, MXI_E_INFO_VALUE, "%s=\"%s\"",
                                MPIX_ACC_INFO_EAGER_LIMIT, eager_value);
        have_eager = 1;
    }
    int dynamic = c->ec.match_dynamic, have_match = 0;
    char match_value[MPI_MAX_INFO_VAL + 1] = "";
    PMPI_Info_get(info, MPIX_ACC_INFO_MATCH, MPI_MAX_INFO_VAL, match_value, &flag);
    if (flag) {
        if (strcmp(match_value, "dynamic") == 0)
            dynamic = 1;
        else if (strcmp(match_value, "call") == 0)
            dynamic = 0;
        else
            return MXI_INFO_BAD(check, err_comm, MXI_E_INFO_VALUE, "%s=\"%s\" (call or dynamic)",
                                MPIX_ACC_INFO_MATCH, match_value);
        have_match = 1;
    }
    /* MPI-4 assertions: MPI's keys (passed on to the MPI library too);
     * recorded for the stream-executed path, and checked by the receives */
    int no_any[2] = {c->no_any_source, c->no_any_tag}, have_no_any[2] = {0, 0};
    static const char *const no_any_key[2] = {"mpi_assert_no_any_source", "mpi_assert_no_any_tag"};
    for (int k = 0; k < 2; k++) {
        char av[MPI_MAX_INFO_VAL + 1];
        PMPI_Info_get(info, no_any_key[k], MPI_MAX_INFO_VAL, av, &flag);
        if (!flag)
            continue;
        if (strcmp(av, "true") == 0 || strcmp(av, "false") == 0) {
            no_any[k] = av[0] == 't';
            have_no_any[k] = 1;
        } else if (!check) {
            MXU_LOG(MXU_LOG_WARN, "%s=\"%s\" ignored (true or false)", no_any_key[k], av);
        }
    }
    if (check)
        return MPI_SUCCESS;

    if (have_match) {
        c->ec.match_dynamic = dynamic;
        mxi_hint_record(c, MPIX_ACC_INFO_MATCH, match_value);
    }
    if (have_no_any[0])
        c->no_any_source = no_any[0];
    if (have_no_any[1])
        c->no_any_tag = no_any[1];
    /* no wildcard receive on any member: messages between processes of a
     * node may take the stream-executed path (engine/path.c) */
    c->ec.sx = c->no_any_source && c->no_any_tag;
    c->coll_ec.sx = c->ec.sx; /* both sides of a message agree: the same hint everywhere */
    if (stream_key) {
        mxi_comm_set_stream_ptr(c, none ? NULL : s);
        mxi_hint_drop(c, MPIX_ACC_INFO_STREAM);
        mxi_hint_drop(c, MPIX_ACC_INFO_STREAM_ALIAS);
        mxi_hint_record(c, stream_key, stream_value);
    }
    if (have_post) {
        c->recv_post_early = early;
        mxi_hint_record(c, MPIX_ACC_INFO_RECV_POST, post_value);
    }
    if (have_eager) {
        c->eager_limit = eager;
        mxi_hint_record(c, MPIX_ACC_INFO_EAGER_LIMIT, eager_value);
    }
    return MPI_SUCCESS;
}

int mxi_comm_apply_info(mxi_comm_t *c, MPI_Info info, MPI_Comm err_comm)
{
    return mxi_comm_info(c, info, err_comm, 0);
}

/* The check half of a collective call that reads our keys: every rank of
 * comm checks its own info, then all agree (one MPI_Allreduce, two on an
 * intercommunicator), so that either every rank goes on or every rank
 * raises through comm's handler: a rank that returned alone would leave the
 * others waiting in the collective. Sets *go_on. */
static int mxi_comm_info_agree(mxi_comm_t *c, MPI_Info info, MPI_Comm comm, const char *call,
                               int *go_on)
{
    *go_on = 0;
    int mine = mxi_comm_info(c, info, comm, 1);
    int inter = 0, in = mine == MPI_SUCCESS, all = 0;
    PMPI_Comm_test_inter(comm, &inter);
    int rc = mxi_allreduce_int(&in, &all, MPI_MIN, comm, call);
    if (rc == MPI_SUCCESS && inter) {
        /* that was the remote group's verdict; this round gives both groups' */
        in = in && all;
        rc = mxi_allreduce_int(&in, &all, MPI_MIN, comm, call);
    }
    if (rc != MPI_SUCCESS)
        return rc;
    if (mine != MPI_SUCCESS)
        return mxi_raise_code(comm, mine);
    if (!all)
        return mxi_raise(comm, MXI_E_INFO_VALUE,
                         "%s: another rank's value of an mpix_acc info key is invalid", call);
    *go_on = 1;
    return MPI_SUCCESS;
}

int mxi_info_filter(MPI_Info info, MPI_Info *out)
{
    *out = MPI_INFO_NULL;
    if (info == MPI_INFO_NULL)
        return MPI_SUCCESS;
    int rc = PMPI_Info_dup(info, out);
    if (rc != MPI_SUCCESS)
        return rc;
    int nkeys = 0;
    PMPI_Info_get_nkeys(*out, &nkeys);
    for (int i = nkeys - 1; i >= 0; i--) {
        char key[MPI_MAX_INFO_KEY + 1];
        PMPI_Info_get_nthkey(*out, i, key);
        if (mxi_is_our_key(key))
            PMPI_Info_delete(*out, key);
    }
    return MPI_SUCCESS;
}

/* -------------------------------------------------------------- wrappers */

/* Creation calls: call PMPI, then register the new communicator. */
#define MXI_WRAP_CREATE(name, params, args, newcomm)                                               \
    int name params                                                                                \
    {                                                                                              \
        int rc = P##name args;                                                                     \
        if (rc == MPI_SUCCESS && mxi_on())                                                         \
            rc = mxi_comm_register(*(newcomm));                                                    \
        return rc;                                                                                 \
    }

MXI_WRAP_CREATE(MPI_Comm_dup, (MPI_Comm comm, MPI_Comm *newcomm), (comm, newcomm), newcomm)
MXI_WRAP_CREATE(MPI_Comm_split, (MPI_Comm comm, int color, int key, MPI_Comm *newcomm),
                (comm, color, key, newcomm), newcomm)
MXI_WRAP_CREATE(MPI_Comm_split_type,
                (MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm),
                (comm, split_type, key, info, newcomm), newcomm)
MXI_WRAP_CREATE(MPI_Comm_create, (MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm),
                (comm, group, newcomm), newcomm)
MXI_WRAP_CREATE(MPI_Comm_create_group, (MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm),
                (comm, group, tag, newcomm), newcomm)
MXI_WRAP_CREATE(MPI_Cart_create,
                (MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder,
                 MPI_Comm *newcomm),
                (comm, ndims, dims, periods, reorder, newcomm), newcomm)
MXI_WRAP_CREATE(MPI_Cart_sub, (MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm),
                (comm, remain_dims, newcomm), newcomm)
MXI_WRAP_CREATE(MPI_Graph_create,
                (MPI_Comm comm, int nnodes, const int indx[], const int edges[], int reorder,
                 MPI_Comm *newcomm),
                (comm, nnodes, indx, edges, reorder, newcomm), newcomm)
MXI_WRAP_CREATE(MPI_Dist_graph_create,
                (MPI_Comm comm, int n, const int sources[], const int degrees[],
                 const int destinations[], const int weights[], MPI_Info info, int reorder,
                 MPI_Comm *newcomm),
                (comm, n, sources, degrees, destinations, weights, info, reorder, newcomm), newcomm)
MXI_WRAP_CREATE(MPI_Dist_graph_create_adjacent,
                (MPI_Comm comm, int indegree, const int sources[], const int sourceweights[],
                 int outdegree, const int destinations[], const int destweights[], MPI_Info info,
                 int reorder, MPI_Comm *newcomm),
                (comm, indegree, sources, sourceweights, outdegree, destinations, destweights, info,
                 reorder, newcomm),
                newcomm)
MXI_WRAP_CREATE(MPI_Intercomm_merge, (MPI_Comm intercomm, int high, MPI_Comm *newcomm),
                (intercomm, high, newcomm), newcomm)
MXI_WRAP_CREATE(MPI_Intercomm_create,
                (MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm, int remote_leader,
                 int tag, MPI_Comm *newcomm),
                (local_comm, local_leader, peer_comm, remote_leader, tag, newcomm), newcomm)

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
    if (!mxi_on() || comm == MPI_COMM_NULL) /* MPI reports MPI_COMM_NULL */
        return PMPI_Comm_dup_with_info(comm, info, newcomm);
    /* Validate our keys on a scratch record before creating anything, and
     * agree on the outcome with the other ranks. */
    mxi_comm_t scratch;
    memset(&scratch, 0, sizeof(scratch));
    int go_on;
    int rc = mxi_comm_info_agree(&scratch, info, comm, "MPI_Comm_dup_with_info", &go_on);
    if (!go_on)
        return rc;
    MPI_Info filtered;
    rc = mxi_info_filter(info, &filtered);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = PMPI_Comm_dup_with_info(comm, filtered, newcomm);
    if (filtered != MPI_INFO_NULL)
        PMPI_Info_free(&filtered);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = mxi_comm_register(*newcomm);
    if (rc != MPI_SUCCESS)
        return rc;
    mxi_comm_t *c = mxi_comm_find(*newcomm);
    return c ? mxi_comm_apply_info(c, info, *newcomm) : MPI_SUCCESS;
}

int MPI_Comm_free(MPI_Comm *comm)
{
    if (mxi_on() && comm)
        mxi_comm_forget(*comm);
    return PMPI_Comm_free(comm);
}

int MPI_Comm_disconnect(MPI_Comm *comm)
{
    if (mxi_on() && comm)
        mxi_comm_forget(*comm);
    return PMPI_Comm_disconnect(comm);
}

int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info)
{
    if (!mxi_on())
        return PMPI_Comm_set_info(comm, info);
    mxi_comm_t *c = mxi_comm_find(comm);
    if (c) {
        int go_on;
        int rc = mxi_comm_info_agree(c, info, comm, "MPI_Comm_set_info", &go_on);
        if (!go_on)
            return rc;
        rc = mxi_comm_apply_info(c, info, comm);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    MPI_Info filtered;
    int rc = mxi_info_filter(info, &filtered);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = PMPI_Comm_set_info(comm, filtered == MPI_INFO_NULL ? info : filtered);
    if (filtered != MPI_INFO_NULL)
        PMPI_Info_free(&filtered);
    return rc;
}

int MPI_Comm_get_info(MPI_Comm comm, MPI_Info *info_used)
{
    int rc = PMPI_Comm_get_info(comm, info_used);
    if (rc != MPI_SUCCESS || !mxi_on())
        return rc;
    mxi_comm_t *c = mxi_comm_find(comm);
    if (c)
        for (int i = 0; i < c->nhints; i++)
            PMPI_Info_set(*info_used, c->hints[i].key, c->hints[i].value);
    return rc;
}

/* ------------------------------------------------------------ public API */

int MPIX_Acc_Info_set_stream(MPI_Info info, MPIX_Acc_stream stream)
{
    char v[32];
    snprintf(v, sizeof(v), "0x%" PRIxPTR, (uintptr_t)stream);
    return PMPI_Info_set(info, MPIX_ACC_INFO_STREAM, v);
}

int MPIX_Acc_Comm_set_stream(MPI_Comm comm, MPIX_Acc_stream stream)
{
    if (!mxi_on())
        return mxi_raise(comm, MXI_E_NOT_ACTIVE, "MPIX_Acc_Comm_set_stream");
    mxi_comm_t *c = mxi_comm_find(comm);
    if (!c)
        return mxi_raise(comm, MXI_E_COMM, "MPIX_Acc_Comm_set_stream");
    if (!c->supported)
        return mxi_raise(comm, MXI_E_COMM_UNSUPPORTED, "MPIX_Acc_Comm_set_stream");
    mxa_stream_t *s;
    int rc = mxi_stream_resolve(stream, comm, &s);
    if (rc != MPI_SUCCESS)
        return rc;
    char v[32];
    snprintf(v, sizeof(v), "0x%" PRIxPTR, (uintptr_t)stream);
    mxi_comm_set_stream_ptr(c, s);
    mxi_hint_drop(c, MPIX_ACC_INFO_STREAM_ALIAS);
    mxi_hint_record(c, MPIX_ACC_INFO_STREAM, v);
    return MPI_SUCCESS;
}
