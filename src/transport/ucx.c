/*
 * ucx.c - the UCX transport (see transport.h).
 *
 * One ucp_context and one ucp_worker per process, owned by the engine's
 * progress thread. Endpoints are created lazily, on first send to a rank,
 * from the worker addresses exchanged at init.
 */
#include "transport/transport.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dirent.h>
#include <dlfcn.h>
#include <ucp/api/ucp.h>

typedef struct {
    ucp_context_h context;
    ucp_worker_h worker;
    ucp_address_t *local_addr;
    size_t local_addr_len;
    int world_rank;
    int world_size;
    unsigned char *peer_blob; /* concatenated peer addresses */
    size_t *peer_offsets;     /* world_size + 1 */
    ucp_ep_h *eps;            /* lazily created, world_size entries */
    int efd;
    int wakeup;
    _Atomic int closing;     /* finalize: peers closing is expected */
    int peer_errors;         /* endpoints in UCX's "peer" error-handling mode */
    uint64_t memory_types;   /* UCX-supported memory types (bit mask) */
    ucp_mem_h ipc_warm_memh; /* device buffer of the node-peer warm-up (kept) */
    unsigned char *failed;   /* world_size entries: 1 = endpoint reported the peer failed,
                                * 2 = and the failure hook was told */
    int failures_new;        /* failed entries not yet handed to the hook */
    mxt_peer_failed_fn on_peer_failed;
    mxt_control_fn on_control; /* control messages (the engine's envelopes) */
    /* endpoints by the transports of their lanes (mxt_endpoint_summary) */
    pthread_mutex_t ep_desc_lock;
    struct mxt_ep_kind {
        char tls[120];
        int count;
    } ep_kinds[16];
    int n_ep_kinds;
    int n_eps;
} mxt_state_t;

/* The active-message id of control messages in the library's own context. */
#define MXT_AM_CONTROL 1

static mxt_state_t mxt;
static void mxt_live_cancel_all(void);

/*
 * UCX settings the library changes in its own UCX context (never in the MPI
 * library's), because their default breaks stream ordering. Each is applied
 * only when the user has not set UCX_<name> in the environment; the list is
 * printed by mpixacc_info (mxt_describe).
 *
 * RNDV_PIPELINE_SHM_ENABLE: UCX's "rndv/rkey_ptr/mtype" protocol (device or
 * managed memory to a peer's shared-memory staging buffer) maps the peer's
 * buffer and registers it with cuda_copy, and re-registers it
 * (cuMemHostUnregister + cuMemHostRegister) on the progress thread whenever a
 * larger message comes to the same address. cuMemHostUnregister waits for
 * the GPU, and the GPU's stream waits for the progress thread: a deadlock
 * (seen on 2xH200, managed -> managed ring at 8 B after 1 B). UCX then picks
 * its other rendezvous protocols for these buffers.
 *
 * CUDA_IPC_CACHE (only when the node has more ranks than visible GPUs, i.e.
 * ranks share a GPU): UCX keeps peers' device buffers mapped after use; with
 * two ranks on one H100, after the peer freed and re-allocated its buffers
 * (stencil2d, sizes 64..4096) a new mapping failed with
 * CUDA_ERROR_ALREADY_MAPPED in the library's context and the send failed.
 * Without the cache (a map and an unmap per rendezvous message) the same run
 * passes; with a GPU per rank the cache stays on (never seen failing there).
 */
enum { MXT_OV_ALWAYS = 0, MXT_OV_SHARED_GPU = 1 };
static const struct {
    const char *name;
    const char *value;
    int when;
} mxt_ucx_overrides[] = {
    {"RNDV_PIPELINE_SHM_ENABLE", "n", MXT_OV_ALWAYS},
    {"CUDA_IPC_CACHE", "n", MXT_OV_SHARED_GPU},
};
#define MXT_N_OVERRIDES (sizeof(mxt_ucx_overrides) / sizeof(mxt_ucx_overrides[0]))

/* Apply mxt_ucx_overrides to a UCX configuration; when 'what' is given, write
 * what was applied ("NAME=value ...", or kept from the environment) there. */
static void mxt_apply_overrides(ucp_config_t *config, int shared_gpu, char *what, size_t len)
{
    size_t used = 0;
    if (what != NULL && len > 0)
        what[0] = '\0';
    for (size_t i = 0; i < MXT_N_OVERRIDES; i++) {
        if (mxt_ucx_overrides[i].when == MXT_OV_SHARED_GPU && !shared_gpu)
            continue;
        char env[128];
        snprintf(env, sizeof(env), "UCX_%s", mxt_ucx_overrides[i].name);
        const char *user = getenv(env);
        ucs_status_t st = UCS_OK;
        if (user == NULL)
            st = ucp_config_modify(config, mxt_ucx_overrides[i].name, mxt_ucx_overrides[i].value);
        if (st != UCS_OK)
            MXU_LOG(MXU_LOG_WARN, "cannot set UCX %s=%s in the library's UCX context: %s",
                    mxt_ucx_overrides[i].name, mxt_ucx_overrides[i].value, ucs_status_string(st));
        if (what != NULL && used < len)
            used += (size_t)snprintf(what + used, len - used, "%s%s=%s%s", used ? " " : "",
                                     mxt_ucx_overrides[i].name,
                                     user != NULL ? user : mxt_ucx_overrides[i].value,
                                     user != NULL   ? " (user's)"
                                     : st != UCS_OK ? " (failed)"
                                                    : "");
    }
}

/* Map a UCX status to ours. */
static mxu_status_t mxt_map_status(ucs_status_t st)
{
    switch (st) {
    case UCS_OK:
        return MXU_OK;
    case UCS_ERR_MESSAGE_TRUNCATED:
        return MXU_ERR_TRUNCATED;
    case UCS_ERR_CANCELED:
        return MXU_ERR_CANCELED;
    case UCS_ERR_NO_MEMORY:
        return MXU_ERR_NO_MEMORY;
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
        return MXU_ERR_PEER;
    default:
        return MXU_ERR_TRANSPORT;
    }
}

