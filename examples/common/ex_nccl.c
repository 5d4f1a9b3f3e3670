/*
 * ex_nccl.c - see ex_nccl.h.
 */
#include "ex_nccl.h"
#include "ex_util.h"

#if defined(EX_HAVE_CUDA) && defined(__has_include)
#if __has_include(<nccl.h>)
#define EX_HAVE_NCCL 1
#endif
#endif

#ifdef EX_HAVE_NCCL
#include <dlfcn.h>
#include <nccl.h>

static struct {
    int ok, role;
    ncclComm_t comm;
    ncclResult_t (*GetUniqueId)(ncclUniqueId *);
    ncclResult_t (*CommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    ncclResult_t (*Send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*Recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*GroupStart)(void);
    ncclResult_t (*GroupEnd)(void);
    const char *(*GetErrorString)(ncclResult_t);
    ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                              cudaStream_t);
} nc;

#define EX_NCCL(call)                                                                              \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess)                                                                     \
            ex_die("%s:%d: %s: %s", __FILE__, __LINE__, #call, nc.GetErrorString(r_));             \
    } while (0)

int ex_nccl_setup(int is_device, int role, char *why, size_t whylen)
{
    int ok = is_device, all = 0, rank;
    void *h = NULL;
    why[0] = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!ok)
        snprintf(why, whylen, "needs the CUDA backend");
    if (ok && !(h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL)) &&
        !(h = dlopen("libnccl.so", RTLD_NOW | RTLD_GLOBAL))) {
        snprintf(why, whylen, "libnccl.so.2 not loadable: %s", dlerror());
        ok = 0;
    }
    if (ok) {
        *(void **)&nc.GetUniqueId = dlsym(h, "ncclGetUniqueId");
        *(void **)&nc.CommInitRank = dlsym(h, "ncclCommInitRank");
        *(void **)&nc.CommDestroy = dlsym(h, "ncclCommDestroy");
        *(void **)&nc.Send = dlsym(h, "ncclSend");
        *(void **)&nc.Recv = dlsym(h, "ncclRecv");
        *(void **)&nc.GroupStart = dlsym(h, "ncclGroupStart");
        *(void **)&nc.GroupEnd = dlsym(h, "ncclGroupEnd");
        *(void **)&nc.GetErrorString = dlsym(h, "ncclGetErrorString");
        *(void **)&nc.AllReduce = dlsym(h, "ncclAllReduce");
        if (!nc.AllReduce || !nc.GetUniqueId || !nc.CommInitRank || !nc.CommDestroy || !nc.Send ||
            !nc.Recv || !nc.GroupStart || !nc.GroupEnd || !nc.GetErrorString) {
            snprintf(why, whylen, "libnccl lacks ncclSend/ncclRecv/ncclAllReduce (NCCL < 2.7?)");
            ok = 0;
        }
    }
    EX_MPI(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!all) {
        if (ok)
            snprintf(why, whylen, "NCCL not usable on every rank");
        return 0;
    }
    ncclUniqueId id;
    if (rank == 0)
        EX_NCCL(nc.GetUniqueId(&id));
    EX_MPI(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
    ncclResult_t r = ncclSuccess;
    if (role >= 0)
        r = nc.CommInitRank(&nc.comm, 2, id, role);
    int good = r == ncclSuccess, all_good = 0;
    EX_MPI(MPI_Allreduce(&good, &all_good, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!all_good) {
        if (good && nc.comm)
            nc.CommDestroy(nc.comm);
        nc.comm = NULL;
        snprintf(why, whylen, "ncclCommInitRank failed%s%s (NCCL needs one GPU per rank)",
                 good ? " on the peer" : ": ", good ? "" : nc.GetErrorString(r));
        return 0;
    }
    nc.role = role;
    nc.ok = 1;
    return 1;
}

void ex_nccl_send(const void *buf, size_t n, void *stream)
{
    EX_NCCL(nc.Send(buf, n, ncclUint8, 1 - nc.role, nc.comm, (cudaStream_t)stream));
}

void ex_nccl_recv(void *buf, size_t n, void *stream)
{
    EX_NCCL(nc.Recv(buf, n, ncclUint8, 1 - nc.role, nc.comm, (cudaStream_t)stream));
}

void ex_nccl_allreduce_i32(const void *sbuf, void *rbuf, size_t count, void *stream)
{
    EX_NCCL(nc.AllReduce(sbuf, rbuf, count, ncclInt32, ncclSum, nc.comm, (cudaStream_t)stream));
}

void ex_nccl_group_start(void) { EX_NCCL(nc.GroupStart()); }
void ex_nccl_group_end(void) { EX_NCCL(nc.GroupEnd()); }

void ex_nccl_teardown(void)
{
    if (nc.ok && nc.comm)
        EX_NCCL(nc.CommDestroy(nc.comm));
    nc.comm = NULL;
    nc.ok = 0;
}

#else /* no NCCL in this build */

int ex_nccl_setup(int is_device, int role, char *why, size_t whylen)
{
    (void)role;
    if (!is_device)
        snprintf(why, whylen, "needs the CUDA backend");
    else
        snprintf(why, whylen, "built without NCCL (no nccl.h found at build time)");
    return 0;
}

static void ex_nccl_absent(void) { ex_die("NCCL is not available in this build"); }
void ex_nccl_send(const void *buf, size_t n, void *stream)
{
    (void)buf, (void)n, (void)stream;
    ex_nccl_absent();
}
void ex_nccl_recv(void *buf, size_t n, void *stream)
{
    (void)buf, (void)n, (void)stream;
    ex_nccl_absent();
}
void ex_nccl_allreduce_i32(const void *sbuf, void *rbuf, size_t count, void *stream)
{
    (void)sbuf, (void)rbuf, (void)count, (void)stream;
    ex_nccl_absent();
}
void ex_nccl_group_start(void) { ex_nccl_absent(); }
void ex_nccl_group_end(void) { ex_nccl_absent(); }
void ex_nccl_teardown(void) {}

#endif
