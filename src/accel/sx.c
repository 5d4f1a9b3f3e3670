/*
 * sx.c - stream-executed (SX) links: control pages in POSIX shared memory,
 * the ring each receiver publishes, records, and the steps of sx_proto.h
 * enqueued on a stream: run by the stream's own thread for host streams
 * (here), by kernels for CUDA streams (cuda_sx.c).
 *
 * Threads. Links are created at start-up and closed at finalize (engine).
 * Publish/attach/enqueue run on application threads (the engine serializes
 * them per link); the progress thread enqueues receive steps on library
 * streams and reads records. The record pool has its own lock.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "accel/sx.h"

#include <stdatomic.h>
#include <stdio.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "accel/cuda.h"
#include "accel/seq_word.h"
#include "util/log.h"
#include "util/settings.h"

struct mxa_sx_link {
    char name[96];
    int owner;           /* created here (receiver): unlink at close */
    mxa_sx_ctrl_t *ctrl; /* mapped control page, ring after it */
    size_t map_bytes;
    size_t ring_off; /* ring offset in the segment */
    size_t slot_stride;
    /* CUDA: the segment registered in this process (cuMemHostRegister,
     * PORTABLE: every context of the process may use it) */
    int registered; /* 1 yes, -1 failed */
    uint64_t dev_base;
    void *ctx;                /* a context of the process's CUDA streams (library steps) */
    mxa_stream_t *lib_stream; /* receiver: steps the host asks for */
    mxa_stream_t *lib_host;
    /* the device ring (MXA_SX_DRING_*: receiver's memory, mapped by the
     * sender through a file descriptor) */
    int dr_kind;      /* the ring's kind; NONE before it exists */
    int dr_state;     /* sender: SX_DR_* */
    uint64_t dr_base; /* its address here (receiver: own; sender: the mapping) */
    size_t dr_bytes;
    int dr_fd;                /* receiver: the exported fd; sender: the socket while asking */
    void *dr_ctx;             /* CUDA: the context it was made or mapped for */
    unsigned dr_tries;        /* sender: connection attempts */
    uint64_t dr_served;       /* receiver (progress thread): dr_req last answered */
    _Atomic int dr_used;      /* sender: a message went into it: the host ring is closing */
    _Atomic long host_flight; /* sender: host-ring send steps not known to have run */
    _Atomic int host_retired; /* receiver: no message can be in the host ring any more */
    /* sender: two words per slot in the memory of the executor that maps
     * the device ring (a multi-block bulk step's decision and block count;
     * 0: no bulk messages on this link) */
    uint64_t scratch;
};

enum { SX_DR_NONE, SX_DR_ASKING, SX_DR_READY, SX_DR_FAILED };

static struct {
    pthread_mutex_t lock;
    /* the receive records' and bounce buffers' free lists (pool_lock): an
     * application thread takes one per receive or bounced send, the
     * progress thread gives them back; apart from `lock`, which the
     * progress thread takes at every pass (mxa_sx_serve) -- sharing it cost
     * the stencil's step 3.8 % of its host time in mxa_sx_record_alloc
     * (2 x H200, session 27, tools/mpixacc_prof.so) */
    pthread_mutex_t pool_lock;
    mxa_sx_record_t *free_records;
    void **chunks;
    size_t nchunks;
    uint64_t record_serial;
    uint64_t *abort_word;       /* host-visible, device-mapped with CUDA */
    _Atomic int abort_deferred; /* mxa_sx_setup found no context to make it in */
    mxa_sx_limits_t limits;
    int lib_host_used; /* a link took the library's host stream */
    /* receiver: the socket that hands out device-ring fds, and the links
     * whose rings it serves (progress thread, under lock) */
    int listen_fd;
    char sock_name[64];
    mxa_sx_link_t *exports[256];
    int nexports;
    /* named fds handed out the same way (mxa_sx_export_fd) */
    struct {
        char name[48];
        int fd;
        uint64_t bytes;
    } named[256];
    int nnamed;
    uint64_t last_accept_ns;
    _Atomic uint64_t drings_made, drings_mapped;
} sx = {.lock = PTHREAD_MUTEX_INITIALIZER, .pool_lock = PTHREAD_MUTEX_INITIALIZER, .listen_fd = -1};

#define SX_RECORDS_PER_CHUNK 256

/* send steps store header pairs into the mirror as 16-byte words */
_Static_assert(offsetof(mxa_sx_ctrl_t, mirror) % 64 == 0, "mirror must be 64-byte aligned");

static uint64_t sx_now_ns(void);
static int sx_dring_for(const mxa_sx_link_t *l, const mxa_stream_t *s);
/* Sender: does a send on s go into the receiver's device ring (mapped,
 * and s's executor reaches it)? Once true, true for good. */
static int sx_dring_in_use(const mxa_sx_link_t *l, const mxa_stream_t *s)
{
    return l->dr_state == SX_DR_READY && sx_dring_for(l, s);
}
static void sx_dring_advance(mxa_sx_link_t *l, mxa_stream_t *s);

static size_t sx_page_round(size_t n)
{
    long pg = sysconf(_SC_PAGESIZE);
    size_t p = pg > 0 ? (size_t)pg : 4096;
    return (n + p - 1) / p * p;
}

/* A slot: the header and LL words for slot_bytes of message (8 ring bytes
 * per 4 message bytes, sx_proto.h). */
size_t mxa_sx_slot_stride(size_t slot_bytes)
{
    size_t ll = (size_t)mxa_sx_ll_words(slot_bytes) * sizeof(uint64_t);
    return MXA_SX_HDR_BYTES + ((ll + 63) & ~(size_t)63);
}

/* ------------------------------------------------------------ memory */

/* Host memory the steps of every executor can write: pinned and mapped
 * with CUDA active (unified addressing: the same address on the device),
 * ordinary memory otherwise. Never freed before mxa_sx_shutdown. */
static void *sx_host_visible(size_t bytes)
{
#ifdef MPIXACC_HAVE_CUDA
    if (mxa_cuda_active())
        return mxa_cuda_sx_host_alloc(bytes);
#endif
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes) != 0)
        return NULL;
    memset(p, 0, bytes);
    return p;
}

static void sx_host_visible_free(void *p)
{
#ifdef MPIXACC_HAVE_CUDA
    if (mxa_cuda_active()) {
        mxa_cuda_sx_host_free(p);
        return;
    }
#endif
    free(p);
}

mxa_sx_record_t *mxa_sx_record_alloc(void)
{
    pthread_mutex_lock(&sx.pool_lock);
    if (!sx.free_records) {
        void **nc = realloc(sx.chunks, sizeof(void *) * (sx.nchunks + 1));
        mxa_sx_record_t *c =
            nc ? sx_host_visible(sizeof(mxa_sx_record_t) * SX_RECORDS_PER_CHUNK) : NULL;
        if (nc)
            sx.chunks = nc;
        if (!c) {
            pthread_mutex_unlock(&sx.pool_lock);
            MXU_LOG(MXU_LOG_ERROR, "SX: out of host-visible memory for receive records");
            return NULL;
        }
        sx.chunks[sx.nchunks++] = c;
        for (int i = 0; i < SX_RECORDS_PER_CHUNK; i++) {
            *(mxa_sx_record_t **)&c[i] = sx.free_records; /* link through the first word */
            sx.free_records = &c[i];
        }
    }
    mxa_sx_record_t *r = sx.free_records;
    sx.free_records = *(mxa_sx_record_t **)r;
    uint64_t serial = ++sx.record_serial;
    pthread_mutex_unlock(&sx.pool_lock);
    memset(r, 0, sizeof(*r));
    __atomic_store_n(&r->serial, serial, __ATOMIC_RELEASE);
    return r;
}

void mxa_sx_record_free(mxa_sx_record_t *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&sx.pool_lock);
    *(mxa_sx_record_t **)r = sx.free_records;
    sx.free_records = r;
    pthread_mutex_unlock(&sx.pool_lock);
}

/* The abort word: with CUDA, pinned memory that needs a context to be
 * allocated in. An application that makes its GPU current after MPI_Init
 * (HPGMG does) has none at start-up: the word is then made when the
 * library meets its first context (mxa_sx_context_ready, before any step
 * of that context is enqueued). Until then steps have no abort word (their
 * waits still end at the deadline); readers load the pointer atomically. */
static uint64_t *sx_abort_word(void) { return __atomic_load_n(&sx.abort_word, __ATOMIC_ACQUIRE); }

static int sx_aborted(void)
{
    uint64_t *w = sx_abort_word();
    return w && mxa_sx_load_acquire(w);
}