/* A control message arrived (progress thread, inside ucp_worker_progress). */
static ucs_status_t mxt_control_cb(void *arg, const void *header, size_t header_length, void *data,
                                   size_t length, const ucp_am_recv_param_t *param)
{
    (void)arg;
    (void)header;
    (void)header_length;
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        /* never sent so (eager only): a protocol error, not data to lose quietly */
        MXU_LOG(MXU_LOG_ERROR, "control message of %zu bytes arrived as rendezvous; dropped",
                length);
        return UCS_OK;
    }
    if (mxt.on_control)
        mxt.on_control(data, length);
    return UCS_OK;
}

mxu_status_t mxt_create(const mxt_config_t *cfg)
{
    ucp_config_t *config = NULL;
    ucs_status_t st;

    memset(&mxt, 0, sizeof(mxt));
    pthread_mutex_init(&mxt.ep_desc_lock, NULL);
    mxt.efd = -1;
    mxt.world_rank = cfg->world_rank;
    mxt.world_size = cfg->world_size;
    mxt.peer_errors = cfg->peer_errors;

    /* One libucp.so.0 serves the whole process: the first library that
     * needed it (the MPI library when it comes first on the link line or
     * LD_LIBRARY_PATH) chose which. Report it; refuse one older than the
     * headers the library was built with (its ABI lacks what they use). */
    unsigned vmaj = 0, vmin = 0, vrel = 0;
    ucp_get_version(&vmaj, &vmin, &vrel);
    Dl_info di;
    const char *ucp_path =
        dladdr((void *)ucp_get_version, &di) && di.dli_fname ? di.dli_fname : "?";
    if (vmaj < UCP_API_MAJOR || (vmaj == UCP_API_MAJOR && vmin < UCP_API_MINOR))
        MXU_FAIL(MXU_ERR_TRANSPORT,
                 "the process loaded UCX %u.%u.%u (%s), older than the UCX %d.%d the library was "
                 "built with: one libucp.so.0 serves the whole process and the first library "
                 "that needed it chose it; link -lmpixacc before the MPI library, or put UCX "
                 "%d.%d first on LD_LIBRARY_PATH (mpixacc-env.sh does); stream-ordered "
                 "communication is off",
                 vmaj, vmin, vrel, ucp_path, UCP_API_MAJOR, UCP_API_MINOR, UCP_API_MAJOR,
                 UCP_API_MINOR);
    MXU_LOG(MXU_LOG_INFO, "UCX %u.%u.%u loaded from %s (built against UCX %s)", vmaj, vmin, vrel,
            ucp_path, MPIXACC_UCX_VERSION);

    st = ucp_config_read(NULL, NULL, &config);
    if (st != UCS_OK)
        MXU_FAIL(MXU_ERR_TRANSPORT, "ucp_config_read failed: %s", ucs_status_string(st));
    if (cfg->net_devices) {
        st = ucp_config_modify(config, "NET_DEVICES", cfg->net_devices);
        if (st != UCS_OK)
            MXU_LOG(MXU_LOG_WARN, "cannot set UCX NET_DEVICES=%s: %s", cfg->net_devices,
                    ucs_status_string(st));
    }
    char overrides[256];
    mxt_apply_overrides(config, cfg->shared_gpu, overrides, sizeof(overrides));
    MXU_LOG(MXU_LOG_DEBUG, "library's UCX context: %s", overrides);

    ucp_params_t params;
    memset(&params, 0, sizeof(params));
    params.field_mask =
        UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
    params.features =
        UCP_FEATURE_TAG | UCP_FEATURE_AM | (cfg->enable_wakeup ? UCP_FEATURE_WAKEUP : 0);
    params.mt_workers_shared = 0;
    params.name = "mpix-acc";
    st = ucp_init(&params, config, &mxt.context);
    ucp_config_release(config);
    if (st != UCS_OK)
        MXU_FAIL(MXU_ERR_TRANSPORT, "ucp_init failed: %s", ucs_status_string(st));

    ucp_context_attr_t cattr;
    memset(&cattr, 0, sizeof(cattr));
    cattr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    if (ucp_context_query(mxt.context, &cattr) == UCS_OK)
        mxt.memory_types = cattr.memory_types;

    ucp_worker_params_t wparams;
    memset(&wparams, 0, sizeof(wparams));
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    /* Only the progress thread uses the worker once it runs. */
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    st = ucp_worker_create(mxt.context, &wparams, &mxt.worker);
    if (st != UCS_OK) {
        ucp_cleanup(mxt.context);
        mxt.context = NULL;
        MXU_FAIL(MXU_ERR_TRANSPORT, "ucp_worker_create failed: %s", ucs_status_string(st));
    }

    ucp_am_handler_param_t amp;
    memset(&amp, 0, sizeof(amp));
    amp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                     UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    amp.id = MXT_AM_CONTROL;
    amp.cb = mxt_control_cb;
    amp.flags = UCP_AM_FLAG_WHOLE_MSG;
    st = ucp_worker_set_am_recv_handler(mxt.worker, &amp);
    if (st != UCS_OK) {
        mxt_destroy();
        MXU_FAIL(MXU_ERR_TRANSPORT, "ucp_worker_set_am_recv_handler failed: %s",
                 ucs_status_string(st));
    }

    st = ucp_worker_get_address(mxt.worker, &mxt.local_addr, &mxt.local_addr_len);
    if (st != UCS_OK) {
        mxt_destroy();
        MXU_FAIL(MXU_ERR_TRANSPORT, "ucp_worker_get_address failed: %s", ucs_status_string(st));
    }

    if (cfg->enable_wakeup) {
        st = ucp_worker_get_efd(mxt.worker, &mxt.efd);
        if (st == UCS_OK) {
            mxt.wakeup = 1;
        } else {
            mxt.efd = -1;
            MXU_LOG(MXU_LOG_INFO, "UCX worker wake-up unavailable (%s); progress will poll",
                    ucs_status_string(st));
        }
    }
    MXU_LOG(MXU_LOG_DEBUG, "UCX %s worker created, address %zu bytes", ucp_get_version_string(),
            mxt.local_addr_len);
    return MXU_OK;
}

