/*
 * mpix_acc.h - stream-ordered MPI point-to-point communication (mpix-acc).
 *
 * Public C API. Usable from C, C++ and CUDA. Includes mpi.h and nothing from
 * CUDA: a cudaStream_t is passed directly as an MPIX_Acc_stream.
 *
 * See mpix_acc(3) and the per-function man pages for the semantics.
 */
#ifndef MPIX_ACC_H
#define MPIX_ACC_H

#include <mpi.h>

#define MPIX_ACC_VERSION_MAJOR 0
#define MPIX_ACC_VERSION_MINOR 1
#define MPIX_ACC_VERSION_PATCH 0

#ifdef __cplusplus
extern "C" {
#endif

/* A cudaStream_t, or a host stream made by MPIX_Acc_Hoststream_create.
 * NULL: the CUDA legacy default stream when CUDA is present, otherwise
 * "no stream: execute immediately". */
typedef void *MPIX_Acc_stream;

/* Datatype attribute key (valid after MPI_Init): a stream attached with
 * MPI_Type_set_attr(type, MPIX_ACC_STREAM_KEYVAL, (void *)stream) makes
 * point-to-point calls using that datatype stream-ordered. */
extern int MPIX_ACC_STREAM_KEYVAL;

/* explicit calls (mpix_acc(3); MPIX_Acc_Isend(3), ...) */
int MPIX_Acc_Isend(MPIX_Acc_stream stream, const void *buf, int count, MPI_Datatype datatype,
                   int dest, int tag, MPI_Comm comm, MPI_Request *request);
int MPIX_Acc_Irecv(MPIX_Acc_stream stream, void *buf, int count, MPI_Datatype datatype, int source,
                   int tag, MPI_Comm comm, MPI_Request *request);
int MPIX_Acc_Wait(MPIX_Acc_stream stream, MPI_Request *request, MPI_Status *status);
int MPIX_Acc_Waitall(MPIX_Acc_stream stream, int count, MPI_Request requests[],
                     MPI_Status statuses[]);
int MPIX_Acc_Send(MPIX_Acc_stream stream, const void *buf, int count, MPI_Datatype datatype,
                  int dest, int tag, MPI_Comm comm);
int MPIX_Acc_Recv(MPIX_Acc_stream stream, void *buf, int count, MPI_Datatype datatype, int source,
                  int tag, MPI_Comm comm, MPI_Status *status);

/* collectives ordered on a stream (MPIX_Acc_Allreduce(3)): enqueued at the
 * call, their results exist when the stream reaches them; host streams so far */
int MPIX_Acc_Barrier(MPIX_Acc_stream stream, MPI_Comm comm);
int MPIX_Acc_Bcast(MPIX_Acc_stream stream, void *buf, int count, MPI_Datatype datatype, int root,
                   MPI_Comm comm);
int MPIX_Acc_Reduce(MPIX_Acc_stream stream, const void *sendbuf, void *recvbuf, int count,
                    MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm);
int MPIX_Acc_Allreduce(MPIX_Acc_stream stream, const void *sendbuf, void *recvbuf, int count,
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPIX_Acc_Allgather(MPIX_Acc_stream stream, const void *sendbuf, int sendcount,
                       MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                       MPI_Comm comm);
int MPIX_Acc_Alltoall(MPIX_Acc_stream stream, const void *sendbuf, int sendcount,
                      MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                      MPI_Comm comm);
/* ... and their nonblocking forms: the request completes when the stream
 * passed the collective (MPIX_Acc_Wait orders a stream after it) */
int MPIX_Acc_Ibarrier(MPIX_Acc_stream stream, MPI_Comm comm, MPI_Request *request);
int MPIX_Acc_Ibcast(MPIX_Acc_stream stream, void *buf, int count, MPI_Datatype datatype, int root,
                    MPI_Comm comm, MPI_Request *request);
int MPIX_Acc_Ireduce(MPIX_Acc_stream stream, const void *sendbuf, void *recvbuf, int count,
                     MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm,
                     MPI_Request *request);
int MPIX_Acc_Iallreduce(MPIX_Acc_stream stream, const void *sendbuf, void *recvbuf, int count,
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request);
int MPIX_Acc_Iallgather(MPIX_Acc_stream stream, const void *sendbuf, int sendcount,
                        MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                        MPI_Comm comm, MPI_Request *request);
int MPIX_Acc_Ialltoall(MPIX_Acc_stream stream, const void *sendbuf, int sendcount,
                       MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                       MPI_Comm comm, MPI_Request *request);

/* partitioned requests whose partitions kernels mark ready and see arrive
 * (MPIX_Acc_Psend_init(3); device side: mpix_acc_device.cuh) */
typedef struct mpix_acc_dreq mpix_acc_dreq_t;
int MPIX_Acc_Psend_init(const void *buf, int partitions, MPI_Count count, MPI_Datatype datatype,
                        int dest, int tag, MPI_Comm comm, MPI_Info info, MPI_Request *request);
int MPIX_Acc_Precv_init(void *buf, int partitions, MPI_Count count, MPI_Datatype datatype,
                        int source, int tag, MPI_Comm comm, MPI_Info info, MPI_Request *request);
int MPIX_Acc_Start(MPIX_Acc_stream stream, MPI_Request *request);
int MPIX_Acc_Pready(int partition, MPI_Request request);
int MPIX_Acc_Pready_range(int partition_low, int partition_high, MPI_Request request);
int MPIX_Acc_Parrived(MPI_Request request, int partition, int *flag);
int MPIX_Acc_Prequest_get_device(MPI_Request request, mpix_acc_dreq_t **dreq);

/* host streams (MPIX_Acc_Hoststream_create(3)): in-order host queues executed by a library-owned thread */
int MPIX_Acc_Hoststream_create(MPIX_Acc_stream *stream);
int MPIX_Acc_Hoststream_launch(MPIX_Acc_stream stream, void (*fn)(void *arg), void *arg);
int MPIX_Acc_Hoststream_synchronize(MPIX_Acc_stream stream);
int MPIX_Acc_Hoststream_free(MPIX_Acc_stream *stream);

/* host graphs (MPIX_Acc_Hoststream_begin_capture(3)): a host stream's launches and its
 * stream-ordered point-to-point messages captured once, launched any number of times */
typedef struct mpix_acc_hostgraph *MPIX_Acc_hostgraph;
int MPIX_Acc_Hoststream_begin_capture(MPIX_Acc_stream stream);
int MPIX_Acc_Hoststream_end_capture(MPIX_Acc_stream stream, MPIX_Acc_hostgraph *graph);
int MPIX_Acc_Hostgraph_launch(MPIX_Acc_hostgraph graph, MPIX_Acc_stream stream);
int MPIX_Acc_Hostgraph_errors(MPIX_Acc_hostgraph graph, unsigned long *count);
int MPIX_Acc_Hostgraph_free(MPIX_Acc_hostgraph *graph);

/* stream communicators and hints (mpix_acc(3): Stream communicators and
 * info keys) */
int MPIX_Acc_Comm_set_stream(MPI_Comm comm, MPIX_Acc_stream stream); /* collective */
int MPIX_Acc_Info_set_stream(MPI_Info info, MPIX_Acc_stream stream);

/* Info keys (MPIX_Acc_Info_set_stream(3)) */
#define MPIX_ACC_INFO_STREAM "mpix_acc_stream"
#define MPIX_ACC_INFO_STREAM_ALIAS "CUDA_STREAM"
#define MPIX_ACC_INFO_RECV_POST "mpix_acc_recv_post"
#define MPIX_ACC_INFO_EAGER_LIMIT "mpix_acc_eager_limit"
#define MPIX_ACC_INFO_MATCH "mpix_acc_match" /* "call" (default) or "dynamic" */

#ifdef __cplusplus
}
#endif

#endif /* MPIX_ACC_H */