static mxu_status_t sx_abort_word_make(void)
{
    if (sx_abort_word())
        return MXU_OK;
    uint64_t *w = sx_host_visible(64);
    if (!w)
        MXU_FAIL(MXU_ERR_NO_MEMORY, "SX: no host-visible memory for the abort word");
    __atomic_store_n(w, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&sx.limits.abort_word, (uint64_t)(uintptr_t)w, __ATOMIC_RELEASE);
    __atomic_store_n(&sx.abort_word, w, __ATOMIC_RELEASE);
    return MXU_OK;
}

mxu_status_t mxa_sx_setup(double timeout_s)
{
    sx.limits.timeout_ns = timeout_s > 0 ? (uint64_t)(timeout_s * 1e9) : 0;
    uint64_t *w = sx_abort_word();
    if (w) {
        __atomic_store_n(w, 0, __ATOMIC_RELEASE);
        return MXU_OK;
    }
#ifdef MPIXACC_HAVE_CUDA
    if (mxa_cuda_active() && !mxa_cuda_sx_context_known()) {
        MXU_LOG(MXU_LOG_DEBUG, "SX: no CUDA context yet: the abort word waits for the first");
        atomic_store(&sx.abort_deferred, 1);
        return MXU_OK;
    }
#endif
    pthread_mutex_lock(&sx.lock);
    mxu_status_t st = sx_abort_word_make();
    pthread_mutex_unlock(&sx.lock);
    return st;
}

void mxa_sx_context_ready(void)
{
    if (!atomic_load(&sx.abort_deferred) || sx_abort_word())
        return;
    pthread_mutex_lock(&sx.lock);
    (void)sx_abort_word_make(); /* logged; steps then end at their deadline */
    pthread_mutex_unlock(&sx.lock);
}

uint64_t mxa_sx_abort_word_addr(void)
{
    return __atomic_load_n(&sx.limits.abort_word, __ATOMIC_ACQUIRE);
}

void mxa_sx_abort_all(void)
{
    uint64_t *w = sx_abort_word();
    if (w)
        __atomic_store_n(w, 1, __ATOMIC_RELEASE);
}

void mxa_sx_shutdown(void)
{
    int lfd = __atomic_exchange_n(&sx.listen_fd, -1, __ATOMIC_ACQ_REL);
    if (lfd >= 0)
        close(lfd);
    void *lib_host = NULL; /* its receive steps are done before the memory goes */
    if (sx.lib_host_used && mxa_library_host_stream(&lib_host))
        mxa_host_stream_synchronize(lib_host);
    pthread_mutex_lock(&sx.lock);
    pthread_mutex_lock(&sx.pool_lock);
    for (size_t i = 0; i < sx.nchunks; i++)
        sx_host_visible_free(sx.chunks[i]);
    free(sx.chunks);
    sx.chunks = NULL;
    sx.nchunks = 0;
    sx.free_records = NULL;
    pthread_mutex_unlock(&sx.pool_lock);
    sx.nexports = 0;
    uint64_t *w = sx_abort_word();
    __atomic_store_n(&sx.abort_word, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&sx.limits.abort_word, 0, __ATOMIC_RELEASE);
    if (w)
        sx_host_visible_free(w);
    pthread_mutex_unlock(&sx.lock);
}

/* Bounce buffers of send steps (host-visible), in size classes of 256 B
 * times powers of 4, kept for reuse. */
#define SX_BOUNCE_CLASSES 8
static void *bounce_free[SX_BOUNCE_CLASSES];

static int sx_bounce_class(size_t bytes, size_t *size)
{
    size_t sz = 256;
    for (int c = 0; c < SX_BOUNCE_CLASSES; c++, sz *= 4)
        if (bytes <= sz) {
            *size = sz;
            return c;
        }
    return -1;
}

void *mxa_sx_bounce_alloc(size_t bytes)
{
    size_t sz;
    int c = sx_bounce_class(bytes, &sz);
    if (c < 0)
        return NULL;
    pthread_mutex_lock(&sx.pool_lock);
    void *b = bounce_free[c];
    if (b)
        bounce_free[c] = *(void **)b;
    pthread_mutex_unlock(&sx.pool_lock);
    return b ? b : sx_host_visible(sz);
}

void mxa_sx_bounce_free(void *b, size_t bytes)
{
    size_t sz;
    int c = sx_bounce_class(bytes, &sz);
    if (!b || c < 0)
        return;
    pthread_mutex_lock(&sx.pool_lock);
    *(void **)b = bounce_free[c];
    bounce_free[c] = b;
    pthread_mutex_unlock(&sx.pool_lock);
}

/* ------------------------------------------------------------- links */

mxu_status_t mxa_sx_link_create(const char *name, unsigned nslots, size_t slot_bytes,
                                mxa_sx_link_t **out)
{
    if (nslots == 0 || nslots > MXA_SX_MAX_SLOTS)
        MXU_FAIL(MXU_ERR_INVALID_PARAM, "SX: %u slots (1..%d)", nslots, MXA_SX_MAX_SLOTS);
    mxa_sx_link_t *l = calloc(1, sizeof(*l));
    if (!l)
        MXU_FAIL(MXU_ERR_NO_MEMORY, "SX: out of memory");
    snprintf(l->name, sizeof(l->name), "%s", name);
    l->slot_stride = mxa_sx_slot_stride(slot_bytes);
    size_t ctrl_bytes = sx_page_round(sizeof(mxa_sx_ctrl_t));
    l->map_bytes = ctrl_bytes + sx_page_round(l->slot_stride * nslots);
    shm_unlink(name); /* a leftover of a crashed job with this process id */
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        free(l);
        MXU_FAIL(MXU_ERR_SYSTEM, "SX: shm_open(%s): %s", name, strerror(errno));
    }
    if (ftruncate(fd, (off_t)l->map_bytes) != 0) {
        int e = errno;
        size_t bytes = l->map_bytes;
        close(fd);
        shm_unlink(name);
        free(l);
        MXU_FAIL(MXU_ERR_SYSTEM, "SX: ftruncate(%s, %zu): %s", name, bytes, strerror(e));
    }
    void *p = mmap(NULL, l->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        shm_unlink(name);
        free(l);
        MXU_FAIL(MXU_ERR_SYSTEM, "SX: mmap(%s): %s", name, strerror(errno));
    }
    l->owner = 1;
    l->dr_fd = -1;
    l->ctrl = p;
    l->ring_off = ctrl_bytes;
    l->ctrl->nslots = nslots;
    l->ctrl->slot_bytes = slot_bytes;
    l->ctrl->ring_kind = MXA_SX_RING_HOST;
    __atomic_store_n(&l->ctrl->ring_ready, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&l->ctrl->magic, MXA_SX_CTRL_MAGIC, __ATOMIC_RELEASE);
    *out = l;
    return MXU_OK;
}

mxu_status_t mxa_sx_link_open(const char *name, mxa_sx_link_t **out)
{
    int fd = shm_open(name, O_RDWR, 0600);
    if (fd < 0)
        return errno == ENOENT ? MXU_ERR_NOT_READY : MXU_ERR_SYSTEM;
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(mxa_sx_ctrl_t)) {
        close(fd);
        return MXU_ERR_NOT_READY;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        MXU_FAIL(MXU_ERR_SYSTEM, "SX: mmap(%s): %s", name, strerror(errno));
    mxa_sx_ctrl_t *c = p;
    if (__atomic_load_n(&c->magic, __ATOMIC_ACQUIRE) != MXA_SX_CTRL_MAGIC) {
        munmap(p, (size_t)st.st_size);
        return MXU_ERR_NOT_READY;
    }
    mxa_sx_link_t *l = calloc(1, sizeof(*l));
    if (!l) {
        munmap(p, (size_t)st.st_size);
        MXU_FAIL(MXU_ERR_NO_MEMORY, "SX: out of memory");
    }
    snprintf(l->name, sizeof(l->name), "%s", name);
    l->dr_fd = -1;
    l->ctrl = c;
    l->map_bytes = (size_t)st.st_size;
    l->slot_stride = mxa_sx_slot_stride(c->slot_bytes);
    l->ring_off = sx_page_round(sizeof(mxa_sx_ctrl_t));
    *out = l;
    return MXU_OK;
}

void mxa_sx_link_close(mxa_sx_link_t *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&sx.lock);
    for (int i = 0; i < sx.nexports; i++)
        if (sx.exports[i] == l)
            sx.exports[i--] = sx.exports[--sx.nexports];
    pthread_mutex_unlock(&sx.lock);
    if (l->dr_fd >= 0)
        close(l->dr_fd);
    /* a memfd ring is unmapped; a GPU one stays mapped (freeing it waits
     * for the device, as for the registered segment) */
    if (l->dr_kind == MXA_SX_DRING_HOST && l->dr_base)
        munmap((void *)(uintptr_t)l->dr_base, l->dr_bytes);
    if (l->dr_kind == MXA_SX_DRING_HOST && l->scratch)
        free((void *)(uintptr_t)l->scratch); /* a GPU's stays (as its ring does) */
    /* a segment registered with CUDA stays mapped (unregistering waits
     * for the device: design.md §3, hazard 4) */
    if (l->registered != 1)
        munmap(l->ctrl, l->map_bytes);
    if (l->owner)
        shm_unlink(l->name);
    free(l);
}