void mxt_destroy(void)
{
    if (mxt.ipc_warm_memh) {
        ucp_mem_unmap(mxt.context, mxt.ipc_warm_memh);
        mxt.ipc_warm_memh = NULL;
    }
    if (mxt.eps) {
        free(mxt.eps);
        mxt.eps = NULL;
    }
    free(mxt.failed);
    mxt.failed = NULL;
    free(mxt.peer_blob);
    free(mxt.peer_offsets);
    mxt.peer_blob = NULL;
    mxt.peer_offsets = NULL;
    if (mxt.local_addr) {
        ucp_worker_release_address(mxt.worker, mxt.local_addr);
        mxt.local_addr = NULL;
    }
    if (mxt.worker) {
        ucp_worker_destroy(mxt.worker);
        mxt.worker = NULL;
    }
    mxt_live_cancel_all();
    if (mxt.context) {
        ucp_cleanup(mxt.context);
        mxt.context = NULL;
    }
}

mxu_status_t mxt_local_address(const void **addr, size_t *len)
{
    if (!mxt.local_addr)
        return MXU_ERR_NOT_READY;
    *addr = mxt.local_addr;
    *len = mxt.local_addr_len;
    return MXU_OK;
}

mxu_status_t mxt_set_peer_addresses(const void *blob, const size_t *offsets, int nranks)
{
    if (nranks != mxt.world_size)
        MXU_FAIL(MXU_ERR_INVALID_PARAM, "address table has %d ranks, expected %d", nranks,
                 mxt.world_size);
    size_t total = offsets[nranks];
    mxt.peer_blob = malloc(total ? total : 1);
    mxt.peer_offsets = malloc(sizeof(size_t) * ((size_t)nranks + 1));
    mxt.eps = calloc((size_t)nranks, sizeof(ucp_ep_h));
    mxt.failed = calloc((size_t)nranks, 1);
    if (!mxt.peer_blob || !mxt.peer_offsets || !mxt.eps || !mxt.failed)
        MXU_FAIL(MXU_ERR_NO_MEMORY, "cannot store %d peer addresses (%zu bytes)", nranks, total);
    memcpy(mxt.peer_blob, blob, total);
    memcpy(mxt.peer_offsets, offsets, sizeof(size_t) * ((size_t)nranks + 1));
    return MXU_OK;
}

static void mxt_ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)ep;
    int rank = (int)(intptr_t)arg;
    int closing = atomic_load(&mxt.closing);
    MXU_LOG(closing ? MXU_LOG_DEBUG : MXU_LOG_ERROR, "connection to rank %d failed: %s", rank,
            ucs_status_string(status));
    /* The peer is gone: no new operation with it is posted from now on,
     * and the engine is told after this progress call (mxt_progress), not
     * from inside UCX's callback. The endpoint stays in eps[] (failed) and
     * is force-closed at finalize. At finalize, peers closing is expected. */
    if (!closing && mxt.failed && rank >= 0 && rank < mxt.world_size && !mxt.failed[rank]) {
        mxt.failed[rank] = 1;
        mxt.failures_new++;
    }
}

void mxt_set_peer_failure_hook(mxt_peer_failed_fn fn) { mxt.on_peer_failed = fn; }

int mxt_peer_failed(int world_rank)
{
    return mxt.failed && world_rank >= 0 && world_rank < mxt.world_size &&
           mxt.failed[world_rank] != 0;
}

/* Hand the failures found by the last progress call to the engine. */
static void mxt_report_failures(void)
{
    for (int r = 0; mxt.failures_new > 0 && r < mxt.world_size; r++) {
        if (mxt.failed[r] != 1)
            continue;
        mxt.failed[r] = 2;
        mxt.failures_new--;
        if (mxt.on_peer_failed)
            mxt.on_peer_failed(r);
    }
}

/* Count a new endpoint under the transports of its lanes (chosen at
 * ucp_ep_create from the peer's address). */
static void mxt_ep_describe(ucp_ep_h ep)
{
    char tls[120] = "unknown";
#if HAVE_DECL_UCP_EP_ATTR_FIELD_TRANSPORTS
    ucp_transport_entry_t entries[16];
    ucp_ep_attr_t attr;
    memset(&attr, 0, sizeof(attr));
    attr.field_mask = UCP_EP_ATTR_FIELD_TRANSPORTS;
    attr.transports.entries = entries;
    attr.transports.num_entries = 16;
    attr.transports.entry_size = sizeof(ucp_transport_entry_t);
    if (ucp_ep_query(ep, &attr) == UCS_OK) {
        size_t off = 0;
        tls[0] = '\0';
        for (unsigned i = 0; i < attr.transports.num_entries && off < sizeof(tls); i++) {
            char one[48];
            snprintf(one, sizeof(one), "%s/%s", entries[i].transport_name, entries[i].device_name);
            if (strstr(tls, one)) /* lanes of one transport: once */
                continue;
            off += (size_t)snprintf(tls + off, sizeof(tls) - off, "%s%s", off ? "+" : "", one);
        }
        if (!tls[0])
            snprintf(tls, sizeof(tls), "none");
    }
#else
    (void)ep;
#endif
    pthread_mutex_lock(&mxt.ep_desc_lock);
    mxt.n_eps++;
    int k = 0;
    while (k < mxt.n_ep_kinds && strcmp(mxt.ep_kinds[k].tls, tls) != 0)
        k++;
    if (k == mxt.n_ep_kinds && k < (int)(sizeof(mxt.ep_kinds) / sizeof(mxt.ep_kinds[0]))) {
        snprintf(mxt.ep_kinds[k].tls, sizeof(mxt.ep_kinds[k].tls), "%s", tls);
        mxt.n_ep_kinds++;
    }
    if (k < mxt.n_ep_kinds)
        mxt.ep_kinds[k].count++;
    pthread_mutex_unlock(&mxt.ep_desc_lock);
}

int mxt_endpoint_summary(char *buf, size_t len)
{
    pthread_mutex_lock(&mxt.ep_desc_lock);
    size_t off = 0;
    buf[0] = '\0';
    for (int k = 0; k < mxt.n_ep_kinds && off < len; k++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s x%d", k ? ", " : "",
                                mxt.ep_kinds[k].tls, mxt.ep_kinds[k].count);
    int n = mxt.n_eps;
    pthread_mutex_unlock(&mxt.ep_desc_lock);
    if (!n)
        snprintf(buf, len, "none");
    return n;
}

static mxu_status_t mxt_get_ep(int rank, ucp_ep_h *ep_out)
{
    if (rank < 0 || rank >= mxt.world_size)
        MXU_FAIL(MXU_ERR_INVALID_PARAM, "transport rank %d out of range [0,%d)", rank,
                 mxt.world_size);
    if (mxt.failed[rank]) {
        /* reported once, when it failed; operations say it in their status */
        MXU_LOG(MXU_LOG_DEBUG, "rank %d failed earlier: not connecting", rank);
        return MXU_ERR_PEER;
    }
    if (mxt.eps[rank]) {
        *ep_out = mxt.eps[rank];
        return MXU_OK;
    }
    ucp_ep_params_t ep_params;
    memset(&ep_params, 0, sizeof(ep_params));
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address = (const ucp_address_t *)(mxt.peer_blob + mxt.peer_offsets[rank]);
    /* UCX's shared-memory transports (sysv, posix) cannot report a failed
     * peer: in "peer" mode UCX leaves them out, and within a node every
     * message goes over TCP loopback (UCX_PROTO_INFO on 2xH200: device
     * messages of 1-1218 B eager over tcp/eth0). So that mode is opt-in
     * (MPIX_ACC_PEER_ERRORS); by default a failed peer ends the job, as in
     * MPI. */
    if (mxt.peer_errors) {
        ep_params.field_mask |=
            UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
        ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
        ep_params.err_handler.cb = mxt_ep_error_cb;
        ep_params.err_handler.arg = (void *)(intptr_t)rank;
    }
    ucs_status_t st = ucp_ep_create(mxt.worker, &ep_params, &mxt.eps[rank]);
    if (st != UCS_OK) {
        mxt.eps[rank] = NULL;
        MXU_FAIL(mxt_map_status(st), "cannot connect to rank %d: %s", rank, ucs_status_string(st));
    }
    if (rank != mxt.world_rank)
        mxt_ep_describe(mxt.eps[rank]);
    *ep_out = mxt.eps[rank];
    return MXU_OK;
}

/* Per-operation context for UCX callbacks: the user's callback and data.
 * Every context of a posted request is on the live list until its callback
 * ran: requests UCX still holds when the worker is destroyed (a send never
 * matched at finalize: only the "peer" error mode can force-close an
 * endpoint with it) are completed as cancelled then, so nothing leaks. */
typedef struct mxt_cb_ctx {
    mxt_complete_fn cb;
    void *user;
    int *ran_inline; /* receives: set while the posting call is on the stack */
    struct mxt_cb_ctx *prev, *next;
} mxt_cb_ctx_t;

static mxt_cb_ctx_t *mxt_live; /* progress thread (or the owner before/after it) */

static void mxt_live_add(mxt_cb_ctx_t *ctx)
{
    ctx->prev = NULL;
    ctx->next = mxt_live;
    if (mxt_live)
        mxt_live->prev = ctx;
    mxt_live = ctx;
}

static void mxt_live_remove(mxt_cb_ctx_t *ctx)
{
    if (ctx->prev)
        ctx->prev->next = ctx->next;
    else
        mxt_live = ctx->next;
    if (ctx->next)
        ctx->next->prev = ctx->prev;
}

/* After the worker is gone: complete what UCX never completed. */
static void mxt_live_cancel_all(void)
{
    unsigned n = 0;
    while (mxt_live) {
        mxt_cb_ctx_t *ctx = mxt_live;
        mxt_live_remove(ctx);
        mxt_complete_fn cb = ctx->cb;
        void *user = ctx->user;
        free(ctx);
        cb(user, MXU_ERR_CANCELED, 0, 0);
        n++;
    }
    if (n)
        MXU_LOG(MXU_LOG_DEBUG, "%u UCX request(s) left at worker destruction, cancelled", n);
}

static void mxt_send_cb(void *request, ucs_status_t status, void *user_data)
{
    mxt_cb_ctx_t *ctx = user_data;
    mxt_complete_fn cb = ctx->cb;
    void *user = ctx->user;
    mxt_live_remove(ctx);
    free(ctx);
    ucp_request_free(request);
    cb(user, mxt_map_status(status), 0, 0);
}

static void mxt_recv_cb(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                        void *user_data)
{
    mxt_cb_ctx_t *ctx = user_data;
    mxt_complete_fn cb = ctx->cb;
    void *user = ctx->user;
    if (ctx->ran_inline)
        *ctx->ran_inline = 1;
    mxt_live_remove(ctx);
    free(ctx);
    ucp_request_free(request);
    cb(user, mxt_map_status(status), info ? info->sender_tag : 0, info ? info->length : 0);
}

static ucs_memory_type_t mxt_memtype(int hint)
{
    switch (hint) {
    case 1:
        return UCS_MEMORY_TYPE_CUDA;
    case 2:
        return UCS_MEMORY_TYPE_CUDA_MANAGED;
    default:
        return UCS_MEMORY_TYPE_HOST;
    }
}

mxu_status_t mxt_mem_register(void *buf, size_t len, int memtype_hint, void **reg)
{
    *reg = NULL;
    if (!mxt.context)
        MXU_FAIL(MXU_ERR_NOT_READY, "UCX is not initialised");
    ucp_mem_map_params_t mp;
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                    UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    mp.address = buf;
    mp.length = len;
    mp.memory_type = mxt_memtype(memtype_hint);
    ucp_mem_h memh = NULL;
    ucs_status_t st = ucp_mem_map(mxt.context, &mp, &memh);
    if (st != UCS_OK)
        MXU_FAIL(mxt_map_status(st), "registration of %zu bytes at %p (%s) with UCX: %s", len, buf,
                 ucs_memory_type_names[mp.memory_type], ucs_status_string(st));
    *reg = memh;
    return MXU_OK;
}