unsigned mxa_sx_link_nslots(const mxa_sx_link_t *l) { return l->ctrl->nslots; }
size_t mxa_sx_link_slot_bytes(const mxa_sx_link_t *l) { return (size_t)l->ctrl->slot_bytes; }

/* Largest message a send on s may put on the link: the communicator's
 * eager limit while it writes the ring in the receiver's host memory (the
 * message crosses a bus twice; above the limit UCX's CUDA IPC copy wins),
 * MXA_SX_DRING_EAGER_FACTOR times it once the receiver's device ring is
 * mapped for s (one NVLink crossing: LL words written by one block beat
 * UCX's rendezvous up to ~96 KiB on 2 x H100, session 10), never more
 * than a slot. mxa_sx_enqueue_send chooses the ring by the same test
 * (sx_dring_in_use), which stays true once true: the send goes where this
 * said. */
size_t mxa_sx_link_send_limit(const mxa_sx_link_t *l, const mxa_stream_t *s, size_t eager_limit)
{
    size_t lim = eager_limit, slot = mxa_sx_link_slot_bytes(l);
    if (sx_dring_in_use(l, s))
        lim = eager_limit > SIZE_MAX / MXA_SX_DRING_EAGER_FACTOR
                  ? SIZE_MAX
                  : eager_limit * MXA_SX_DRING_EAGER_FACTOR;
    return lim < slot ? lim : slot;
}
/* Largest bulk message a send on s may put on the link (0: none): into a
 * mapped device ring with bulk slots, the smaller of a bulk slot and
 * MXA_SX_BULK_EAGER_FACTOR times the eager limit. */
size_t mxa_sx_link_bulk_limit(const mxa_sx_link_t *l, const mxa_stream_t *s, size_t eager_limit)
{
    if (!sx_dring_in_use(l, s) || !l->scratch)
        return 0;
    size_t lim = eager_limit > SIZE_MAX / MXA_SX_BULK_EAGER_FACTOR
                     ? SIZE_MAX
                     : eager_limit * MXA_SX_BULK_EAGER_FACTOR;
    size_t slot = (size_t)l->ctrl->bulk_bytes;
    return lim < slot ? lim : slot;
}
unsigned mxa_sx_link_bulk_slots(const mxa_sx_link_t *l) { return (unsigned)l->ctrl->bulk_slots; }
int mxa_sx_link_ring_kind(const mxa_sx_link_t *l)
{
    return __atomic_load_n(&l->ctrl->ring_ready, __ATOMIC_ACQUIRE) ? (int)l->ctrl->ring_kind
                                                                   : MXA_SX_RING_NONE;
}

int mxa_sx_stream_reaches(const mxa_stream_t *s, int memtype)
{
    if (s->kind == MXA_KIND_HOST)
        return memtype == MXA_MEM_HOST;
    if (s->kind == MXA_KIND_CUDA)
        return memtype == MXA_MEM_DEVICE || memtype == MXA_MEM_MANAGED;
    return 0;
}

/* The segment made usable by the GPU of stream s (CUDA): registered once. */
static mxu_status_t sx_register_for(mxa_sx_link_t *l, mxa_stream_t *s)
{
    if (l->registered == 1)
        return MXU_OK;
    if (l->registered < 0)
        return MXU_ERR_UNSUPPORTED;
#ifdef MPIXACC_HAVE_CUDA
    uint64_t d = 0;
    if (mxa_cuda_sx_register(l->ctrl, l->map_bytes, &d) != MXU_OK) {
        l->registered = -1;
        return MXU_ERR_UNSUPPORTED;
    }
    l->registered = 1;
    l->dev_base = d;
    l->ctx = mxa_cuda_sx_stream_ctx(s);
    return MXU_OK;
#else
    (void)s;
    l->registered = -1;
    return MXU_ERR_UNSUPPORTED;
#endif
}

/* Address of segment offset `off` for the executor of s. */
static uint64_t sx_addr(const mxa_sx_link_t *l, const mxa_stream_t *s, size_t off)
{
    if (s->kind == MXA_KIND_CUDA)
        return l->dev_base + off;
    return (uint64_t)(uintptr_t)l->ctrl + off;
}

mxu_status_t mxa_sx_link_publish(mxa_sx_link_t *l, mxa_stream_t *s)
{
    if (s->kind == MXA_KIND_HOST)
        return MXU_OK;
    if (s->kind != MXA_KIND_CUDA)
        return MXU_ERR_UNSUPPORTED;
    mxu_status_t st = sx_register_for(l, s);
    if (st == MXU_OK) {
        MXU_LOG(MXU_LOG_INFO, "SX: ring %s registered for the GPU (%u slots of %llu bytes)",
                l->name, l->ctrl->nslots, (unsigned long long)l->ctrl->slot_bytes);
    } else {
        /* our GPU cannot take messages from the ring: senders stop using it */
        __atomic_store_n(&l->ctrl->ring_ready, 0, __ATOMIC_RELEASE);
        MXU_LOG(MXU_LOG_WARN, "SX: ring %s withdrawn: messages on it take the UCX path", l->name);
    }
    return st;
}

int mxa_sx_link_published_for(const mxa_sx_link_t *l, const mxa_stream_t *s)
{
    /* a device ring that s's executor cannot read: the host looks instead */
    if (__atomic_load_n(&l->dr_kind, __ATOMIC_ACQUIRE) > MXA_SX_DRING_NONE && !sx_dring_for(l, s))
        return 0;
    return s->kind == MXA_KIND_HOST || (s->kind == MXA_KIND_CUDA && l->registered == 1);
}

void mxa_sx_link_advance(mxa_sx_link_t *l, mxa_stream_t *s)
{
    if (l->dr_state != SX_DR_READY && mxa_sx_link_ring_kind(l) == MXA_SX_RING_HOST)
        sx_dring_advance(l, s);
}

mxu_status_t mxa_sx_link_attach(mxa_sx_link_t *l, mxa_stream_t *s)
{
    if (mxa_sx_link_ring_kind(l) != MXA_SX_RING_HOST)
        return MXU_ERR_NOT_READY;
    if (l->dr_state != SX_DR_READY)
        sx_dring_advance(l, s);
    else if (atomic_load(&l->dr_used) && !sx_dring_for(l, s))
        return MXU_ERR_NOT_READY; /* the host ring is closing: UCX */
    if (s->kind == MXA_KIND_HOST)
        return MXU_OK;
    if (s->kind != MXA_KIND_CUDA)
        return MXU_ERR_UNSUPPORTED;
    int first = l->registered == 0;
    mxu_status_t st = sx_register_for(l, s);
    if (st != MXU_OK && first)
        MXU_LOG(MXU_LOG_WARN, "SX: cannot register the ring %s: messages on it take the UCX path",
                l->name);
    return st;
}

/* ------------------------------------------------------ device rings
 *
 * A link's second ring lives in the receiver's own memory: GPU memory for
 * CUDA streams (cuMemCreate: the receive step polls local memory and the
 * sender's stores cross NVLink once), a memfd for host streams (how CI runs
 * this code). The receiver makes it at its first receive on the link and
 * publishes dr_ready in the control page; a sender that sees it raises
 * dr_req and connects to the receiver's socket, whose progress thread
 * answers with the fd (SCM_RIGHTS); the sender maps it at a later send (the
 * application thread never waits for it) and from then on writes every
 * message of the link there. Messages already in the host ring stay there:
 * receivers scan both rings until the sender says none will come any more
 * (host_final) and every one there was taken (sx_host_retired). The credit
 * words (consumed/written) and slot numbers are shared: a slot holds one
 * message at a time, in either ring. */

static int sx_dring_wanted(const mxa_stream_t *s)
{
    const char *m = mxu_config.sx_dring ? mxu_config.sx_dring : "auto";
    if (!strcmp(m, "off"))
        return MXA_SX_DRING_NONE;
    if (s->kind == MXA_KIND_CUDA)
        return MXA_SX_DRING_CUDA;
    if (s->kind == MXA_KIND_HOST && !strcmp(m, "on"))
        return MXA_SX_DRING_HOST;
    return MXA_SX_DRING_NONE;
}