void mxt_mem_deregister(void *reg)
{
    if (reg && mxt.context) {
        ucs_status_t st = ucp_mem_unmap(mxt.context, (ucp_mem_h)reg);
        if (st != UCS_OK)
            MXU_LOG(MXU_LOG_DEBUG, "UCX ucp_mem_unmap: %s", ucs_status_string(st));
    }
}

mxu_status_t mxt_tag_send(int world_dest, const void *buf, size_t len, int memtype_hint, void *reg,
                          int synchronous, uint64_t tag, mxt_complete_fn cb, void *user,
                          void **handle)
{
    ucp_ep_h ep;
    MXU_TRY(mxt_get_ep(world_dest, &ep));
    mxt_cb_ctx_t *ctx = malloc(sizeof(*ctx));
    if (!ctx)
        MXU_FAIL(MXU_ERR_NO_MEMORY, "send context allocation failed");
    ctx->cb = cb;
    ctx->user = user;
    ctx->ran_inline = NULL;

    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.cb.send = mxt_send_cb;
    param.user_data = ctx;
    param.memory_type = mxt_memtype(memtype_hint);
    if (reg) {
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        param.memh = (ucp_mem_h)reg;
    }

    mxt_live_add(ctx);
    ucs_status_ptr_t req = synchronous ? ucp_tag_send_sync_nbx(ep, buf, len, tag, &param)
                                       : ucp_tag_send_nbx(ep, buf, len, tag, &param);
    *handle = NULL;
    if (req == NULL) {
        mxt_live_remove(ctx);
        free(ctx);
        cb(user, MXU_OK, 0, 0);
        return MXU_OK;
    }
    if (UCS_PTR_IS_ERR(req)) {
        mxt_live_remove(ctx);
        free(ctx);
        ucs_status_t st = UCS_PTR_STATUS(req);
        MXU_FAIL(mxt_map_status(st), "send of %zu bytes to rank %d failed: %s", len, world_dest,
                 ucs_status_string(st));
    }
    *handle = req;
    return MXU_OK;
}

mxu_status_t mxt_tag_recv(void *buf, size_t len, int memtype_hint, void *reg, uint64_t tag,
                          uint64_t tag_mask, mxt_complete_fn cb, void *user, void **handle)
{
    mxt_cb_ctx_t *ctx = malloc(sizeof(*ctx));
    if (!ctx)
        MXU_FAIL(MXU_ERR_NO_MEMORY, "receive context allocation failed");
    ctx->cb = cb;
    ctx->user = user;

    /* No immediate completion: UCX then reports every completion through
     * the callback, with the sender's tag also for a message that was
     * already there and is truncated (the immediate-completion error path
     * leaves the receive info unset). The callback may run before
     * ucp_tag_recv_nbx returns; the request is freed then. */
    int ran_inline = 0;
    ctx->ran_inline = &ran_inline;
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                         UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = mxt_recv_cb;
    param.user_data = ctx;
    param.memory_type = mxt_memtype(memtype_hint);
    if (reg) {
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        param.memh = (ucp_mem_h)reg;
    }

    mxt_live_add(ctx);
    ucs_status_ptr_t req = ucp_tag_recv_nbx(mxt.worker, buf, len, tag, tag_mask, &param);
    *handle = NULL;
    if (UCS_PTR_IS_ERR(req)) {
        mxt_live_remove(ctx);
        free(ctx);
        ucs_status_t st = UCS_PTR_STATUS(req);
        MXU_FAIL(mxt_map_status(st), "receive of %zu bytes failed: %s", len, ucs_status_string(st));
    }
    if (!ran_inline) {
        ctx->ran_inline = NULL;
        *handle = req;
    }
    return MXU_OK;
}

void mxt_set_control_handler(mxt_control_fn fn) { mxt.on_control = fn; }

static void mxt_control_sent(void *request, ucs_status_t status, void *user_data)
{
    if (status != UCS_OK && !atomic_load(&mxt.closing))
        MXU_LOG(MXU_LOG_ERROR, "control message send failed: %s", ucs_status_string(status));
    free(user_data);
    ucp_request_free(request);
}

mxu_status_t mxt_control_send(int world_dest, void *buf, size_t len)
{
    ucp_ep_h ep;
    mxu_status_t rc = mxt_get_ep(world_dest, &ep);
    if (rc != MXU_OK) {
        free(buf);
        return rc;
    }
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                         UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.cb.send = mxt_control_sent;
    param.user_data = buf;
    param.flags = UCP_AM_SEND_FLAG_EAGER;
    param.memory_type = UCS_MEMORY_TYPE_HOST;
    ucs_status_ptr_t req = ucp_am_send_nbx(ep, MXT_AM_CONTROL, NULL, 0, buf, len, &param);
    if (req == NULL) {
        free(buf);
        return MXU_OK;
    }
    if (UCS_PTR_IS_ERR(req)) {
        free(buf);
        ucs_status_t st = UCS_PTR_STATUS(req);
        MXU_FAIL(mxt_map_status(st), "control message of %zu bytes to rank %d failed: %s", len,
                 world_dest, ucs_status_string(st));
    }
    return MXU_OK;
}

void mxt_cancel(void *handle)
{
    if (handle)
        ucp_request_cancel(mxt.worker, handle);
}

unsigned mxt_progress(void)
{
    unsigned n = ucp_worker_progress(mxt.worker);
    if (mxt.failures_new > 0) {
        mxt_report_failures();
        n++;
    }
    return n;
}

mxu_status_t mxt_watch_peer(int world_rank)
{
    if (!mxt.peer_errors || world_rank == mxt.world_rank)
        return MXU_OK;
    ucp_ep_h ep;
    return mxt_get_ep(world_rank, &ep);
}

int mxt_event_fd(void) { return mxt.wakeup ? mxt.efd : -1; }

mxu_status_t mxt_arm(void)
{
    if (!mxt.wakeup)
        return MXU_ERR_UNSUPPORTED;
    ucs_status_t st = ucp_worker_arm(mxt.worker);
    if (st == UCS_ERR_BUSY)
        return MXU_ERR_BUSY;
    if (st != UCS_OK)
        MXU_FAIL(MXU_ERR_TRANSPORT, "ucp_worker_arm failed: %s", ucs_status_string(st));
    return MXU_OK;
}