/* Does stream s run on the executor the device ring was made or mapped for? */
static int sx_dring_for(const mxa_sx_link_t *l, const mxa_stream_t *s)
{
    /* dr_kind is published last (release): the receiver's progress thread
     * reads these fields too */
    int kind = __atomic_load_n(&l->dr_kind, __ATOMIC_ACQUIRE);
    if (kind <= MXA_SX_DRING_NONE || l->dr_base == 0)
        return 0;
    if (kind == MXA_SX_DRING_HOST)
        return s->kind == MXA_KIND_HOST;
#ifdef MPIXACC_HAVE_CUDA
    if (kind == MXA_SX_DRING_CUDA)
        return s->kind == MXA_KIND_CUDA && mxa_cuda_sx_stream_ctx(s) == l->dr_ctx;
#endif
    return 0;
}

static mxu_status_t sx_listen(void)
{
    if (sx.listen_fd >= 0)
        return MXU_OK;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        MXU_FAIL(MXU_ERR_SYSTEM, "SX: socket: %s", strerror(errno));
    struct sockaddr_un a;
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    snprintf(sx.sock_name, sizeof(sx.sock_name), "mpixacc-sxd-%d-%llx", (int)getpid(),
             (unsigned long long)sx_now_ns());
    /* abstract namespace: a leading NUL, nothing in the file system */
    memcpy(a.sun_path + 1, sx.sock_name, strlen(sx.sock_name));
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(sx.sock_name));
    if (bind(fd, (struct sockaddr *)&a, len) != 0 || listen(fd, 64) != 0) {
        int e = errno;
        close(fd);
        MXU_FAIL(MXU_ERR_SYSTEM, "SX: socket %s: %s", sx.sock_name, strerror(e));
    }
    __atomic_store_n(&sx.listen_fd, fd, __ATOMIC_RELEASE);
    return MXU_OK;
}

void mxa_sx_dring_counts(uint64_t *made, uint64_t *mapped)
{
    *made = atomic_load(&sx.drings_made);
    *mapped = atomic_load(&sx.drings_mapped);
}

int mxa_sx_listen_fd(void) { return __atomic_load_n(&sx.listen_fd, __ATOMIC_ACQUIRE); }

/* Receiver: the device ring's layout: the slots (as in the host ring),
 * then MPIX_ACC_SX_BULK_SLOTS bulk slots, then one block counter per slot
 * for multi-block receive steps. Published in the control page (before
 * dr_ready) for the sender. Returns the ring's size. */
static size_t sx_layout(size_t nslots, size_t slot_stride, size_t *nbulk, size_t *bulk_bytes,
                        size_t *bulk_off, size_t *count_off)
{
    *nbulk = mxu_config.sx_bulk_slots > 0 ? (size_t)mxu_config.sx_bulk_slots : 0;
    if (*nbulk > MXA_SX_MAX_BULK)
        *nbulk = MXA_SX_MAX_BULK;
    *bulk_bytes = (mxu_config.sx_bulk_bytes + 255) / 256 * 256;
    *bulk_off = (nslots * slot_stride + 4095) / 4096 * 4096;
    *count_off = *bulk_off + *nbulk * *bulk_bytes;
    return *count_off + sizeof(uint64_t) * MXA_SX_MAX_SLOTS;
}

static size_t sx_dring_layout(mxa_sx_link_t *l)
{
    size_t nbulk, bulk_bytes, bulk_off, count_off;
    size_t total =
        sx_layout(l->ctrl->nslots, l->slot_stride, &nbulk, &bulk_bytes, &bulk_off, &count_off);
    l->ctrl->bulk_slots = nbulk;
    l->ctrl->bulk_bytes = nbulk ? bulk_bytes : 0;
    l->ctrl->bulk_off = bulk_off;
    l->ctrl->count_off = count_off;
    return total;
}

void mxa_sx_link_memory(size_t *shared, size_t *device)
{
    size_t nslots = mxu_config.sx_slots > 0 ? (size_t)mxu_config.sx_slots : 1;
    size_t stride = mxa_sx_slot_stride(mxu_config.sx_slot_bytes);
    size_t nbulk, bulk_bytes, bulk_off, count_off;
    *shared = sx_page_round(sizeof(mxa_sx_ctrl_t)) + sx_page_round(stride * nslots);
    *device = sx_layout(nslots, stride, &nbulk, &bulk_bytes, &bulk_off, &count_off);
}

/* Receiver: make the device ring of stream s's kind, export it, publish it. */
static mxu_status_t sx_dring_make(mxa_sx_link_t *l, mxa_stream_t *s, int kind)
{
    size_t bytes = sx_dring_layout(l);
    uint64_t base = 0;
    int fd = -1;
    void *ctx = NULL;
    if (kind == MXA_SX_DRING_HOST) {
        fd = memfd_create("mpixacc-sx-dring", MFD_CLOEXEC);
        if (fd < 0)
            MXU_FAIL(MXU_ERR_SYSTEM, "SX: memfd_create: %s", strerror(errno));
        void *p = MAP_FAILED;
        if (ftruncate(fd, (off_t)bytes) == 0)
            p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            MXU_FAIL(MXU_ERR_SYSTEM, "SX: device ring (memfd, %zu bytes): %s", bytes, strerror(e));
        }
        base = (uint64_t)(uintptr_t)p;
    } else {
#ifdef MPIXACC_HAVE_CUDA
        ctx = mxa_cuda_sx_stream_ctx(s);
        MXU_TRY(mxa_cuda_sx_dring_alloc(ctx, &bytes, &base, &fd));
#else
        (void)s;
        return MXU_ERR_UNSUPPORTED;
#endif
    }
    pthread_mutex_lock(&sx.lock);
    mxu_status_t st = sx_listen();
    if (st == MXU_OK && sx.nexports < (int)(sizeof(sx.exports) / sizeof(sx.exports[0])))
        sx.exports[sx.nexports++] = l;
    else if (st == MXU_OK)
        st = MXU_ERR_NO_MEMORY;
    pthread_mutex_unlock(&sx.lock);
    if (st != MXU_OK) {
        close(fd); /* the ring itself stays mapped (unused) */
        return st;
    }
    l->dr_fd = fd;
    l->dr_bytes = bytes;
    l->dr_ctx = ctx;
    l->dr_base = base;
    __atomic_store_n(&l->dr_kind, kind, __ATOMIC_RELEASE);
    snprintf(l->ctrl->sock_name, sizeof(l->ctrl->sock_name), "%s", sx.sock_name);
    l->ctrl->dr_bytes = bytes;
    __atomic_store_n(&l->ctrl->dr_ready, (uint64_t)kind, __ATOMIC_RELEASE);
    atomic_fetch_add(&sx.drings_made, 1);
    MXU_LOG(MXU_LOG_INFO, "SX: device ring for %s: %zu bytes of %s memory, served on @%s", l->name,
            bytes, kind == MXA_SX_DRING_CUDA ? "GPU" : "memfd", sx.sock_name);
    return MXU_OK;
}

void mxa_sx_link_want_dring(mxa_sx_link_t *l, mxa_stream_t *s)
{
    int kind = sx_dring_wanted(s);
    if (!l->owner || l->dr_kind != MXA_SX_DRING_NONE || kind == MXA_SX_DRING_NONE)
        return;
    if (sx_dring_make(l, s, kind) != MXU_OK) {
        __atomic_store_n(&l->dr_kind, -1, __ATOMIC_RELEASE); /* logged; not tried again */
        MXU_LOG(MXU_LOG_WARN, "SX: no device ring for %s: its messages use the shared ring",
                l->name);
    }
}

/* Receiver's progress thread: answer the senders that asked for a device
 * ring's fd. Returns the number answered. */
static int sx_serve_one(int c)
{
    struct timeval tv = {0, 100000};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    int fl = fcntl(c, F_GETFL);
    if (fl >= 0)
        fcntl(c, F_SETFL, fl & ~O_NONBLOCK);
    char name[96];
    ssize_t got = recv(c, name, sizeof(name) - 1, 0);
    if (got <= 0)
        return 0;
    name[got] = '\0';
    mxa_sx_link_t *l = NULL;
    pthread_mutex_lock(&sx.lock);
    for (int i = 0; i < sx.nexports; i++)
        if (!strcmp(sx.exports[i]->name, name))
            l = sx.exports[i];
    pthread_mutex_unlock(&sx.lock);
    uint64_t bytes = l ? l->dr_bytes : 0;
    int xfd = l ? l->dr_fd : -1;
    if (!l) {
        pthread_mutex_lock(&sx.lock);
        for (int i = 0; i < sx.nnamed; i++)
            if (!strcmp(sx.named[i].name, name)) {
                bytes = sx.named[i].bytes;
                xfd = sx.named[i].fd;
            }
        pthread_mutex_unlock(&sx.lock);
    }
    struct iovec iov = {&bytes, sizeof(bytes)};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } cm;
    memset(&cm, 0, sizeof(cm));
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (xfd >= 0) {
        msg.msg_control = cm.buf;
        msg.msg_controllen = sizeof(cm.buf);
        struct cmsghdr *h = CMSG_FIRSTHDR(&msg);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(h), &xfd, sizeof(int));
    }
    if (sendmsg(c, &msg, MSG_NOSIGNAL) != (ssize_t)sizeof(bytes))
        MXU_LOG(MXU_LOG_WARN, "SX: answering for the device ring of %s: %s", name, strerror(errno));
    return xfd >= 0;
}

mxu_status_t mxa_sx_export_fd(const char *name, int fd, uint64_t bytes, char *sock, size_t len)
{
    pthread_mutex_lock(&sx.lock);
    mxu_status_t st = sx_listen();
    if (st == MXU_OK && sx.nnamed >= (int)(sizeof(sx.named) / sizeof(sx.named[0])))
        st = MXU_ERR_NO_MEMORY;
    if (st == MXU_OK) {
        snprintf(sx.named[sx.nnamed].name, sizeof(sx.named[0].name), "%s", name);
        sx.named[sx.nnamed].fd = fd;
        sx.named[sx.nnamed].bytes = bytes;
        sx.nnamed++;
        snprintf(sock, len, "%s", sx.sock_name);
    }
    pthread_mutex_unlock(&sx.lock);
    return st;
}

void mxa_sx_unexport_fd(const char *name)
{
    pthread_mutex_lock(&sx.lock);
    for (int i = 0; i < sx.nnamed; i++)
        if (!strcmp(sx.named[i].name, name)) {
            close(sx.named[i].fd);
            sx.named[i] = sx.named[--sx.nnamed];
            break;
        }
    pthread_mutex_unlock(&sx.lock);
}

int mxa_sx_fd_ask(const char *sock, const char *name)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_un a;
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    size_t nl = strnlen(sock, sizeof(a.sun_path) - 2);
    memcpy(a.sun_path + 1, sock, nl);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + nl);
    if (connect(fd, (struct sockaddr *)&a, len) != 0 ||
        send(fd, name, strlen(name), MSG_NOSIGNAL) != (ssize_t)strlen(name)) {
        MXU_LOG(MXU_LOG_DEBUG, "SX: asking %s for %s: %s", sock, name, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int mxa_sx_fd_answer(int sock, int *fd, uint64_t *bytes)
{
    *fd = -1;
    *bytes = 0;
    struct iovec iov = {bytes, sizeof(*bytes)};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } cm;
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cm.buf;
    msg.msg_controllen = sizeof(cm.buf);
    ssize_t got = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    close(sock);
    struct cmsghdr *h = got == (ssize_t)sizeof(*bytes) ? CMSG_FIRSTHDR(&msg) : NULL;
    if (h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS)
        memcpy(fd, CMSG_DATA(h), sizeof(int));
    if (*fd < 0 || *bytes == 0) {
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
        return -1;
    }
    return 1;
}

int mxa_sx_serve(void)
{
    int lfd = mxa_sx_listen_fd();
    if (lfd < 0)
        return 0;
    int pending = 0;
    pthread_mutex_lock(&sx.lock);
    for (int i = 0; i < sx.nexports; i++) {
        uint64_t req = __atomic_load_n(&sx.exports[i]->ctrl->dr_req, __ATOMIC_ACQUIRE);
        if (req != sx.exports[i]->dr_served) {
            sx.exports[i]->dr_served = req;
            pending = 1;
        }
    }
    pthread_mutex_unlock(&sx.lock);
    /* also now and then: a connection whose request was seen before it
     * was accepted, or a stale one, must not stay queued */
    uint64_t now = sx_now_ns();
    if (!pending && now - sx.last_accept_ns < 1000000u)
        return 0;
    sx.last_accept_ns = now;
    int served = 0;
    for (;;) {
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            break;
        served += sx_serve_one(c);
        close(c);
    }
    return served;
}

/* Sender: one step towards mapping the receiver's device ring for stream
 * s (never waits). */
static void sx_dring_advance(mxa_sx_link_t *l, mxa_stream_t *s)
{
    if (l->dr_state == SX_DR_READY || l->dr_state == SX_DR_FAILED)
        return;
    int kind = (int)__atomic_load_n(&l->ctrl->dr_ready, __ATOMIC_ACQUIRE);
    if (kind == MXA_SX_DRING_NONE || kind != sx_dring_wanted(s))
        return;
    if (l->dr_state == SX_DR_NONE) {
        if (l->dr_tries++ >= 8) {
            l->dr_state = SX_DR_FAILED;
            MXU_LOG(MXU_LOG_WARN, "SX: the receiver of %s did not hand out its device ring",
                    l->name);
            return;
        }
        __atomic_fetch_add(&l->ctrl->dr_req, 1, __ATOMIC_RELEASE);
        int fd = mxa_sx_fd_ask(l->ctrl->sock_name, l->name);
        if (fd < 0)
            return; /* tried again at a later send */
        l->dr_fd = fd;
        l->dr_state = SX_DR_ASKING;
        return;
    }
    /* SX_DR_ASKING: the answer, when there */
    int rfd = -1;
    uint64_t bytes = 0;
    int answer = mxa_sx_fd_answer(l->dr_fd, &rfd, &bytes);
    if (answer == 0)
        return;
    l->dr_fd = -1; /* (closed by mxa_sx_fd_answer) */
    if (answer < 0) {
        l->dr_state = SX_DR_NONE; /* ask again later (dr_tries bounds it) */
        return;
    }
    uint64_t base = 0;
    mxu_status_t st = MXU_ERR_UNSUPPORTED;
    void *ctx = NULL;
    if (kind == MXA_SX_DRING_HOST) {
        void *p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED, rfd, 0);
        if (p != MAP_FAILED) {
            base = (uint64_t)(uintptr_t)p;
            st = MXU_OK;
        }
    }
#ifdef MPIXACC_HAVE_CUDA
    else if (kind == MXA_SX_DRING_CUDA) {
        ctx = mxa_cuda_sx_stream_ctx(s);
        st = mxa_cuda_sx_dring_import(ctx, rfd, (size_t)bytes, &base);
    }
#endif
    close(rfd);
    if (st != MXU_OK) {
        l->dr_state = SX_DR_FAILED;
        MXU_LOG(MXU_LOG_WARN,
                "SX: cannot map the device ring of %s: its messages use the "
                "shared ring",
                l->name);
        return;
    }
    /* bulk messages need two words per slot of our own memory (a
     * multi-block step's decision and count); without them, none */
    if (l->ctrl->bulk_slots > 0 && l->ctrl->bulk_slots <= MXA_SX_MAX_BULK &&
        l->ctrl->count_off <= bytes) {
        size_t sb = 2 * sizeof(uint64_t) * MXA_SX_MAX_SLOTS;
        if (kind == MXA_SX_DRING_HOST) {
            void *p = calloc(1, sb);
            l->scratch = (uint64_t)(uintptr_t)p;
        }
#ifdef MPIXACC_HAVE_CUDA
        else if (mxa_cuda_sx_scratch_alloc(ctx, sb, &l->scratch) != MXU_OK)
            l->scratch = 0;
#endif
        if (!l->scratch)
            MXU_LOG(MXU_LOG_WARN, "SX: no scratch for bulk messages to %s: they take UCX", l->name);
    }
    l->dr_base = base;
    l->dr_bytes = (size_t)bytes;
    l->dr_ctx = ctx;
    __atomic_store_n(&l->dr_kind, kind, __ATOMIC_RELEASE);
    l->dr_state = SX_DR_READY;
    atomic_fetch_add(&sx.drings_mapped, 1);
    MXU_LOG(MXU_LOG_INFO, "SX: writing %s's messages into its device ring (%llu bytes)", l->name,
            (unsigned long long)bytes);
}

/* Sender: the host ring will get no more messages once the link switched
 * and every host-ring step ran. */
static void sx_host_closing(mxa_sx_link_t *l)
{
    if (atomic_load(&l->dr_used) && atomic_load(&l->host_flight) == 0)
        __atomic_store_n(&l->ctrl->host_final, 1, __ATOMIC_RELEASE);
}

void mxa_sx_link_send_ran(mxa_sx_link_t *l, int in_dring)
{
    if (!in_dring && atomic_fetch_sub(&l->host_flight, 1) == 1)
        sx_host_closing(l);
}

/* The 8 header words of slot h, each one 64-bit load. */
static void sx_ll_load_header(const uint64_t *h, uint64_t w[MXA_SX_LL_HDR_WORDS])
{
    for (int i = 0; i < MXA_SX_LL_HDR_WORDS; i++)
        w[i] = mxa_sx_load_relaxed(h + i);
}

/* Receiver: can a message still be in the host ring? Once the sender said
 * none will come (host_final) and every complete header there was taken
 * (consumed), never again. */