/* Wait for a nonblocking UCX control request (flush, close). */
static ucs_status_t mxt_wait_request(ucs_status_ptr_t req)
{
    if (req == NULL)
        return UCS_OK;
    if (UCS_PTR_IS_ERR(req))
        return UCS_PTR_STATUS(req);
    ucs_status_t st;
    do {
        ucp_worker_progress(mxt.worker);
        st = ucp_request_check_status(req);
    } while (st == UCS_INPROGRESS);
    ucp_request_free(req);
    return st;
}

/* ---- warm-up ---- */

/* One message of len bytes from buf to rbuf through the endpoint to self. */
static ucs_status_t mxt_warm_loopback(ucp_ep_h self, void *buf, void *rbuf, size_t len,
                                      ucs_memory_type_t mt)
{
    const ucp_tag_t tag = UINT64_MAX; /* ctx field all ones: no communicator has it */
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.memory_type = mt;
    ucs_status_ptr_t r = ucp_tag_recv_nbx(mxt.worker, rbuf, len, tag, UINT64_MAX, &param);
    if (UCS_PTR_IS_ERR(r))
        return UCS_PTR_STATUS(r); /* a send without its receive could wait forever */
    ucs_status_t a = mxt_wait_request(ucp_tag_send_nbx(self, buf, len, tag, &param));
    ucs_status_t b = mxt_wait_request(r);
    return a != UCS_OK ? a : b;
}

/* Allocate len bytes of memory type mt through UCX; NULL when it cannot. */
static void *mxt_warm_alloc(ucs_memory_type_t mt, size_t len, ucp_mem_h *memh)
{
    ucp_mem_map_params_t mp;
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS |
                    UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    mp.length = len;
    mp.flags = UCP_MEM_MAP_ALLOCATE;
    mp.memory_type = mt;
    ucs_status_t st = ucp_mem_map(mxt.context, &mp, memh);
    if (st != UCS_OK) {
        MXU_LOG(MXU_LOG_INFO, "UCX warm-up: cannot allocate %s memory: %s",
                ucs_memory_type_names[mt], ucs_status_string(st));
        return NULL;
    }
    ucp_mem_attr_t ma;
    memset(&ma, 0, sizeof(ma));
    ma.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
    if (ucp_mem_query(*memh, &ma) != UCS_OK) {
        ucp_mem_unmap(mxt.context, *memh);
        *memh = NULL;
        return NULL;
    }
    return ma.address;
}

/* Node-peer exchange of mxt_warm_up: in round k, a rendezvous message of
 * device memory to the k-th next peer and from the k-th previous one. A
 * round that does not finish within 30 s (a peer that never came) is
 * abandoned with a warning: the buffer then stays mapped until finalize. */
#define MXT_IPC_WARM_LEN (256 * 1024)
static void mxt_warm_node_peers(const int *peers, int npeers, int device_memory)
{
    int me = -1;
    for (int i = 0; i < npeers; i++)
        if (peers[i] == mxt.world_rank)
            me = i;
    if (me < 0 || npeers < 2)
        return;
    /* Without device memory (UCX without CUDA memory here, or allocation
     * failed) still take part, with host memory: the peers expect our
     * messages in every round. */
    ucs_memory_type_t mt = UCS_MEMORY_TYPE_CUDA;
    char *buf = NULL;
    if (device_memory && (mxt.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)))
        buf = mxt_warm_alloc(mt, 2 * MXT_IPC_WARM_LEN, &mxt.ipc_warm_memh);
    if (!buf) {
        mt = UCS_MEMORY_TYPE_HOST;
        buf = mxt_warm_alloc(mt, 2 * MXT_IPC_WARM_LEN, &mxt.ipc_warm_memh);
        if (!buf)
            return;
        MXU_LOG(MXU_LOG_INFO, "UCX warm-up with node peers uses host memory (no device "
                              "memory through UCX here)");
    }
    int done = 0;
    for (int k = 1; k < npeers; k++) {
        int dst = peers[(me + k) % npeers], src = peers[(me - k + npeers) % npeers];
        ucp_ep_h ep;
        if (mxt_get_ep(dst, &ep) != MXU_OK)
            break;
        /* ctx field all ones (no communicator has it); the low bits name
         * the sender so that rounds cannot cross */
        ucp_tag_t stag = UINT64_MAX - 1 - (ucp_tag_t)mxt.world_rank;
        ucp_tag_t rtag = UINT64_MAX - 1 - (ucp_tag_t)src;
        ucp_request_param_t param;
        memset(&param, 0, sizeof(param));
        param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
        param.memory_type = mt;
        ucs_status_ptr_t r = ucp_tag_recv_nbx(mxt.worker, buf + MXT_IPC_WARM_LEN, MXT_IPC_WARM_LEN,
                                              rtag, UINT64_MAX, &param);
        if (UCS_PTR_IS_ERR(r))
            break;
        ucs_status_ptr_t s = ucp_tag_send_nbx(ep, buf, MXT_IPC_WARM_LEN, stag, &param);
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        ucs_status_t ss = UCS_INPROGRESS, rs = UCS_INPROGRESS;
        for (;;) {
            ucp_worker_progress(mxt.worker);
            if (ss == UCS_INPROGRESS)
                ss = s == NULL           ? UCS_OK
                     : UCS_PTR_IS_ERR(s) ? UCS_PTR_STATUS(s)
                                         : ucp_request_check_status(s);
            if (rs == UCS_INPROGRESS)
                rs = r == NULL ? UCS_OK : ucp_request_check_status(r);
            if (ss != UCS_INPROGRESS && rs != UCS_INPROGRESS)
                break;
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (t.tv_sec - t0.tv_sec > 30) {
                MXU_LOG(MXU_LOG_WARN,
                        "UCX warm-up with node peer %d (send) / %d (receive) "
                        "did not finish in 30 s; continuing without it",
                        dst, src);
                if (rs == UCS_INPROGRESS && r)
                    ucp_request_cancel(mxt.worker, r);
                /* give the cancel (and the send) a moment, free what ended */
                for (int i = 0;
                     i < 100000 &&
                     ((r && ucp_request_check_status(r) == UCS_INPROGRESS) ||
                      (s && !UCS_PTR_IS_ERR(s) && ucp_request_check_status(s) == UCS_INPROGRESS));
                     i++)
                    ucp_worker_progress(mxt.worker);
                int r_busy = r && ucp_request_check_status(r) == UCS_INPROGRESS;
                int s_busy =
                    s && !UCS_PTR_IS_ERR(s) && ucp_request_check_status(s) == UCS_INPROGRESS;
                if (r && !r_busy)
                    ucp_request_free(r);
                if (s && !UCS_PTR_IS_ERR(s) && !s_busy)
                    ucp_request_free(s);
                if (r_busy || s_busy)
                    mxt.ipc_warm_memh = NULL; /* still in use: never unmapped */
                return;
            }
        }
        if (s && !UCS_PTR_IS_ERR(s))
            ucp_request_free(s);
        if (r)
            ucp_request_free(r);
        if (ss != UCS_OK || rs != UCS_OK) {
            MXU_LOG(MXU_LOG_INFO, "UCX warm-up with node peers %d / %d: %s", dst, src,
                    ucs_status_string(ss != UCS_OK ? ss : rs));
            break;
        }
        done++;
    }
    MXU_LOG(MXU_LOG_DEBUG, "UCX warm-up: device memory exchanged with %d node peer(s)", done);
}