static int sx_host_ring_live(mxa_sx_link_t *l)
{
    if (atomic_load(&l->host_retired))
        return 0;
    if (!__atomic_load_n(&l->ctrl->host_final, __ATOMIC_ACQUIRE))
        return 1;
    const unsigned char *ring = (const unsigned char *)l->ctrl + l->ring_off;
    for (unsigned s = 0; s < l->ctrl->nslots; s++) {
        uint64_t w[MXA_SX_LL_HDR_WORDS];
        uint32_t f;
        sx_ll_load_header((const uint64_t *)(const void *)(ring + s * l->slot_stride), w);
        if (mxa_sx_ll_whole(w, &f) &&
            mxa_sx_load_acquire(&l->ctrl->consumed[s]) < mxa_sx_ll_n(w) + 1)
            return 1;
    }
    atomic_store(&l->host_retired, 1);
    MXU_LOG(MXU_LOG_DEBUG, "SX: %s: the shared ring is retired (device ring only)", l->name);
    return 0;
}

/* ------------------------------------------- the host reads the ring */

int mxa_sx_link_find(mxa_sx_link_t *l, uint32_t ctx, int tag, uint64_t k, unsigned *slot,
                     uint64_t *n, uint64_t *bytes)
{
    const unsigned char *ring = (const unsigned char *)l->ctrl + l->ring_off;
    int host = sx_host_ring_live(l);
    for (unsigned s = 0; s < l->ctrl->nslots; s++) {
        uint64_t w[MXA_SX_LL_HDR_WORDS];
        uint32_t f;
        if (host) {
            sx_ll_load_header((const uint64_t *)(const void *)(ring + s * l->slot_stride), w);
            if (mxa_sx_ll_match(w, ctx, tag, k, n, bytes, &f)) {
                *slot = s;
                return 1;
            }
        }
        /* the device ring's headers, mirrored by its send steps */
        if (__atomic_load_n(&l->dr_kind, __ATOMIC_ACQUIRE) > MXA_SX_DRING_NONE) {
            sx_ll_load_header(l->ctrl->mirror[s], w);
            if (mxa_sx_ll_match(w, ctx, tag, k, n, bytes, &f)) {
                *slot = s | MXA_SX_SLOT_DRING | (mxa_sx_hdr_bulk(*bytes) ? MXA_SX_SLOT_BULK : 0);
                *bytes = mxa_sx_hdr_len(*bytes);
                return 1;
            }
        }
    }
    return 0;
}

static void sx_backoff(unsigned *spins);

/* Copy payload words 0..words-1 of a slot into dst (cap bytes), waiting
 * for each word's flag: the words may land after the header. 1: done; 0:
 * gave up (the abort word, or deadline_ns passed, 0: none). */
static int sx_ll_copy_out(const uint64_t *payload, uint32_t f, uint64_t bytes, unsigned char *dst,
                          uint64_t cap, uint64_t deadline_ns);

#ifdef MPIXACC_HAVE_CUDA
/* The same from a GPU's device ring: copy the words to the host until all
 * carry their flag. */
static int sx_ll_copy_out_dev(const mxa_sx_link_t *l, uint64_t payload, uint32_t f, uint64_t bytes,
                              unsigned char *dst, uint64_t deadline_ns)
{
    uint64_t nw = mxa_sx_ll_words(bytes);
    if (nw == 0)
        return 1;
    uint64_t *w = malloc(nw * sizeof(uint64_t));
    if (!w)
        return 0;
    unsigned spins = 0;
    for (;;) {
        if (mxa_cuda_sx_dring_read(l->dr_ctx, payload, w, nw * sizeof(uint64_t)) != MXU_OK)
            break;
        uint64_t i = 0;
        while (i < nw && mxa_sx_ll_flag_of(w[i]) == f)
            i++;
        if (i == nw) {
            for (i = 0; i < nw; i++)
                mxa_sx_ll_scatter(dst, bytes, i, mxa_sx_ll_data_of(w[i]));
            free(w);
            return 1;
        }
        if (sx_aborted() || (deadline_ns && sx_now_ns() > deadline_ns))
            break;
        sx_backoff(&spins);
    }
    free(w);
    return 0;
}
#endif

size_t mxa_sx_link_take(mxa_sx_link_t *l, unsigned slot, uint64_t n, uint64_t bytes, void *dst,
                        size_t cap)
{
    int dr = (slot & MXA_SX_SLOT_DRING) != 0, bulk = (slot & MXA_SX_SLOT_BULK) != 0;
    slot &= ~(unsigned)(MXA_SX_SLOT_DRING | MXA_SX_SLOT_BULK);
    size_t take = bytes <= cap ? (size_t)bytes : cap;
    if (bulk) {
        /* data before its header (the send step fenced between them; the
         * mirror was written after the header) */
        uint64_t src =
            l->dr_base + l->ctrl->bulk_off + (n % l->ctrl->bulk_slots) * l->ctrl->bulk_bytes;
        mxa_sx_fence();
        mxu_status_t st = MXU_OK;
        if (l->dr_kind == MXA_SX_DRING_HOST) {
            if (take)
                memcpy(dst, (const void *)(uintptr_t)src, take);
        }
#ifdef MPIXACC_HAVE_CUDA
        else if (l->dr_kind == MXA_SX_DRING_CUDA && take)
            st = mxa_cuda_sx_dring_read(l->dr_ctx, src, dst, take);
#endif
        else if (take)
            st = MXU_ERR_UNSUPPORTED;
        if (st != MXU_OK)
            return (size_t)-1;
        mxa_sx_store_release(&l->ctrl->bulk_consumed[n % l->ctrl->bulk_slots], n + 1);
        mxa_sx_consume(l->ctrl->consumed, slot, n);
        return take;
    }
    size_t off = slot * l->slot_stride + MXA_SX_HDR_BYTES;
    /* found by mxa_sx_link_find: the header is complete, the sender is
     * writing the rest (a step already running), so the wait is short;
     * bounded all the same (a sender killed mid-step) */
    uint64_t deadline = sx.limits.timeout_ns ? sx_now_ns() + sx.limits.timeout_ns : 0;
    int ok = 0;
    if (!dr)
        ok = sx_ll_copy_out(
            (const uint64_t *)(const void *)((const unsigned char *)l->ctrl + l->ring_off + off),
            mxa_sx_ll_flag(n), take, dst, take, deadline);
    else if (l->dr_kind == MXA_SX_DRING_HOST)
        ok = sx_ll_copy_out((const uint64_t *)(uintptr_t)(l->dr_base + off), mxa_sx_ll_flag(n),
                            take, dst, take, deadline);
#ifdef MPIXACC_HAVE_CUDA
    else if (l->dr_kind == MXA_SX_DRING_CUDA)
        ok = sx_ll_copy_out_dev(l, l->dr_base + off, mxa_sx_ll_flag(n), take, dst, deadline);
#endif
    if (!ok)
        return (size_t)-1;
    mxa_sx_consume(l->ctrl->consumed, slot, n);
    return take;
}

/* -------------------------------------------------- host executor */

/* Copy with a progressive back-off while waiting: host streams are
 * threads, and on an oversubscribed node a hard spin would starve the
 * very thread that is to write. */
static void sx_backoff(unsigned *spins)
{
    if (++*spins < 200) {
        sched_yield();
        return;
    }
    unsigned us = *spins < 1000 ? 5 : 50;
    struct timespec ts = {0, (long)us * 1000};
    nanosleep(&ts, NULL);
}

static uint64_t sx_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int sx_ll_copy_out(const uint64_t *payload, uint32_t f, uint64_t bytes, unsigned char *dst,
                          uint64_t cap, uint64_t deadline_ns)
{
    uint64_t nw = mxa_sx_ll_words(bytes);
    for (uint64_t i = 0; i < nw; i++) {
        uint64_t w = mxa_sx_load_relaxed(payload + i);
        unsigned spins = 0;
        while (mxa_sx_ll_flag_of(w) != f) {
            if (sx_aborted())
                return 0;
            if (deadline_ns && sx_now_ns() > deadline_ns)
                return 0;
            sx_backoff(&spins);
            w = mxa_sx_load_relaxed(payload + i);
        }
        mxa_sx_ll_scatter(dst, cap, i, mxa_sx_ll_data_of(w));
    }
    return 1;
}

typedef struct {
    mxa_sx_send_desc_t d;
} host_send_t;

/* Host executor: the payload of message d into its slot as LL words, or
 * (bulk) its bytes into its bulk slot and a release; then the header's LL
 * words into the slot and into the receiver's host-page mirror (device
 * rings). One relaxed 64-bit store per word (sx_proto.h). */