mxu_status_t mxt_warm_memory(int with_cuda)
{
    ucp_ep_h self;
    MXU_TRY(mxt_get_ep(mxt.world_rank, &self));

    /* Eager and rendezvous messages of each memory type through the
     * endpoint to self: protocol selection for these memory types, and the
     * one-time probing allocations of each type (UCX caches them per
     * context). */
    static const ucs_memory_type_t types[] = {UCS_MEMORY_TYPE_HOST, UCS_MEMORY_TYPE_CUDA,
                                              UCS_MEMORY_TYPE_CUDA_MANAGED};
    const size_t lens[] = {8, 256 * 1024};
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        ucs_memory_type_t mt = types[t];
        if (mt != UCS_MEMORY_TYPE_HOST && (!with_cuda || !(mxt.memory_types & UCS_BIT(mt))))
            continue;
        ucp_mem_h memh;
        char *addr = mxt_warm_alloc(mt, 2 * lens[1], &memh);
        if (!addr)
            continue;
        ucs_status_t st = UCS_OK;
        for (size_t i = 0; st == UCS_OK && i < sizeof(lens) / sizeof(lens[0]); i++)
            st = mxt_warm_loopback(self, addr, addr + lens[1], lens[i], mt);
        if (st != UCS_OK)
            MXU_LOG(MXU_LOG_INFO, "UCX warm-up with %s memory: %s", ucs_memory_type_names[mt],
                    ucs_status_string(st));
        ucp_mem_unmap(mxt.context, memh);
    }
    return MXU_OK;
}

mxu_status_t mxt_warm_up(int with_cuda, int device_memory, int connect_all, const int *node_peers,
                         int npeers)
{
    /* Endpoints: creating one selects protocols for its configuration. */
    int n = connect_all ? mxt.world_size : 0;
    for (int r = 0; r < n; r++) {
        ucp_ep_h ep;
        MXU_TRY(mxt_get_ep(r, &ep));
    }
    MXU_TRY(mxt_warm_memory(with_cuda && device_memory));
    if (with_cuda && node_peers)
        mxt_warm_node_peers(node_peers, npeers, device_memory);
    MXU_LOG(MXU_LOG_DEBUG, "UCX warm-up done (%d endpoints connected eagerly)", n);
    return MXU_OK;
}

void mxt_expect_disconnects(void) { atomic_store(&mxt.closing, 1); }

mxu_status_t mxt_flush_and_close(int (*fence)(void *arg), void *arg)
{
    mxu_status_t result = MXU_OK;
    if (!mxt.worker)
        return MXU_OK;
    atomic_store(&mxt.closing, 1);
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    ucs_status_t st = mxt_wait_request(ucp_worker_flush_nbx(mxt.worker, &param));
    if (st != UCS_OK) {
        MXU_LOG(MXU_LOG_WARN, "UCX worker flush: %s", ucs_status_string(st));
        result = MXU_ERR_TRANSPORT;
    }
    /* Close every endpoint at once and keep progressing until all closes
     * are done and then the fence is: a peer's close may need this
     * worker's answer, so no rank may sit in a blocking barrier while
     * others still close (a deadlock seen with 3-4 ranks). */
    int n = mxt.eps ? mxt.world_size : 0;
    void **reqs = n ? calloc((size_t)n, sizeof(void *)) : NULL;
    for (int r = 0; r < n; r++) {
        if (!mxt.eps[r])
            continue;
        memset(&param, 0, sizeof(param));
        if (mxt.peer_errors) { /* forcing needs the "peer" error mode */
            param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
            param.flags = UCP_EP_CLOSE_FLAG_FORCE;
        }
        ucs_status_ptr_t req = ucp_ep_close_nbx(mxt.eps[r], &param);
        mxt.eps[r] = NULL;
        if (UCS_PTR_IS_PTR(req) && reqs)
            reqs[r] = req;
        else if (UCS_PTR_IS_PTR(req))
            (void)mxt_wait_request(req); /* no memory for the list: one at a time */
        else if (UCS_PTR_IS_ERR(req))
            MXU_LOG(MXU_LOG_DEBUG, "closing endpoint to rank %d: %s", r,
                    ucs_status_string(UCS_PTR_STATUS(req)));
    }
    int fenced = fence == NULL;
    for (;;) {
        ucp_worker_progress(mxt.worker);
        int pending = 0;
        for (int r = 0; reqs && r < n; r++) {
            if (!reqs[r])
                continue;
            st = ucp_request_check_status(reqs[r]);
            if (st == UCS_INPROGRESS) {
                pending++;
                continue;
            }
            if (st != UCS_OK && st != UCS_ERR_CANCELED && st != UCS_ERR_CONNECTION_RESET &&
                st != UCS_ERR_ENDPOINT_TIMEOUT)
                MXU_LOG(MXU_LOG_DEBUG, "closing endpoint to rank %d: %s", r, ucs_status_string(st));
            ucp_request_free(reqs[r]);
            reqs[r] = NULL;
        }
        if (pending)
            continue;
        if (!fenced)
            fenced = fence(arg); /* starts once this rank's closes are done */
        if (fenced)
            break;
    }
    free(reqs);
    return result;
}