static void sx_host_write(const mxa_sx_send_desc_t *d)
{
    uint64_t *h = (uint64_t *)(uintptr_t)d->slot;
    if (d->bulk) {
        if (d->bytes)
            memcpy((void *)(uintptr_t)d->bulk, (const void *)(uintptr_t)d->src, (size_t)d->bytes);
        mxa_sx_fence();
    } else {
        uint32_t f = mxa_sx_ll_flag(d->n);
        uint64_t *pay = h + MXA_SX_HDR_BYTES / sizeof(uint64_t);
        const unsigned char *src = (const unsigned char *)(uintptr_t)d->src;
        uint64_t nw = mxa_sx_ll_words(d->bytes);
        for (uint64_t i = 0; i < nw; i++)
            mxa_sx_store_relaxed(pay + i, mxa_sx_ll_word(mxa_sx_ll_gather(src, d->bytes, i), f));
    }
    uint64_t w[MXA_SX_LL_HDR_WORDS];
    mxa_sx_ll_header(d, w);
    for (int i = 0; i < MXA_SX_LL_HDR_WORDS; i++)
        mxa_sx_store_relaxed(h + i, w[i]);
    for (int i = 0; i < MXA_SX_LL_HDR_WORDS && d->mirror; i++)
        mxa_sx_store_relaxed((uint64_t *)(uintptr_t)d->mirror + i, w[i]);
}

static void host_send_step(void *arg)
{
    host_send_t *hs = arg;
    mxa_sx_send_desc_t *d = &hs->d;
    if (d->pack.buf) /* a fused pack: the non-contiguous buffer into src */
        mxa_pack_host(&d->pack, d->pack.limit);
    int in_ring = mxa_sx_slot_claim(d);
    if (in_ring)
        sx_host_write(d);
    else if (d->bytes)
        memcpy((void *)(uintptr_t)d->bounce, (const void *)(uintptr_t)d->src, (size_t)d->bytes);
    mxa_sx_record_finish((mxa_sx_record_t *)(uintptr_t)d->record, d->bytes,
                         in_ring ? MXA_SX_SENT : MXA_SX_BOUNCED, -1);
    if (d->trigger_word) {
        mxa_store_max((_Atomic uint64_t *)(uintptr_t)d->trigger_word, d->trigger_seq);
        mxa_notify_trigger();
    }
    free(hs);
}

typedef struct {
    int n;
    mxa_sx_limits_t lim;
    mxa_sx_recv_desc_t d[];
} host_recv_t;

/* The end of a host receive step: the received length into the desc's
 * len_word first (work after the step in stream order reads it: a
 * derived type's unpack), then the record. */
static void host_recv_finish(const mxa_sx_recv_desc_t *d, mxa_sx_record_t *rec, uint64_t take,
                             int outcome, int32_t slot)
{
    if (d->unpack.buf) { /* a fused unpack: dst into the user's buffer */
        if (outcome == MXA_SX_DELIVERED)
            mxa_sx_fence();
        mxa_pack_host(&d->unpack, mxa_sx_recv_len(rec, outcome, take));
    }
    if (d->len_word)
        __atomic_store_n((uint64_t *)(uintptr_t)d->len_word, mxa_sx_recv_len(rec, outcome, take),
                         __ATOMIC_RELEASE);
    mxa_sx_record_finish(rec, take, outcome, slot);
}

static void host_recv_one(const mxa_sx_recv_desc_t *d, const mxa_sx_limits_t *lim)
{
    mxa_sx_record_t *rec = (mxa_sx_record_t *)(uintptr_t)d->record;
    uint64_t start = sx_now_ns();
    unsigned spins = 0;
    if (d->after_word) {
        const _Atomic uint64_t *w = (const _Atomic uint64_t *)(uintptr_t)d->after_word;
        while ((int64_t)(atomic_load_explicit(w, memory_order_acquire) - d->after_seq) < 0)
            sx_backoff(&spins);
        spins = 0;
    }
    for (;;) {
        /* the record's word first: a final word ends the wait; UCX: the
         * message is not in the ring */
        uint64_t desc = mxa_sx_load_acquire(&rec->desc);
        if (desc == MXA_SX_DESC_COPY) { /* it came by UCX into host staging */
            uint64_t bytes = rec->copy_bytes;
            uint64_t take = bytes <= d->cap ? bytes : d->cap;
            if (take)
                memcpy((void *)(uintptr_t)d->dst, (const void *)(uintptr_t)rec->copy_src,
                       (size_t)take);
            host_recv_finish(d, rec, take, bytes <= d->cap ? MXA_SX_OK : MXA_SX_TRUNCATED, -1);
            return;
        }
        if (desc != MXA_SX_DESC_NONE && desc != MXA_SX_DESC_UCX) {
            host_recv_finish(d, rec, 0,
                             desc == MXA_SX_DESC_DELIVERED ? MXA_SX_DELIVERED : MXA_SX_ABORTED, -1);
            return;
        }
        int ring_off = desc == MXA_SX_DESC_UCX;
        for (uint32_t i = 0; i < 2 * d->nslots && !ring_off; i++) {
            /* the host ring's slots, then the device ring's */
            uint64_t base = i < d->nslots ? d->ring : d->dring;
            uint32_t s = i % d->nslots;
            if (!base)
                continue;
            const uint64_t *h = (const uint64_t *)(uintptr_t)(base + s * d->slot_stride);
            uint64_t w[MXA_SX_LL_HDR_WORDS], n, bytes;
            uint32_t f;
            sx_ll_load_header(h, w);
            if (!mxa_sx_ll_match(w, d->ctx, d->tag, d->k, &n, &bytes, &f))
                continue;
            int bulk = mxa_sx_hdr_bulk(bytes);
            bytes = mxa_sx_hdr_len(bytes);
            uint64_t take = bytes <= d->cap ? bytes : d->cap;
            if (bulk) {
                /* the data was written before the header (a release) */
                mxa_sx_fence();
                if (take)
                    memcpy((void *)(uintptr_t)d->dst,
                           (const void *)(uintptr_t)mxa_sx_bulk_data(d, n), (size_t)take);
                mxa_sx_bulk_consume(d, n, 1);
                mxa_sx_consume((uint64_t *)(uintptr_t)d->consumed, s, n);
                host_recv_finish(d, rec, take, bytes <= d->cap ? MXA_SX_OK : MXA_SX_TRUNCATED,
                                 (int32_t)s);
                return;
            }
            uint64_t deadline = lim->timeout_ns ? start + lim->timeout_ns : 0;
            if (!sx_ll_copy_out(h + MXA_SX_HDR_BYTES / sizeof(uint64_t), f, take,
                                (unsigned char *)(uintptr_t)d->dst, take, deadline)) {
                int ab = lim->abort_word &&
                         mxa_sx_load_acquire((const uint64_t *)(uintptr_t)lim->abort_word);
                host_recv_finish(d, rec, 0, ab ? MXA_SX_ABORTED : MXA_SX_TIMED_OUT, -1);
                return;
            }
            mxa_sx_consume((uint64_t *)(uintptr_t)d->consumed, s, n);
            host_recv_finish(d, rec, take, bytes <= d->cap ? MXA_SX_OK : MXA_SX_TRUNCATED,
                             (int32_t)s);
            return;
        }
        if (lim->abort_word && mxa_sx_load_acquire((const uint64_t *)(uintptr_t)lim->abort_word)) {
            host_recv_finish(d, rec, 0, MXA_SX_ABORTED, -1);
            return;
        }
        if (lim->timeout_ns && sx_now_ns() - start > lim->timeout_ns) {
            host_recv_finish(d, rec, 0, MXA_SX_TIMED_OUT, -1);
            return;
        }
        sx_backoff(&spins);
    }
}

static void host_recv_step(void *arg)
{
    host_recv_t *hr = arg;
    for (int i = 0; i < hr->n; i++)
        host_recv_one(&hr->d[i], &hr->lim);
    free(hr);
}

/* -------------------------------------------------------------- steps */

mxu_status_t mxa_sx_enqueue_send(mxa_stream_t *s, mxa_sx_send_t *m)
{
    mxa_sx_link_t *l = m->link;
    unsigned nslots = l->ctrl->nslots;
    size_t slot = (size_t)(m->n % nslots);
    /* the device ring once mapped for this stream; else the shared one */
    int dr = sx_dring_in_use(l, s);
    mxa_sx_send_desc_t d = {
        .slot = dr ? l->dr_base + slot * l->slot_stride
                   : sx_addr(l, s, l->ring_off + slot * l->slot_stride),
        .src = (uint64_t)(uintptr_t)m->src,
        .bytes = m->bytes,
        .k = m->k,
        .n = m->n,
        .ctx = m->ctx,
        .tag = m->tag,
        .trigger_seq = m->trigger_seq,
        .written = sx_addr(l, s, offsetof(mxa_sx_ctrl_t, written) + sizeof(uint64_t) * slot),
        .consumed = sx_addr(l, s, offsetof(mxa_sx_ctrl_t, consumed) + sizeof(uint64_t) * slot),
        .bounce = (uint64_t)(uintptr_t)m->bounce,
        .record = (uint64_t)(uintptr_t)m->record,
        .early_claim = (uint64_t)(m->early_claim != 0),
        .mirror = dr ? sx_addr(l, s,
                               offsetof(mxa_sx_ctrl_t, mirror) +
                                   sizeof(uint64_t) * MXA_SX_LL_HDR_WORDS * slot)
                     : 0,
    };
    if (m->pack && !m->bulk)
        d.pack = *m->pack;
    if (m->bulk) {
        /* bulk slot n % bulk_slots of the device ring (the engine asked
         * mxa_sx_link_bulk_limit: mapped, with scratch) */
        unsigned nb = (unsigned)l->ctrl->bulk_slots;
        if (!dr || !l->scratch || nb == 0)
            return MXU_ERR_UNSUPPORTED;
        size_t b = (size_t)(m->n % nb);
        d.bulk = l->dr_base + l->ctrl->bulk_off + b * l->ctrl->bulk_bytes;
        d.bulk_written =
            sx_addr(l, s, offsetof(mxa_sx_ctrl_t, bulk_written) + sizeof(uint64_t) * b);
        d.bulk_consumed =
            sx_addr(l, s, offsetof(mxa_sx_ctrl_t, bulk_consumed) + sizeof(uint64_t) * b);
        d.scratch = l->scratch + 2 * sizeof(uint64_t) * slot;
    }
    if (!dr)
        atomic_fetch_add(&l->host_flight, 1);
    mxu_status_t st = MXU_ERR_UNSUPPORTED;
    if (s->kind == MXA_KIND_HOST) {
        host_send_t *hs = malloc(sizeof(*hs));
        if (!hs) {
            st = MXU_ERR_NO_MEMORY;
            MXU_LOG(MXU_LOG_ERROR, "SX: out of memory");
        } else {
            hs->d = d;
            hs->d.trigger_word = m->trigger_seq ? (uint64_t)(uintptr_t)s->trigger_word : 0;
            st = mxa_host_stream_launch(s->handle, host_send_step, hs);
            if (st != MXU_OK)
                free(hs);
        }
    }
#ifdef MPIXACC_HAVE_CUDA
    else if (s->kind == MXA_KIND_CUDA)
        st = mxa_cuda_sx_send(s, &d);
#endif
    if (st != MXU_OK) {
        mxa_sx_link_send_ran(l, dr); /* nothing was written */
        return st;
    }
    if (dr && !atomic_load(&l->dr_used)) {
        __atomic_store_n(&l->ctrl->dr_from, m->n + 1, __ATOMIC_RELEASE);
        atomic_store(&l->dr_used, 1);
        sx_host_closing(l);
    }
    m->in_dring = dr;
    return MXU_OK;
}

static void sx_recv_desc(const mxa_stream_t *s, const mxa_sx_recv_t *r, mxa_sx_recv_desc_t *d)
{
    mxa_sx_link_t *l = r->link;
    memset(d, 0, sizeof(*d));
    d->ring = sx_host_ring_live(l) ? sx_addr(l, s, l->ring_off) : 0;
    d->dring = sx_dring_for(l, s) ? l->dr_base : 0;
    d->consumed = sx_addr(l, s, offsetof(mxa_sx_ctrl_t, consumed));
    d->dst = (uint64_t)(uintptr_t)r->dst;
    d->cap = r->cap;
    d->record = (uint64_t)(uintptr_t)r->record;
    d->serial = r->record->serial;
    d->k = r->k;
    d->slot_stride = l->slot_stride;
    d->ctx = r->ctx;
    d->tag = r->tag;
    d->nslots = l->ctrl->nslots;
    d->flags = r->fence ? MXA_SX_RECV_FENCE : 0;
    d->len_word = (uint64_t)(uintptr_t)r->len_word;
    if (r->after && r->after_seq) {
        d->after_word = (uint64_t)(uintptr_t)r->after->trigger_word;
        d->after_seq = r->after_seq;
    }
    d->blocks = 1;
    if (r->unpack) /* (cap at most MXA_SX_FUSE_UNPACK_MAX: one block) */
        d->unpack = *r->unpack;
    if (d->dring && l->ctrl->bulk_slots > 0 && l->ctrl->bulk_slots <= MXA_SX_MAX_BULK) {
        d->bulk = l->dr_base + l->ctrl->bulk_off;
        d->bulk_bytes = l->ctrl->bulk_bytes;
        d->bulk_slots = (uint32_t)l->ctrl->bulk_slots;
        d->bulk_consumed = sx_addr(l, s, offsetof(mxa_sx_ctrl_t, bulk_consumed));
        d->counters = l->dr_base + l->ctrl->count_off;
        /* a CUDA step copies a bulk message out with one block per
         * MXA_SX_BULK_RECV_CHUNK of the buffer (they count themselves
         * done in the ring's counters) */
        if (s->kind == MXA_KIND_CUDA && r->cap > MXA_SX_BULK_RECV_CHUNK) {
            uint64_t b = (r->cap + MXA_SX_BULK_RECV_CHUNK - 1) / MXA_SX_BULK_RECV_CHUNK;
            d->blocks = (uint32_t)(b < MXA_SX_BULK_RECV_BLOCKS ? b : MXA_SX_BULK_RECV_BLOCKS);
        }
    }
}

mxu_status_t mxa_sx_enqueue_recv(mxa_stream_t *s, const mxa_sx_recv_t *r, int n)
{
    if (n <= 0)
        return MXU_OK;
    if (s->kind == MXA_KIND_HOST) {
        host_recv_t *hr = malloc(sizeof(*hr) + sizeof(mxa_sx_recv_desc_t) * (size_t)n);
        if (!hr)
            MXU_FAIL(MXU_ERR_NO_MEMORY, "SX: out of memory");
        hr->n = n;
        hr->lim = sx.limits;
        for (int i = 0; i < n; i++)
            sx_recv_desc(s, &r[i], &hr->d[i]);
        mxu_status_t st = mxa_host_stream_launch(s->handle, host_recv_step, hr);
        if (st != MXU_OK)
            free(hr);
        return st;
    }
#ifdef MPIXACC_HAVE_CUDA
    if (s->kind == MXA_KIND_CUDA) {
        for (int i = 0; i < n; i += MXA_SX_RECV_BATCH) {
            mxa_sx_recv_desc_t d[MXA_SX_RECV_BATCH];
            int m = n - i < MXA_SX_RECV_BATCH ? n - i : MXA_SX_RECV_BATCH;
            for (int j = 0; j < m; j++)
                sx_recv_desc(s, &r[i + j], &d[j]);
            MXU_TRY(mxa_cuda_sx_recv(s, d, m, &sx.limits));
        }
        return MXU_OK;
    }
#endif
    return MXU_ERR_UNSUPPORTED;
}

typedef struct {
    const _Atomic uint64_t *word;
    uint64_t seq;
} host_after_t;

static void host_after_step(void *arg)
{
    host_after_t *a = arg;
    unsigned spins = 0;
    while ((int64_t)(atomic_load_explicit(a->word, memory_order_acquire) - a->seq) < 0)
        sx_backoff(&spins);
    free(a);
}

mxu_status_t mxa_sx_enqueue_after(mxa_stream_t *s, mxa_stream_t *other, uint64_t seq)
{
    if (s->kind == MXA_KIND_HOST && other->kind == MXA_KIND_HOST) {
        host_after_t *a = malloc(sizeof(*a));
        if (!a)
            MXU_FAIL(MXU_ERR_NO_MEMORY, "SX: out of memory");
        a->word = other->trigger_word;
        a->seq = seq;
        mxu_status_t st = mxa_host_stream_launch(s->handle, host_after_step, a);
        if (st != MXU_OK)
            free(a);
        return st;
    }
#ifdef MPIXACC_HAVE_CUDA
    if (s->kind == MXA_KIND_CUDA && other->kind == MXA_KIND_CUDA)
        return mxa_cuda_sx_after(s, other, seq);
#endif
    return MXU_ERR_UNSUPPORTED;
}

mxa_stream_t *mxa_sx_library_stream(mxa_sx_link_t *l, int memtype)
{
    if (memtype == MXA_MEM_HOST || l->registered != 1) {
        if (!l->lib_host) {
            l->lib_host = mxa_library_host_stream(NULL);
            sx.lib_host_used |= l->lib_host != NULL;
        }
        return l->lib_host;
    }
#ifdef MPIXACC_HAVE_CUDA
    if (!l->lib_stream)
        l->lib_stream = mxa_cuda_sx_library_stream(l->ctx);
#endif
    return l->lib_stream;
}