void mxt_abandon(void)
{
    if (!mxt.worker || !mxt.eps)
        return;
    atomic_store(&mxt.closing, 1);
    if (!mxt.peer_errors)
        return; /* a non-forced close could wait for the missing peer */
    for (int r = 0; r < mxt.world_size; r++) {
        if (!mxt.eps[r])
            continue;
        ucp_request_param_t param;
        memset(&param, 0, sizeof(param));
        param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        param.flags = UCP_EP_CLOSE_FLAG_FORCE;
        ucs_status_ptr_t req = ucp_ep_close_nbx(mxt.eps[r], &param);
        mxt.eps[r] = NULL;
        if (!UCS_PTR_IS_PTR(req))
            continue;
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int busy = 1;
        while (busy) {
            ucp_worker_progress(mxt.worker);
            busy = ucp_request_check_status(req) == UCS_INPROGRESS;
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (busy && t.tv_sec - t0.tv_sec > 1)
                break; /* left to the worker's destruction */
        }
        if (!busy)
            ucp_request_free(req);
    }
}

const char *mxt_ucx_version(void) { return ucp_get_version_string(); }

/* 1 when `dir` holds a shared object (".so" in the name) whose name starts
 * with `prefix`; -1 when the directory cannot be read. */
static int mxt_dir_has(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    int found = 0;
    size_t n = strlen(prefix);
    for (struct dirent *e; !found && (e = readdir(d)) != NULL;)
        found = strncmp(e->d_name, prefix, n) == 0 && strstr(e->d_name, ".so") != NULL;
    closedir(d);
    return found;
}

void mxt_ucx_loaded(mxt_ucx_loaded_t *out)
{
    memset(out, 0, sizeof(*out));
    ucp_get_version(&out->major, &out->minor, &out->release);
    out->hdr_major = UCP_API_MAJOR;
    out->hdr_minor = UCP_API_MINOR;
    out->older = out->major < out->hdr_major ||
                 (out->major == out->hdr_major && out->minor < out->hdr_minor);
    Dl_info info;
    if (dladdr((void *)ucp_init_version, &info) != 0 && info.dli_fname != NULL) {
        char *real = realpath(info.dli_fname, NULL);
        snprintf(out->path, sizeof(out->path), "%s", real != NULL ? real : info.dli_fname);
        free(real);
    }
    /* UCX loads its modules from UCX_MODULE_DIR, else <dir of libucs>/ucx
     * (libucs and libucp sit side by side in every UCX installation) */
    const char *env = getenv("UCX_MODULE_DIR");
    if (env != NULL && env[0] != '\0') {
        snprintf(out->module_dir, sizeof(out->module_dir), "%s", env);
    } else if (out->path[0] != '\0') {
        const char *slash = strrchr(out->path, '/');
        int len = slash != NULL ? (int)(slash - out->path) : 0;
        snprintf(out->module_dir, sizeof(out->module_dir), "%.*s/ucx", len, out->path);
    }
    out->has_cuda = out->has_ib = out->has_rdmacm = -1;
    if (out->module_dir[0] != '\0') {
        out->has_cuda = mxt_dir_has(out->module_dir, "libuct_cuda.so");
        out->has_ib = mxt_dir_has(out->module_dir, "libuct_ib");
        out->has_rdmacm = mxt_dir_has(out->module_dir, "libuct_rdmacm");
    }
}

void mxt_describe(char *buf, size_t len)
{
    static const struct {
        ucs_memory_type_t type;
        const char *name;
    } names[] = {
        {UCS_MEMORY_TYPE_HOST, "host"},
        {UCS_MEMORY_TYPE_CUDA, "cuda"},
        {UCS_MEMORY_TYPE_CUDA_MANAGED, "cuda-managed"},
        {UCS_MEMORY_TYPE_ROCM, "rocm"},
    };
    size_t used =
        (size_t)snprintf(buf, len, "UCX %s (header %d.%d), memory types:", ucp_get_version_string(),
                         UCP_API_MAJOR, UCP_API_MINOR);
    uint64_t types = mxt.memory_types;
    if (!mxt.context) {
        /* Not initialised (mpixacc_info): make a throw-away context to ask. */
        ucp_config_t *config = NULL;
        ucp_context_h ctx = NULL;
        ucp_params_t params;
        memset(&params, 0, sizeof(params));
        params.field_mask = UCP_PARAM_FIELD_FEATURES;
        params.features = UCP_FEATURE_TAG;
        if (ucp_config_read(NULL, NULL, &config) == UCS_OK) {
            mxt_apply_overrides(config, 0, NULL, 0);
            if (ucp_init(&params, config, &ctx) == UCS_OK) {
                ucp_context_attr_t cattr;
                memset(&cattr, 0, sizeof(cattr));
                cattr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
                if (ucp_context_query(ctx, &cattr) == UCS_OK)
                    types = cattr.memory_types;
                ucp_cleanup(ctx);
            }
            ucp_config_release(config);
        }
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && used < len; i++)
        if (types & UCS_BIT(names[i].type))
            used += (size_t)snprintf(buf + used, len - used, " %s", names[i].name);
    const char *tls = getenv("UCX_TLS");
    if (used < len)
        used += (size_t)snprintf(buf + used, len - used, "; UCX_TLS=%s", tls ? tls : "(all)");
    if (used < len) {
        /* what the library's own UCX context changes (mxt_ucx_overrides) */
        ucp_config_t *config = NULL;
        char what[256] = "";
        if (ucp_config_read(NULL, NULL, &config) == UCS_OK) {
            mxt_apply_overrides(config, 0, what, sizeof(what));
            ucp_config_release(config);
        }
        snprintf(buf + used, len - used, "; library context sets %s", what[0] ? what : "?");
    }
}
